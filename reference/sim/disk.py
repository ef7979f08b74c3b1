"""A simulated disk with page-cache semantics, for the simulator.

Writes land in the page cache.  A process crash keeps the page cache; a
machine crash keeps only the bytes before a cut that the caller picks
between the durable end and the page-cache end (so a record can be torn).
Durability itself is tracked by the cluster, which knows what each fsync
covered.  Same interface as reference.real.disk.SegmentStore.
"""

from __future__ import annotations

from reference.record import LogScan, OnRecord, scan_log


class SimDisk:
    def __init__(self, segment_size: int) -> None:
        self.segment_size = segment_size
        self.segments: dict[int, bytearray] = {}
        self._scan_memo: dict[int, tuple] = {}    # segment start -> its last scan (record.scan_log)

    def create(self, start: int) -> None:
        self.segments.setdefault(start, bytearray(self.segment_size))

    def write(self, start: int, position: int, data: bytes) -> None:
        seg = self.segments.setdefault(start, bytearray(self.segment_size))
        assert position + len(data) <= self.segment_size, (start, position, len(data))
        seg[position: position + len(data)] = data

    def read(self, start: int, position: int, length: int) -> bytes:
        seg = self.segments.get(start)
        return bytes(length) if seg is None else bytes(seg[position: position + length])

    def fsync(self, start: int, upto: int) -> None:
        """Nothing to do: the cluster records what became durable."""

    def zero_tail(self, start: int, position: int) -> None:
        if start in self.segments:
            self.segments[start][position:] = bytes(self.segment_size - position)
        for s in [s for s in self.segments if s > start]:
            del self.segments[s]

    def machine_crash(self, cut: int) -> None:
        """Keep [0, cut), lose the rest."""
        self.zero_tail(cut - cut % self.segment_size, cut % self.segment_size)

    def recover(self, keep_torn: bool = False, on_record: OnRecord | None = None) -> LogScan:
        scan = scan_log(list(self.segments), lambda start: bytes(self.segments[start]), self.segment_size,
                        keep_torn, on_record, memo=self._scan_memo)
        end = scan.end_offset
        self.zero_tail(end - end % self.segment_size, end % self.segment_size)
        return scan

    def close(self) -> None:
        """Nothing to release."""


def sim_disk_factory(name: str, segment_size: int, previous: SimDisk | None = None) -> SimDisk:
    """A node's disk; at a restart the same one (its page cache survived)."""
    return previous if previous is not None else SimDisk(segment_size)
