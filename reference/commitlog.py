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

Memory is bounded: the log keeps the bytes and the record index of the
segments from ``base`` on (``forget_below`` moves it, the master decides
when), and one checkpoint per segment (records before it, chain hash at its
start).  Older data is on the segment files; the master reads a segment back
when a slave needs it (reference/master.py).  A ``ghost`` index that forgets
nothing can be kept for observers (the simulator's refinement mapping); no
decision ever reads it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import deque

from reference.checkpoints import CheckpointTable
from reference.effects import CreateSegment, WriteData
from reference.record import (
    CHAIN_START, END_FILE_MIN_BLANK_LENGTH, Checkpoint, LogScan, Record, blank, chain_next, encode,
    record_size, scan_log, scan_segment,
)

CHAIN_BYTES = 16
CUTS_KEPT = 64


class NotRetained(LookupError):
    """An offset below the index's base: the caller must read that segment back."""


class LogIndex:
    """Where the message records of a log end, their keys, and the chain hash
    of the log prefix at every boundary (record ends and segment starts).
    Master and slave keep one each; the handshake compares chain hashes.

    Compact (arrays, 40 bytes a record) and windowed: records ending at or
    before ``base`` are forgotten, counted in ``base_records``; ``checkpoints``
    keeps (records, chain) at every segment start ever reached."""

    def __init__(self, segment_size: int, base: int = 0, base_records: int = 0,
                 base_chain: bytes = CHAIN_START) -> None:
        assert base % segment_size == 0, base
        self.segment_size = segment_size
        self.base = base
        self.base_records = base_records
        self.base_chain = base_chain
        self.starts = array("q")
        self.ends = array("q")
        self.keys = array("Q")
        self._chains = bytearray()          # CHAIN_BYTES per record: the chain at its end
        # In increasing order of start: every insertion is past the ones before (truncate relies on it).
        self.checkpoints = CheckpointTable(segment_size, (Checkpoint(base, base_records, base_chain),))
        self.last_chain = base_chain
        self.chain_before = base_chain      # the chain before the last record added
        self.shrinks = 0                    # times records were dropped
        # The record count after each of the last CUTS_KEPT times (0: ``keys`` shifted): an observer
        # that saw ``shrinks`` at k re-reads ``keys`` only from the lowest cut since (or whole).
        self.cuts: deque[int] = deque(maxlen=CUTS_KEPT)

    # --- growth ---------------------------------------------------------------

    def _reach_segment(self, offset: int) -> None:
        if offset not in self.checkpoints:
            self.checkpoints.add(Checkpoint(offset, self.count, self.last_chain))

    def add_record(self, offset: int, header: bytes, end: int, key: int, twin: LogIndex | None = None,
                   chains: tuple[bytes, bytes] | None = None) -> None:
        """Index one record.  ``twin``: an index that has just added this same record after the
        same chain (the core's index, when this is its ghost): its chain hash is taken, not
        computed again (a pure function of the chain before, the offset and the header).
        ``chains``: the same from a recovery scan, (its chain before this record, after it)."""
        ends, last = self.ends, self.last_chain
        previous_end = ends[-1] if ends else self.base
        if offset != previous_end:  # the previous segment was padded: its end is a boundary
            assert offset % self.segment_size == 0 and offset > previous_end, (offset, previous_end)
            self._reach_segment(offset)
        if (twin is not None and twin.ends and twin.ends[-1] == end and twin.starts[-1] == offset
                and twin.chain_before == last):
            chain = twin.last_chain
        elif chains is not None and chains[0] == last:
            chain = chains[1]
        else:
            chain = chain_next(last, offset, header)
        self.chain_before = last
        self.last_chain = chain
        self.starts.append(offset)
        ends.append(end)
        self.keys.append(key)
        self._chains += chain

    def add_segment_end(self, offset: int) -> None:
        assert offset % self.segment_size == 0
        self._reach_segment(offset)

    # --- questions --------------------------------------------------------------

    @property
    def count(self) -> int:
        """Message records in the log (forgotten ones included)."""
        return self.base_records + len(self.ends)

    def retains(self, offset: int) -> bool:
        return offset >= self.base

    def records_upto(self, offset: int) -> int:
        """How many message records end at or before ``offset``."""
        if offset < self.base:
            raise NotRetained(offset)
        return self.base_records + bisect_right(self.ends, offset)

    def chain_at(self, offset: int) -> bytes | None:
        """The chain hash of the log prefix ending at ``offset``, or None when that is
        not a boundary of this log (a retained offset; NotRetained below ``base``)."""
        if offset < self.base:
            raise NotRetained(offset)
        if (cp := self.checkpoints.get(offset)) is not None:
            return cp.chain
        i = bisect_left(self.ends, offset)
        if i < len(self.ends) and self.ends[i] == offset:
            return bytes(self._chains[i * CHAIN_BYTES: (i + 1) * CHAIN_BYTES])
        return None

    def end_after(self, records: int) -> int:
        """The end offset of record number ``records`` (1-based, a retained one)."""
        return self.ends[records - 1 - self.base_records]

    def start_of(self, records: int) -> int:
        """The start offset of the record after the first ``records`` (a retained one)."""
        return self.starts[records - self.base_records]

    def boundary_at_or_below(self, offset: int) -> int:
        """The last record boundary (a record start, or the end of the log) at or below ``offset``."""
        k = self.records_upto(offset) - self.base_records
        if k < len(self.starts) and self.starts[k] <= offset:
            return self.starts[k]      # the padding before record k is whole
        return self.ends[k - 1] if k else self.base

    # --- shrinking --------------------------------------------------------------

    def truncate(self, offset: int) -> None:
        """Forget every record that does not end at or before ``offset`` (a boundary)."""
        chain = self.chain_at(offset)
        assert chain is not None, offset
        k = self.records_upto(offset) - self.base_records
        del self.starts[k:], self.ends[k:], self.keys[k:], self._chains[k * CHAIN_BYTES:]
        self.shrinks += 1
        self.cuts.append(self.count)
        self.chain_before = None
        self.checkpoints.truncate_after(offset)
        self.last_chain = chain

    def forget_below(self, offset: int) -> None:
        """Forget the records before segment start ``offset`` (keep its checkpoint and later)."""
        assert offset % self.segment_size == 0 and offset >= self.base, (offset, self.base)
        if offset == self.base:
            return
        cp = self.checkpoints[offset]
        k = bisect_right(self.ends, offset)
        del self.starts[:k], self.ends[:k], self.keys[:k], self._chains[:k * CHAIN_BYTES]
        self.shrinks += 1
        self.cuts.append(0)
        self.base, self.base_records, self.base_chain = offset, cp.records, cp.chain
        assert self.count == cp.records + len(self.ends)

    def rebuild(self, records, header_of) -> None:
        for rec in records:
            self.add_record(rec.offset, header_of(rec), rec.end, rec.key)

    @classmethod
    def of_segment(cls, segment_size: int, checkpoint: Checkpoint, data: bytes) -> LogIndex:
        """The index of one whole segment read back from its file (records from its checkpoint)."""
        index = cls(segment_size, checkpoint.start, checkpoint.records, checkpoint.chain)
        scan = scan_segment(data, checkpoint.start)
        for rec in scan.records:
            pos = rec.offset - checkpoint.start
            index.add_record(rec.offset, bytes(data[pos: pos + 12]), rec.end, rec.key)
        if scan.ends_with_blank:
            index.add_segment_end(checkpoint.start + segment_size)
        return index


def held_log(index: LogIndex, segments, end_offset: int) -> LogScan:
    """The log a core holds, up to ``end_offset`` (a record boundary), as a LogScan: a role change
    hands it to the next core without reading its files again, let alone recovering them (the
    process recovers its log once, when it starts).  Its checkpoints are the index's, one per
    segment from 0; the segment holding the end is in memory (``segments``), its records verified
    when they came in, and is indexed again here (one segment, no I/O)."""
    seg = index.segment_size
    tail_start = end_offset - end_offset % seg
    resume = tuple(cp for start, cp in index.checkpoints.items() if start <= tail_start)
    assert resume and resume[0].start == 0 and resume[-1].start == tail_start, (resume[:1], resume[-1:], tail_start)
    data = bytes(segments[tail_start][: end_offset - tail_start]).ljust(seg, b"\0") if end_offset > tail_start \
        else bytes(seg)
    scan = scan_log([tail_start], lambda start: data, seg, resume=resume)
    assert scan.end_offset == end_offset and not scan.dropped, (scan.end_offset, end_offset, scan.dropped)
    return scan


class CommitLog:
    def __init__(self, segment_size: int, transient_pool: bool, ghost: bool = False) -> None:
        assert segment_size > 64, segment_size
        self.segment_size = segment_size
        self.transient_pool = transient_pool
        self.segments: dict[int, bytearray] = {}    # the retained ones: start >= index.base
        self.wrote = 0        # bytes appended (write buffer included)
        self.issued = 0       # bytes handed to the runtime for the page cache (WriteData)
        self.committed = 0    # bytes the runtime confirmed in the page cache
        self.flushed = 0      # bytes the flush service reported fsync'd
        self.index = LogIndex(segment_size)
        self.ghost: LogIndex | None = LogIndex(segment_size) if ghost else None

    # --- geometry -----------------------------------------------------------

    def segment_start(self, offset: int) -> int:
        return offset - offset % self.segment_size

    def segment_end(self, offset: int) -> int:
        """End of the segment holding ``offset`` (a boundary belongs to the next one)."""
        return self.segment_start(offset) + self.segment_size

    @property
    def base(self) -> int:
        """Bytes and index below this offset (a segment start) are on the files only."""
        return self.index.base

    def records_upto(self, offset: int) -> int:
        return self.index.records_upto(offset)

    def data(self, offset: int, end: int) -> bytes:
        """Bytes [offset, end), which must lie in one retained segment."""
        start = self.segment_start(offset)
        assert end <= start + self.segment_size and offset <= end and start >= self.base, (offset, end, self.base)
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
        if self.ghost is not None:
            self.ghost.add_record(offset, record, self.wrote, key, twin=self.index)
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

    def pool_buffers_in_use(self) -> int:
        """TransientStorePool buffers held: the segment the next append writes into, and every
        segment below it with bytes not yet in the page cache (MappedFile.commit returns a
        segment's write buffer once the commits reach its end)."""
        assert self.transient_pool
        return (self.segment_start(self.wrote) - self.segment_start(self.committed)) // self.segment_size + 1

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
        if self.ghost is not None:
            self.ghost.truncate(offset)
        for start in [s for s in self.segments if s + self.segment_size > offset]:
            if start >= offset:
                del self.segments[start]
            else:
                seg = self.segments[start]
                seg[offset - start:] = bytes(self.segment_size - (offset - start))
        self.wrote = self.issued = offset

    def forget_below(self, start: int) -> None:
        """Drop the bytes and index of every segment before ``start`` (a segment start
        at or below the flushed one): they are on the files, read back if needed."""
        assert start % self.segment_size == 0 and self.base <= start <= self.segment_start(self.flushed), \
            (start, self.base, self.flushed)
        self.index.forget_below(start)
        for s in [s for s in self.segments if s < start]:
            del self.segments[s]

    def flush_target(self) -> int:
        """How far one flush reaches: the committed data of the segment that
        holds the next unflushed record (and the padding before it, which may
        end the previous segment: GroupCommitService's second pass, taken at
        once so that no flush makes only padding durable)."""
        k = self.index.records_upto(self.flushed)
        if k == self.index.count:
            return min(self.committed, self.segment_end(self.flushed))
        return min(self.committed, self.segment_end(self.index.start_of(k)))

    # --- recovery -------------------------------------------------------------

    @classmethod
    def recovered(cls, segment_size: int, transient_pool: bool, scan: LogScan, ghost: LogIndex | None = None
                  ) -> CommitLog:
        """The log as CRC recovery left it: every watermark at the end, the last
        segment in memory.  ``ghost``: the whole log's index, for observers."""
        log = cls(segment_size, transient_pool)
        cp = scan.checkpoints[-1]
        log.index = LogIndex(segment_size, cp.start, cp.records, cp.chain)
        log.index.checkpoints = CheckpointTable(segment_size, scan.checkpoints)
        if scan.tail_start < scan.end_offset:
            seg = bytearray(segment_size)
            seg[: len(scan.tail_bytes)] = scan.tail_bytes
            log.segments[scan.tail_start] = seg
            log.index.rebuild(scan.tail_records, lambda rec: log.header(rec))
        assert log.index.count == scan.record_count, (log.index.count, scan.record_count)
        log.ghost = ghost
        log.wrote = log.issued = log.committed = log.flushed = scan.end_offset
        return log

    def header(self, rec: Record) -> bytes:
        pos = rec.offset % self.segment_size
        return bytes(self.segments[self.segment_start(rec.offset)][pos: pos + 12])
