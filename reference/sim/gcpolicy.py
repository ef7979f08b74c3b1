"""The cyclic garbage collector during a long simulated run: the young generations only.

What a run keeps only grows (the spec's requests and responses, the logs' checkpoints) and a
run makes no garbage cycles of its own (reference/tests/test_gcpolicy.py proves it on clean and
on failing seeds): its objects are freed by their reference counts.  CPython's full collections
(generation 2) nevertheless re-read every one of them, more seldom but for longer as the heap
grows: at 1,000,000 checked steps they took 9-12% of the run's CPU and collected nothing.  So
past its first LONG_RUN_EVENTS events a run collects generations 0 and 1 only, and the threshold
of the full collection is put back when the run ends.

A short run (a campaign's 400-step seed) leaves the collector alone: every world a campaign drops
is a garbage cycle, which only a full collection frees.  After a long run the first full
collection is soon due (everything the run promoted counts as pending), so the world it leaves,
once dropped, is freed as before."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

LONG_RUN_EVENTS = 20_000     # events of a run before its full collections are deferred

# gen-1 collections between two full ones during a run: never, in practice (about one
# gen-1 collection per 100 steps).
FULL_COLLECTIONS_DEFERRED = 2**31 - 1     # a C int


@contextmanager
def young_generations_only() -> Iterator[None]:
    t0, t1, t2 = gc.get_threshold()
    gc.set_threshold(t0, t1, FULL_COLLECTIONS_DEFERRED)
    try:
        yield
    finally:
        gc.set_threshold(t0, t1, t2)
