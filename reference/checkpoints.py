"""The checkpoint of every segment start a log reached, kept as a list by segment number.

A log reaches its segment starts in order and keeps one checkpoint for each (reference/commitlog.py),
so a list indexed by ``(start - first) // segment_size`` answers what a dict keyed by the start
would.  The dict it replaces was built again, hashing every start, at every recovery: in a long
simulated run the master restarts thousands of times over tens of thousands of segments, and
that alone took 4% of a 1,000,000-step run.  A list is copied from the recovery scan's tuple at
C speed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from reference.record import Checkpoint


class CheckpointTable:
    """Checkpoints by segment start, from ``first`` on; a start never reached holds None."""

    __slots__ = ("segment_size", "first", "_items")

    def __init__(self, segment_size: int, checkpoints: Sequence[Checkpoint]) -> None:
        """``checkpoints``: one per segment, in order, from the first (not read one by one:
        their first and last starts are asserted)."""
        assert checkpoints, "a log has the checkpoint of its base at least"
        self.segment_size = segment_size
        self.first = checkpoints[0].start
        assert self.first % segment_size == 0, self.first
        self._items: list[Checkpoint | None] = list(checkpoints)
        assert checkpoints[-1].start == self.first + (len(checkpoints) - 1) * segment_size, \
            (self.first, len(checkpoints), checkpoints[-1])

    def _slot(self, start: int) -> int | None:
        i, r = divmod(start - self.first, self.segment_size)
        return i if r == 0 and 0 <= i < len(self._items) else None

    def get(self, start: int) -> Checkpoint | None:
        i = self._slot(start)
        return None if i is None else self._items[i]

    def __contains__(self, start: int) -> bool:
        return self.get(start) is not None

    def __getitem__(self, start: int) -> Checkpoint:
        cp = self.get(start)
        if cp is None:
            raise KeyError(start)
        return cp

    def add(self, cp: Checkpoint) -> None:
        """Keep ``cp`` unless its segment start has one already (a segment start is reached once)."""
        i, r = divmod(cp.start - self.first, self.segment_size)
        assert r == 0 and i >= 0, (cp, self.first)
        items = self._items
        if i < len(items):
            if items[i] is None:
                items[i] = cp
            return
        items.extend([None] * (i - len(items)))
        items.append(cp)

    def truncate_after(self, offset: int) -> None:
        """Forget every checkpoint whose start is past ``offset``."""
        keep = max(0, (offset - self.first) // self.segment_size + 1)
        del self._items[keep:]
        assert self._items, "the base's checkpoint is never past a truncation point"

    def __iter__(self) -> Iterator[int]:
        return (cp.start for cp in self._items if cp is not None)

    def items(self) -> Iterator[tuple[int, Checkpoint]]:
        return ((cp.start, cp) for cp in self._items if cp is not None)

    def __len__(self) -> int:
        return sum(cp is not None for cp in self._items)
