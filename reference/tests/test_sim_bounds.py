"""The simulator reaches every bound the master's core keeps on what the HA port's peers feed it
(issue 34): a flood of ACKs behind a handshake that waits for a segment read (ha_max_parked_events),
and connections that never greet (ha_max_ungreeted_connections).  Each bound is a close the core
decides; the core's invariants say the bound holds after every event, so a core without the
guard fails the same runs."""

from __future__ import annotations

from collections import deque

import pytest

from reference.effects import CloseReplica
from reference.master import MasterCore
from reference.sim.params import draw
from reference.sim.world import World

HOSTILE = {"flood_per_s": "30", "greetless_per_s": "30", "ha_max_parked_events": "1",
           "ha_max_ungreeted_connections": "2"}


def run(seed: int, steps: int = 3000):
    return World(draw(seed, HOSTILE)).run(steps)


def test_the_simulator_reaches_both_bounds_and_still_refines_the_spec():
    reached: dict[str, int] = {}
    for seed in range(1, 4):
        outcome = run(seed)
        assert outcome.ok, (seed, outcome.violation, outcome.message)
        assert outcome.faults.get("flood") and outcome.faults.get("greetless"), outcome.faults
        for bound, n in outcome.guards.items():
            reached[bound] = reached.get(bound, 0) + n
    assert reached.get("ha_max_parked_events", 0) > 0 and reached.get("ha_max_ungreeted_connections", 0) > 0, reached


def _park_without_the_bound(self, conn, event, now_ms):
    parked = self._parked.get(conn)
    if parked is not None:
        parked.append(event)
    elif not self._run(conn, event, now_ms):
        self._parked[conn] = deque([event])


def _open_without_the_bound(self, conn, now_ms):
    self.ungreeted[conn] = now_ms


@pytest.mark.parametrize("method, unguarded, invariant", [
    ("_run_or_park", _park_without_the_bound, "parked frames past the bound"),
    ("replica_connection_opened", _open_without_the_bound, "ungreeted connections past the bound")])
def test_a_core_without_the_guard_fails_the_same_runs(monkeypatch, method, unguarded, invariant):
    monkeypatch.setattr(MasterCore, method, unguarded)
    failures = []
    for seed in range(1, 4):
        try:
            run(seed)
        except AssertionError as err:
            failures.append(str(err))
    assert failures and all(invariant in f for f in failures), (method, failures)


def test_the_core_closes_the_oldest_ungreeted_connection_and_names_the_bound():
    from reference.config import StoreConfig

    core = MasterCore(StoreConfig(ha_max_ungreeted_connections=2), ("r1",), 0)
    for conn in (1, 2, 3):
        core.replica_connection_opened(conn, conn)
    closes = [e for e in core.take_effects() if isinstance(e, CloseReplica)]
    assert [(e.conn, e.bound) for e in closes] == [(1, "ha_max_ungreeted_connections")]
    assert list(core.ungreeted) == [2, 3]
    core.check_invariants()


# --- EPOCH_QUERY: one answer per connection, before its HANDSHAKE ----------------------------------

ASKING = {"epoch_query_per_s": "40"}


def test_the_simulator_asks_for_the_epochs_and_the_master_answers_each_connection_once():
    asked = 0
    for seed in range(1, 4):
        outcome = World(draw(seed, ASKING)).run(2000)
        assert outcome.ok, (seed, outcome.violation, outcome.message)
        asked += outcome.faults.get("epoch_query", 0)
    assert asked > 10, asked


def _answer_every_query(self, conn, now_ms):
    from reference.effects import SendEpochs
    self._emit(SendEpochs(conn, (), 0, 0))


def test_a_master_that_answers_every_epoch_query_fails_the_same_runs(monkeypatch):
    monkeypatch.setattr(MasterCore, "replica_epoch_query", _answer_every_query)
    failures = []
    for seed in range(1, 4):
        try:
            World(draw(seed, ASKING)).run(2000)
        except AssertionError as err:
            failures.append(str(err))
    assert failures and all("a second EPOCH_REPLY" in f for f in failures), failures
