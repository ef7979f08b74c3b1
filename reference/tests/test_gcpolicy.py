"""The simulator collects only the young generations during a run (reference/sim/gcpolicy.py):
in effect during the run, undone after it even when the run raises, and sound because a run
makes no garbage cycles of its own (the deferred full collections would have had nothing to free)."""

from __future__ import annotations

import gc

import pytest

from reference.sim.gcpolicy import FULL_COLLECTIONS_DEFERRED
from reference.sim.params import draw
from reference.sim.world import World


def test_a_run_defers_full_collections_and_puts_the_threshold_back(monkeypatch):
    before = gc.get_threshold()
    world = World(draw(0), check=True)
    seen = []
    process_next = World._process_next
    monkeypatch.setattr(World, "_process_next", lambda self: (seen.append(gc.get_threshold()), process_next(self)))
    world.run(300)
    assert seen and all(t == (*before[:2], FULL_COLLECTIONS_DEFERRED) for t in seen), set(seen)
    assert gc.get_threshold() == before


def test_the_threshold_comes_back_when_the_run_raises(monkeypatch):
    before = gc.get_threshold()

    def boom(self):
        raise OSError("injected")

    monkeypatch.setattr(World, "_process_next", boom)
    with pytest.raises(OSError, match="injected"):
        World(draw(0)).run(10)
    assert gc.get_threshold() == before


@pytest.mark.parametrize("seed, overrides, check", [
    (0, {}, True), (0, {}, False), (9, {}, True), (23, {}, False),
    (2, {"bug": "BugFlushIgnoresFsyncError"}, True),       # runs that end in a violation
    (2, {"bug": "BugRecoveryKeepsTorn"}, True),
])
def test_a_run_makes_no_garbage_cycles(seed, overrides, check):
    world = World(draw(seed, overrides), check=check)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        outcome = world.run(2_000)
        unreachable = gc.collect()
    finally:
        if enabled:
            gc.enable()
    if overrides:
        assert outcome.violation is not None, "the bug seed must end in a violation for this case to mean anything"
    assert unreachable == 0, f"seed {seed}: {unreachable} objects in garbage cycles after the run"
