"""A simulated disk with page-cache semantics.

Writes land in the page cache; an fsync makes durable what the page cache
held when the fsync was issued.  A process crash keeps the page cache; a
machine crash keeps the durable prefix plus any further prefix of what was
not fsync'd (the caller picks the cut, so a record may be torn).
"""

from __future__ import annotations


class SimDisk:
    def __init__(self, segment_size: int) -> None:
        self.segment_size = segment_size
        self.segments: dict[int, bytearray] = {}
        self.durable_end = 0     # global offset below which every byte is fsync'd
        self.page_end = 0        # global offset after the last byte written

    def create(self, start: int) -> None:
        self.segments.setdefault(start, bytearray(self.segment_size))

    def write(self, start: int, position: int, data: bytes) -> None:
        seg = self.segments.setdefault(start, bytearray(self.segment_size))
        assert position + len(data) <= self.segment_size, (start, position, len(data))
        seg[position: position + len(data)] = data
        self.page_end = max(self.page_end, start + position + len(data))

    def zero_tail(self, start: int, position: int) -> None:
        if start in self.segments:
            seg = self.segments[start]
            seg[position:] = bytes(self.segment_size - position)
        for s in [s for s in self.segments if s > start]:
            del self.segments[s]
        self.page_end = min(self.page_end, start + position)
        self.durable_end = min(self.durable_end, start + position)

    def recovered_to(self, end: int) -> None:
        """Recovery kept [0, end): zero the rest and fsync (the store's recovery does both)."""
        self.zero_tail(end - end % self.segment_size, end % self.segment_size)
        self.page_end = self.durable_end = end

    def fsync_to(self, upto: int) -> None:
        """An fsync of the segments up to ``upto`` completed."""
        self.durable_end = max(self.durable_end, upto)

    def machine_crash(self, cut: int) -> None:
        """Keep [0, cut), lose the rest (cut >= durable_end)."""
        assert cut >= self.durable_end, (cut, self.durable_end)
        for start in list(self.segments):
            if start >= cut:
                del self.segments[start]
            elif start + self.segment_size > cut:
                seg = self.segments[start]
                seg[cut - start:] = bytes(self.segment_size - (cut - start))
        self.durable_end = self.page_end = cut

    def snapshot(self) -> dict[int, bytes]:
        return {start: bytes(seg) for start, seg in sorted(self.segments.items())}
