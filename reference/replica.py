"""A slave's side of replication, as a sans-IO state machine.

The slave mirrors the master's segments byte for byte.  It appends a DATA
frame only when the frame starts exactly at its end offset (otherwise it
drops the connection, as DefaultHAClient does), verifies every complete
record it received, keeps the chain hash of its log, and reports the offset
it holds (its page cache: RocketMQ slaves ack maxPhyOffset, not fsync'd data).

Memory is bounded: only the segment holding the end of the last complete
record (and any after it) is kept, with its part of the index; a ``ghost``
index of the whole log can be kept for observers (the simulator).
"""

from __future__ import annotations

from reference.checkpoints import CheckpointTable
from reference.commitlog import LogIndex
from reference.effects import CloseMaster, CreateSegment, SendAck, SendHandshake, WriteData, ZeroTail
from reference.record import BLANK, END_FILE_MIN_BLANK_LENGTH, HEADER, UNWRITTEN, LogScan, read_head, record_crc_ok


class ReplicaCore:
    def __init__(self, name: str, segment_size: int, ghost: bool = False) -> None:
        self.name = name
        self.segment_size = segment_size
        self.segments: dict[int, bytearray] = {}   # from the segment holding parsed_end on
        self.index = LogIndex(segment_size)
        self.ghost: LogIndex | None = LogIndex(segment_size) if ghost else None
        self.parsed_end = 0      # end of the last complete record (or padded segment)
        self.received_end = 0    # bytes received; beyond parsed_end is a partial record
        self.connected = False
        self.effects: list = []
        self.spec_steps: list[tuple] = []

    @classmethod
    def recovered(cls, name: str, segment_size: int, scan: LogScan, ghost: LogIndex | None = None) -> ReplicaCore:
        core = cls(name, segment_size)
        cp = scan.checkpoints[-1]
        core.index = LogIndex(segment_size, cp.start, cp.records, cp.chain)
        core.index.checkpoints = CheckpointTable(segment_size, scan.checkpoints)   # held_log hands them on
        if scan.tail_start < scan.end_offset:
            seg = bytearray(segment_size)
            seg[: len(scan.tail_bytes)] = scan.tail_bytes
            core.segments[scan.tail_start] = seg
            core.index.rebuild(scan.tail_records, core._header)
        core.ghost = ghost
        core.parsed_end = core.received_end = scan.end_offset
        return core

    def _header(self, rec) -> bytes:
        pos = rec.offset % self.segment_size
        return bytes(self.segments[rec.offset - pos][pos: pos + 12])

    def take_effects(self) -> list:
        out, self.effects = self.effects, []
        return out

    # ------------------------------------------------------------------ events

    def connect(self) -> None:
        """A new connection: forget a partial record, tell the master where we are."""
        if self.received_end > self.parsed_end:
            start = self.parsed_end - self.parsed_end % self.segment_size
            self.segments[start][self.parsed_end - start:] = bytes(self.segment_size - (self.parsed_end - start))
            self.effects.append(ZeroTail(start, self.parsed_end - start))
            assert len(self.segments[start]) == self.segment_size, (start, len(self.segments[start]))
            self.received_end = self.parsed_end
        self.connected = True
        self.effects.append(SendHandshake(self.parsed_end, self.index.chain_at(self.parsed_end), self.index.count))

    def heartbeat(self) -> None:
        """HAClient's periodic report (haSendHeartbeatInterval): what this slave holds,
        so an idle link is not mistaken for a dead one."""
        if self.connected:
            self.effects.append(SendAck(self.received_end, self.index.count))

    def disconnected(self) -> None:
        self.connected = False

    def on_data(self, offset: int, data: bytes) -> None:
        """HAClient.dispatchReadRequest: append a DATA frame at our end, or drop the link."""
        if not self.connected:
            return
        if offset != self.received_end:
            self._drop(f"DATA frame at offset {offset}, but this slave's log ends at {self.received_end}")
            return
        pos = 0
        while pos < len(data):
            start = self.received_end - self.received_end % self.segment_size
            if start not in self.segments:
                self.segments[start] = bytearray(self.segment_size)
                self.effects.append(CreateSegment(start))
            inside = self.received_end - start
            n = min(len(data) - pos, self.segment_size - inside)
            chunk = data[pos: pos + n]
            self.segments[start][inside: inside + n] = chunk
            # the mirror of each file is exactly a file
            assert len(self.segments[start]) == self.segment_size, (start, len(self.segments[start]))
            self.effects.append(WriteData(start, inside, chunk))
            self.received_end += n
            pos += n
        assert self.received_end == offset + len(data), (self.received_end, offset, len(data))    # landed whole
        if (problem := self._parse()) is not None:
            self._drop(problem)
            return
        self._forget_behind()
        self.effects.append(SendAck(self.received_end, self.index.count))

    def _forget_behind(self) -> None:
        """Drop the segments (and index) before the one holding parsed_end."""
        start = self.parsed_end - self.parsed_end % self.segment_size
        if start > self.index.base:
            self.index.forget_below(start)
            for s in [s for s in self.segments if s < start]:
                del self.segments[s]

    def on_bad_input(self, reason: str) -> None:
        """The runtime could not decode what the master sent, or it was not a DATA frame."""
        self._drop(reason)

    def _drop(self, reason: str) -> None:
        self.connected = False
        self.effects.append(CloseMaster(reason))

    def _parse(self) -> str | None:
        """Index every record completed by the new bytes; None, or what was wrong."""
        size = self.segment_size
        while self.parsed_end + END_FILE_MIN_BLANK_LENGTH <= self.received_end:
            start = self.parsed_end - self.parsed_end % size
            seg = self.segments[start]
            pos = self.parsed_end - start
            # read_head lets no record end within END_FILE_MIN_BLANK_LENGTH of the segment's end,
            # so a header always fits at parsed_end
            head = read_head(seg, pos, size)
            if head == UNWRITTEN:
                return f"bad record header at {self.parsed_end}: zeros where a record should start"
            if head == BLANK:
                if self.received_end < start + size:
                    return None
                self.parsed_end = start + size
                self.index.add_segment_end(self.parsed_end)
                if self.ghost is not None:
                    self.ghost.add_segment_end(self.parsed_end)
                continue
            if isinstance(head, str):
                return f"bad record header at {self.parsed_end}: {head}"
            total = head
            if self.parsed_end + total > self.received_end:
                return None
            key = HEADER.unpack_from(seg, pos)[3]
            if not record_crc_ok(seg, pos, total):
                return f"CRC mismatch in the record at {self.parsed_end}"
            header = bytes(seg[pos: pos + 12])
            self.index.add_record(self.parsed_end, header, self.parsed_end + total, key)
            if self.ghost is not None:
                self.ghost.add_record(self.parsed_end, header, self.parsed_end + total, key, twin=self.index)
            self.parsed_end += total
            self.spec_steps.append(("Transfer", self.name, key))   # the key: for a trace writer
        return None
