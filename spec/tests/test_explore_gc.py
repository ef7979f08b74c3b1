"""The twin's searches run with no full (generation 2) cyclic-GC collection (spec/gcpause.py,
used by spec/explore.py): each would scan every state found so far and free nothing.  Measured on
the small models of tla/manifest.json: 79.9 -> 63.2 CPU-s, 90 full collections -> 0."""

import gc

import pytest

from spec import liveness
from spec.cfgfile import load_cfg
from spec.explore import explore_cfg, search
from spec.failover import explore as failover_explore
from spec.gcpause import NO_FULL_COLLECTIONS, no_full_collections
from tla.manifest import load_manifest


def _thresholds_seen_by_a_search() -> list[tuple[int, int, int]]:
    seen = []

    def next_states(n):
        seen.append(gc.get_threshold())
        return [("Step", n + 1)] if n < 3 else []

    result = search(0, next_states, key=lambda n: n, checks=[], action_checks=[])
    assert result.distinct_states == 4
    return seen


def test_a_search_runs_without_full_collections_and_restores_the_thresholds():
    before = gc.get_threshold()
    seen = _thresholds_seen_by_a_search()
    assert seen and all(t == (before[0], before[1], NO_FULL_COLLECTIONS) for t in seen), (before, seen)
    assert gc.get_threshold() == before


def test_nested_pauses_restore_the_thresholds_when_the_last_ends_even_on_an_error():
    before = gc.get_threshold()
    with pytest.raises(ZeroDivisionError):
        with no_full_collections():
            with no_full_collections():
                assert gc.get_threshold()[2] == NO_FULL_COLLECTIONS
            assert gc.get_threshold()[2] == NO_FULL_COLLECTIONS    # the outer pause is still on
            1 / 0
    assert gc.get_threshold() == before


def test_young_cyclic_garbage_is_still_freed_during_a_pause():
    collected = []

    def count(phase, info):
        if phase == "stop" and info["generation"] < 2:
            collected.append(info["collected"])

    gc.callbacks.append(count)
    try:
        with no_full_collections():
            for _ in range(20_000):       # a cycle each: well past generation 0's threshold
                a = []
                a.append(a)
    finally:
        gc.callbacks.remove(count)
    assert sum(collected) > 0


def _model(name: str):
    return next(m for m in load_manifest() if m.model == name)


@pytest.mark.parametrize("name, explore, module, checks", [
    ("BugHandshakeRefusesCaughtUp", explore_cfg, liveness, "CHECKS"),
    ("live_failover", failover_explore.explore_failover_cfg, failover_explore, "LIVENESS_CHECKS"),
])
def test_the_liveness_checks_run_without_full_collections_too(monkeypatch, name, explore, module, checks):
    """They walk the graph the search kept (as large as the search's heap)."""
    seen = []
    table = dict(getattr(module, checks))
    for prop, check in list(table.items()):
        def spy(*args, _check=check):
            seen.append(gc.get_threshold()[2])
            return _check(*args)
        table[prop] = spy
    monkeypatch.setattr(module, checks, table)
    before = gc.get_threshold()
    explore(load_cfg(_model(name).cfg_path))
    assert seen and set(seen) == {NO_FULL_COLLECTIONS}, seen
    assert gc.get_threshold() == before
