"""No full (generation 2) cyclic-GC collection while a block runs; the young generations go on.

CPython 3.11 starts a full collection once enough objects have survived two young ones, and it
reads every tracked object in the process.  A twin's search and a long simulated run only grow
their heaps (every state found stays alive; a run's requests, responses and checkpoints too) and
make no garbage cycles of their own, so each full collection re-read all of it and freed nothing:
13.5 of the twin's 79.9 CPU-s over the small models of tla/manifest.json (90 collections, 0
objects freed), 9-12% of a 1,000,000-step checked simulation.  Cyclic garbage younger than two
collections is still freed; an older cycle waits for the first full collection after the block,
which comes soon (everything the block promoted counts as pending).  Nested and concurrent blocks
(threads) put the thresholds back when the last one ends, even on an error."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_PAUSE_LOCK = threading.Lock()
_pauses = [0, None]   # blocks under way, the gc thresholds to restore when the last one ends
NO_FULL_COLLECTIONS = 2**31 - 1   # gen-1 collections between full ones (a C int): none during a block


@contextlib.contextmanager
def no_full_collections() -> Iterator[None]:
    with _PAUSE_LOCK:
        if _pauses[0] == 0:
            _pauses[1] = gc.get_threshold()
            gc.set_threshold(_pauses[1][0], _pauses[1][1], NO_FULL_COLLECTIONS)
        _pauses[0] += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _pauses[0] -= 1
            if _pauses[0] == 0:
                gc.set_threshold(*_pauses[1])
