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


def _clean_runs(overrides: dict, seeds: range = range(1, 4), steps: int = 3000) -> list:
    """The outcomes of ``seeds`` under ``overrides``, each of which must refine the spec."""
    outcomes = []
    for seed in seeds:
        outcome = World(draw(seed, overrides)).run(steps)
        assert outcome.ok, (seed, outcome.violation, outcome.message)
        outcomes.append(outcome)
    return outcomes


def _assertion_failures(overrides: dict, steps: int = 3000) -> list[str]:
    """What stops seeds 1 to 3 under ``overrides`` (a core without a guard breaks an invariant)."""
    failures = []
    for seed in range(1, 4):
        try:
            World(draw(seed, overrides)).run(steps)
        except AssertionError as err:
            failures.append(str(err))
    return failures


def test_the_simulator_reaches_both_bounds_and_still_refines_the_spec():
    reached: dict[str, int] = {}
    for outcome in _clean_runs(HOSTILE):
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
    failures = _assertion_failures(HOSTILE)
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
    asked = sum(o.faults.get("epoch_query", 0) for o in _clean_runs(ASKING, steps=2000))
    assert asked > 10, asked


def _answer_every_query(self, conn, now_ms):
    from reference.effects import SendEpochs
    self._emit(SendEpochs(conn, (), 0, 0))


def test_a_master_that_answers_every_epoch_query_fails_the_same_runs(monkeypatch):
    monkeypatch.setattr(MasterCore, "replica_epoch_query", _answer_every_query)
    failures = _assertion_failures(ASKING, 2000)
    assert failures and all("a second EPOCH_REPLY" in f for f in failures), failures


# --- the TransientStorePool's size: a put refused while no buffer is left --------------------------

POOLED = {"transient_store_pool_enable": "true", "transient_store_pool_size": "2",
          "commit_interval_commit_log_ms": "40", "commit_commit_log_thorough_interval_ms": "40",
          "commit_commit_log_least_pages": "4"}


def test_the_simulator_fills_the_pool_and_the_refused_puts_are_answered_busy():
    refused = 0
    for outcome in _clean_runs(POOLED):
        assert outcome.statuses.get("OS_PAGE_CACHE_BUSY", 0) == outcome.guards.get("transient_store_pool_size", 0)
        refused += outcome.guards.get("transient_store_pool_size", 0)
    assert refused > 0


def test_a_core_without_the_pool_guard_fails_the_same_runs(monkeypatch):
    monkeypatch.setattr(MasterCore, "_pool_deficient", lambda self: False)
    failures = _assertion_failures(POOLED)
    assert failures and all("pool buffers past transient_store_pool_size" in f for f in failures), failures


# --- impostors: every check of a HANDSHAKE reached --------------------------------------------------

IMPOSTORS = {"impostor_per_s": "40", "replica_disconnect_per_s": "8"}


def test_impostor_handshakes_of_every_kind_are_refused_and_the_runs_still_refine_the_spec():
    """The simulator's impostors take turns: a damaged chain hash, the right chain with one record
    more or one fewer than the slave holds (reached while that slave has no connection), and an
    exact copy of a connected slave's HANDSHAKE.  A master that accepted any of them would hold
    two connections for one slave, or a slave whose count disagrees with its log: the refinement
    check fails that run."""
    impostors = sum(o.faults.get("impostor", 0) for o in _clean_runs(IMPOSTORS, range(1, 7)))
    assert impostors >= 24, impostors


# --- frames parked behind a handshake that is refused when its segment read is in ---------------------

ROOMY_FLOOD = {"flood_per_s": "30", "ha_max_parked_events": "64"}


def test_floods_with_room_to_park_refine_the_spec_and_reach_a_handshake_behind_a_refused_one():
    floods = sum(o.faults.get("flood", 0) for o in _clean_runs(ROOMY_FLOOD, range(1, 7)))
    assert floods >= 20, floods


def _replay_past_a_close(self, now_ms):
    """_replay_parked before the fix: it kept running a connection's parked frames after one of
    them had closed that connection."""
    for conn in list(self._parked):
        parked = self._parked.get(conn)
        while parked and self._run(conn, parked[0], now_ms):
            parked.popleft()
        if conn in self._parked and not self._parked[conn]:
            del self._parked[conn]


def test_a_master_that_runs_frames_behind_a_refused_handshake_fails_the_same_runs(monkeypatch):
    monkeypatch.setattr(MasterCore, "_replay_parked", _replay_past_a_close)
    outcomes = [World(draw(seed, ROOMY_FLOOD)).run(3000) for seed in range(1, 7)]
    failed = [o.message for o in outcomes if not o.ok]
    assert failed and all("ReplicaConnect" in m and "segment 0 read back" in m for m in failed), failed


# --- housekeeping: a connection without a HANDSHAKE is closed after the interval, not before ----------

SILENT = {"greetless_per_s": "30", "ha_max_ungreeted_connections": "4096"}


def test_connections_that_never_greet_are_closed_by_housekeeping_after_the_interval():
    closed = sum(o.guards.get("ha_housekeeping_interval_ms", 0) for o in _clean_runs(SILENT))
    assert closed > 10, closed


def _close_the_silent_at_once(self, now_ms):
    """Housekeeping without its clock: every connection still without a HANDSHAKE goes at once."""
    for conn in list(self.ungreeted):
        del self.ungreeted[conn]
        self.epoch_queried.discard(conn)
        self._emit(CloseReplica(conn, "no HANDSHAKE", bound="ha_housekeeping_interval_ms"))


def test_a_master_that_closes_silent_connections_before_the_interval_fails_the_same_runs(monkeypatch):
    monkeypatch.setattr(MasterCore, "_housekeeping", _close_the_silent_at_once)
    failures = _assertion_failures(SILENT)
    assert failures and all("closed for no HANDSHAKE" in f for f in failures), failures
