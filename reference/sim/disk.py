"""A simulated disk with page-cache semantics, for the simulator.

Writes land in the page cache.  A process crash keeps the page cache; a
machine crash keeps only the bytes before a cut that the caller picks
between the durable end and the page-cache end (so a record can be torn).
Durability itself is tracked by the cluster, which knows what each fsync
covered.  Same interface as reference.real.disk.SegmentStore.

Recovery is a real CRC scan of the bytes (record.scan_log), but not of bytes
it has scanned before and that nothing changed since: the disk knows the
lowest segment written, zeroed or created since its last recovery, and the
next one starts from the checkpoint of the last segment below it that the
last scan found whole (or of the last scan's tail segment, which it always
reads again) — as RocketMQ recovers from its checkpoint, not from the first
file.  A node restarts thousands of times over one growing log in a long
simulation: its recovery costs what changed, not the log's length.
"""

from __future__ import annotations

from collections.abc import Callable

from reference.record import CHAIN_START, Checkpoint, LogScan, OnRecord, scan_log


class SimDisk:
    def __init__(self, segment_size: int) -> None:
        self.segment_size = segment_size
        self.segments: dict[int, bytearray] = {}    # segment start -> its bytes
        self._top = -1                              # the highest segment start held (-1: none)
        self._changed_from: int | None = 0          # lowest segment start changed since the last recovery
        self._last: tuple[LogScan, bool] | None = None   # the last recovery's scan and its keep_torn

    def _changed(self, start: int) -> None:
        if self._changed_from is None or start < self._changed_from:
            self._changed_from = start

    def _segment(self, start: int) -> bytearray:
        seg = self.segments.get(start)
        if seg is None:
            assert start % self.segment_size == 0, start
            seg = self.segments[start] = bytearray(self.segment_size)
            self._top = max(self._top, start)
        return seg

    def create(self, start: int) -> None:
        if start not in self.segments:
            self._segment(start)
            self._changed(start)

    def write(self, start: int, position: int, data: bytes) -> None:
        seg = self._segment(start)
        assert position + len(data) <= self.segment_size, (start, position, len(data))
        seg[position: position + len(data)] = data
        self._changed(start)

    def read(self, start: int, position: int, length: int) -> bytes:
        seg = self.segments.get(start)
        return bytes(length) if seg is None else bytes(seg[position: position + length])

    def fsync(self, start: int, upto: int) -> None:
        """Nothing to do: the cluster records what became durable."""

    def zero_tail(self, start: int, position: int) -> None:
        """Zero segment ``start`` from ``position`` on and delete every later segment."""
        self._changed(start)
        if start in self.segments:
            self.segments[start][position:] = bytes(self.segment_size - position)
        while self._top > start or self._top >= 0 and self._top not in self.segments:
            self.segments.pop(self._top, None)      # the later segments, highest first
            self._top -= self.segment_size

    def machine_crash(self, cut: int) -> None:
        """Keep [0, cut), lose the rest."""
        self.zero_tail(cut - cut % self.segment_size, cut % self.segment_size)

    def resume_point(self, keep_torn: bool) -> tuple[Checkpoint, ...]:
        """The checkpoints of the prefix of whole segments the last recovery scanned and
        nothing changed since (empty: scan from the start)."""
        if self._last is None or self._last[1] != keep_torn:
            return ()
        scan = self._last[0]
        upto = scan.tail_start if self._changed_from is None else min(scan.tail_start, self._changed_from)
        k = upto // self.segment_size
        assert scan.checkpoints[k].start == upto, (scan.checkpoints[k], upto)
        return scan.checkpoints[: k + 1] if k else ()

    def recover(self, keep_torn: bool = False, on_record: OnRecord | None = None,
                on_resume: Callable[[Checkpoint], None] | None = None) -> LogScan:
        """CRC recovery.  With ``on_resume`` (a caller that holds the index of a valid prefix
        already), the scan may start at a checkpoint past 0: ``on_resume`` gets it first,
        ``on_record`` then sees the records from there on."""
        resume = self.resume_point(keep_torn) if on_resume is not None else ()
        first = resume[-1] if resume else Checkpoint(0, 0, CHAIN_START)
        if on_resume is not None:
            on_resume(first)
        starts = list(range(first.start, self._top + 1, self.segment_size)) if resume else list(self.segments)
        scan = scan_log([s for s in starts if s in self.segments], lambda start: bytes(self.segments[start]),
                        self.segment_size, keep_torn, on_record, resume=resume)
        end = scan.end_offset
        self.zero_tail(end - end % self.segment_size, end % self.segment_size)
        self._changed_from, self._last = None, (scan, keep_torn)
        return scan

    def close(self) -> None:
        """Nothing to release."""


def sim_disk_factory(name: str, segment_size: int, previous: SimDisk | None = None) -> SimDisk:
    """A node's disk; at a restart the same one (its page cache survived)."""
    return previous if previous is not None else SimDisk(segment_size)
