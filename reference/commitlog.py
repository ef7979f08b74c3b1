"""The master's commit log, in memory: fixed-size segments named by their
start offset, and the watermarks ``wrote`` >= ``issued`` >= ``committed`` >=
``flushed``.

A segment's bytearray plays the part of RocketMQ's mapped buffer: without
the transient store pool an append lands in it and is handed to the page
cache at once (a WriteData effect); with the pool the bytearray is the
off-heap write buffer and only ``commit`` hands data to the page cache.
``issued`` is what was handed over; ``committed`` is what the runtime
confirmed written (``confirm``), so nothing downstream (fsync, HA transfer)
ever reaches bytes whose write failed.  No I/O happens here.
"""

from __future__ import annotations

from bisect import bisect_right

from reference.effects import CreateSegment, WriteData
from reference.record import (
    CHAIN_START, END_FILE_MIN_BLANK_LENGTH, Record, RecoveryReport, blank, chain_next, encode,
    record_size,
)


class LogIndex:
    """Where the message records of a log end, their keys, and the chain hash
    of the log prefix at every boundary (record ends and padded segment ends).
    Master and slave keep one each; the handshake compares chain hashes."""

    def __init__(self, segment_size: int) -> None:
        self.segment_size = segment_size
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.keys: list[int] = []
        self.chain: dict[int, bytes] = {0: CHAIN_START}
        self.last_chain = CHAIN_START

    def add_record(self, offset: int, header: bytes, end: int, key: int) -> None:
        previous_end = self.ends[-1] if self.ends else 0
        if offset != previous_end:  # the previous segment was padded: its end is a boundary
            assert offset % self.segment_size == 0, (offset, previous_end)
            self.chain[offset] = self.last_chain
        self.last_chain = chain_next(self.last_chain, offset, header)
        self.chain[end] = self.last_chain
        self.starts.append(offset)
        self.ends.append(end)
        self.keys.append(key)

    def add_segment_end(self, offset: int) -> None:
        assert offset % self.segment_size == 0
        self.chain[offset] = self.last_chain

    def records_upto(self, offset: int) -> int:
        """How many message records end at or before ``offset``."""
        return bisect_right(self.ends, offset)

    def boundary_at_or_below(self, offset: int) -> int:
        """The last record boundary (a record start, or the end of the log) at or below ``offset``."""
        k = self.records_upto(offset)
        if k < len(self.starts) and self.starts[k] <= offset:
            return self.starts[k]      # the padding before record k is whole
        return self.ends[k - 1] if k else 0

    def truncate(self, offset: int) -> None:
        """Forget every record that does not end at or before ``offset`` (a boundary)."""
        k = self.records_upto(offset)
        assert offset in self.chain, offset
        del self.starts[k:], self.ends[k:], self.keys[k:]
        for boundary in [b for b in self.chain if b > offset]:
            del self.chain[boundary]
        self.last_chain = self.chain[offset]

    def rebuild(self, records, header_of) -> None:
        for rec in records:
            self.add_record(rec.offset, header_of(rec), rec.end, rec.key)


class CommitLog:
    def __init__(self, segment_size: int, transient_pool: bool) -> None:
        assert segment_size > 64, segment_size
        self.segment_size = segment_size
        self.transient_pool = transient_pool
        self.segments: dict[int, bytearray] = {}
        self.wrote = 0        # bytes appended (write buffer included)
        self.issued = 0       # bytes handed to the runtime for the page cache (WriteData)
        self.committed = 0    # bytes the runtime confirmed in the page cache
        self.flushed = 0      # bytes the flush service reported fsync'd
        self.index = LogIndex(segment_size)

    # --- geometry -----------------------------------------------------------

    def segment_start(self, offset: int) -> int:
        return offset - offset % self.segment_size

    def segment_end(self, offset: int) -> int:
        """End of the segment holding ``offset`` (a boundary belongs to the next one)."""
        return self.segment_start(offset) + self.segment_size

    def records_upto(self, offset: int) -> int:
        return self.index.records_upto(offset)

    def data(self, offset: int, end: int) -> bytes:
        """Bytes [offset, end), which must lie in one segment."""
        start = self.segment_start(offset)
        assert end <= start + self.segment_size and offset <= end, (offset, end)
        seg = self.segments[start]
        return bytes(seg[offset - start: end - start])

    # --- append -------------------------------------------------------------

    def _put_bytes(self, data: bytes, effects: list) -> None:
        start = self.segment_start(self.wrote)
        if start not in self.segments:
            self.segments[start] = bytearray(self.segment_size)
            effects.append(CreateSegment(start))
        pos = self.wrote - start
        assert pos + len(data) <= self.segment_size
        self.segments[start][pos: pos + len(data)] = data
        if not self.transient_pool:
            effects.append(WriteData(start, pos, data))
            self.issued += len(data)
        self.wrote += len(data)

    def fits(self, body_len: int) -> bool:
        return record_size(body_len) + END_FILE_MIN_BLANK_LENGTH <= self.segment_size

    def append(self, key: int, body: bytes) -> tuple[int, list]:
        """Append one message record; returns (next_offset, effects).  When it
        does not fit the current segment, pad the segment and roll."""
        size = record_size(len(body))
        assert self.fits(len(body)), size
        effects: list = []
        pos = self.wrote % self.segment_size
        if pos and pos + size + END_FILE_MIN_BLANK_LENGTH > self.segment_size:
            self._put_bytes(blank(self.segment_size - pos), effects)
        record = encode(key, body)
        offset = self.wrote
        self._put_bytes(record, effects)
        self.index.add_record(offset, record, self.wrote, key)
        return self.wrote, effects

    # --- handing bytes to the page cache ------------------------------------------

    def commit(self) -> WriteData | None:
        """Copy the write buffer of the segment holding ``issued`` to the page
        cache, up to what has been written (one MappedFile.commit)."""
        if not self.transient_pool or self.issued >= self.wrote:
            return None
        start = self.segment_start(self.issued)
        end = min(self.wrote, start + self.segment_size)
        pos = self.issued - start
        self.issued = end
        return WriteData(start, pos, bytes(self.segments[start][pos: end - start]))

    def confirm(self, upto: int) -> None:
        """The runtime wrote every byte below ``upto`` into the page cache."""
        assert self.committed <= upto <= self.issued, (self.committed, upto, self.issued)
        self.committed = upto

    def reissue_from_committed(self) -> None:
        """A commit failed: the next one starts again where the page cache ends."""
        assert self.transient_pool
        self.issued = self.committed

    def truncate(self, offset: int) -> None:
        """Forget everything from ``offset`` (a record boundary, >= committed):
        records appended behind a write that failed, never to be written."""
        assert self.flushed <= self.committed <= offset <= self.wrote, (self.committed, offset, self.wrote)
        self.index.truncate(offset)
        for start in [s for s in self.segments if s + self.segment_size > offset]:
            if start >= offset:
                del self.segments[start]
            else:
                seg = self.segments[start]
                seg[offset - start:] = bytes(self.segment_size - (offset - start))
        self.wrote = self.issued = offset

    def flush_target(self) -> int:
        """How far one flush reaches: the committed data of the segment that
        holds the next unflushed record (and the padding before it, which may
        end the previous segment: GroupCommitService's second pass, taken at
        once so that no flush makes only padding durable)."""
        k = self.index.records_upto(self.flushed)
        if k == len(self.index.ends):
            return min(self.committed, self.segment_end(self.flushed))
        return min(self.committed, self.segment_end(self.index.starts[k]))

    # --- recovery -------------------------------------------------------------

    @classmethod
    def recovered(cls, segment_size: int, transient_pool: bool, report: RecoveryReport,
                  segment_bytes: dict[int, bytes]) -> CommitLog:
        """The log as CRC recovery left it: every watermark at the end."""
        log = cls(segment_size, transient_pool)
        end = report.end_offset
        for start, data in segment_bytes.items():
            if start < end:
                seg = bytearray(segment_size)
                keep = min(len(data), end - start)
                seg[:keep] = data[:keep]
                log.segments[start] = seg
        log.index.rebuild(report.records, lambda rec: log.header(rec))
        if end % segment_size == 0 and end > (log.index.ends[-1] if log.index.ends else 0):
            log.index.add_segment_end(end)
        log.wrote = log.issued = log.committed = log.flushed = end
        return log

    def header(self, rec: Record) -> bytes:
        pos = rec.offset % self.segment_size
        return bytes(self.segments[self.segment_start(rec.offset)][pos: pos + 12])
