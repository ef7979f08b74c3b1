"""The twin's answers on the branches no correct model reaches, pinned one by one.

The refinement check relies on exactly these branches when the implementation
misbehaves or is fed bad input (a report beyond committed, a duplicated or
torn record, a look-alike log, a failed write that landed anyway), so each
gets a hand-built state and the answer the spec gives (tla/AckOrder.tla).
"""

import attrs
import pytest

from spec import actions as a
from spec.config import Bounds, Config
from spec.functions import handshake_accepts, page_cache_end, precedence_ok
from spec.explore import Graph, explore
from spec.liveness import CHECKS, _fair_lasso
from spec.properties import ambiguous_ack_ordered, log_matching, well_formed, watermarks_ordered
from spec.state import (
    FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, PUT_OK, SLAVE_NOT_AVAILABLE, TORN, UNKNOWN_ERROR, WAITING,
)

POOL = Config(replicas=("r1",), flush_mode="SYNC_FLUSH", repl_mode="SYNC_MASTER", transient_store_pool=True,
              file_size=4)
PLAIN = attrs.evolve(POOL, transient_store_pool=False)


def state(cfg, log=(1, 2, 3), committed=3, rlog=(), connected=True, ack=0, **kw):
    s = a.initial_state(cfg)
    reqs = tuple(a.Request(k, True, WAITING) for k in range(1, len(log) + 1))
    return attrs.evolve(s, log=log, committed=committed, reqs=reqs, rlog=(tuple(rlog),),
                        connected=(connected,), ack=(ack,), **kw)


# --- reports ---------------------------------------------------------------------

def test_a_true_report_beyond_committed_closes_the_connection():
    s = state(POOL, committed=1, rlog=(1, 2))          # the slave got uncommitted data (a transfer bug)
    t = a.replica_ack_with(POOL, s, 0, 2)
    assert t.connected == (False,) and t.ack == (0,) and t.push2SlaveMaxOffset == 0


def test_a_report_at_or_below_committed_is_taken():
    s = state(POOL, committed=2, rlog=(1, 2))
    t = a.replica_ack_with(POOL, s, 0, 2)
    assert t.ack == (2,) and t.push2SlaveMaxOffset == 2 and t.connected == (True,)


def test_a_report_of_more_than_the_slave_holds_is_no_replica_ack():
    assert a.replica_ack_with(POOL, state(POOL, rlog=(1,)), 0, 2) is None


@pytest.mark.parametrize("bug, reported, accepted", [
    (None, 2, False), (None, 4, False),
    ("BugAckCheckedAgainstWrote", 3, True), ("BugAckCheckedAgainstWrote", 4, False),
    ("BugAcceptAckBeyondLog", 4, True),
])
def test_forged_reports_are_checked_against_the_watermark(bug, reported, accepted):
    cfg = attrs.evolve(POOL, bugs={bug} if bug else set())
    s = state(cfg, committed=1, rlog=(1,))
    t = a.forged_ack_with(cfg, s, 0, reported)
    assert t.aux_ctrs.forgedReport == 1
    assert (t.connected == (True,) and t.ack == (reported,)) if accepted else (t.connected == (False,) and t.ack == (0,))


def test_a_forged_report_must_be_beyond_committed_and_the_last_ack():
    s = state(POOL, committed=2, rlog=(1, 2), ack=2)
    assert a.forged_ack_with(POOL, s, 0, 2) is None and a.forged_ack_with(POOL, s, 0, 5) is None
    assert a.forged_ack_with(POOL, state(POOL, connected=False), 0, 4) is None


# --- logs that do not agree ------------------------------------------------------

@pytest.mark.parametrize("log, ok", [
    ((1, 2, 3), True), ((1, 2, 2), False), ((1, 3, 2), False), ((1, TORN), False), ((), True),
])
def test_well_formed_logs(log, ok):
    assert well_formed(log) is ok


def test_a_duplicated_record_on_a_slave_breaks_ambiguous_ack_ordered():
    s = state(PLAIN, rlog=(1, 2, 2), connected=False)
    assert not ambiguous_ack_ordered(PLAIN, s)


def test_a_look_alike_log_is_refused_by_content_and_accepted_by_offset_only():
    s = state(PLAIN, log=(1, 2, 3), rlog=(1, 7), connected=False)   # same length, an earlier incarnation's record
    assert not handshake_accepts(PLAIN, s, 0)
    assert handshake_accepts(attrs.evolve(PLAIN, bugs={"BugHandshakeOffsetOnly"}), s, 0)
    assert not log_matching(PLAIN, attrs.evolve(s, connected=(True,)))


def test_a_slave_ahead_of_the_master_is_refused_and_breaks_the_watermarks_if_let_in():
    s = state(PLAIN, log=(1,), committed=1, rlog=(1, 2), connected=False)
    assert not handshake_accepts(PLAIN, s, 0)
    assert not watermarks_ordered(PLAIN, attrs.evolve(s, connected=(True,)))


def test_the_off_by_one_handshake_refuses_a_caught_up_slave():
    cfg = attrs.evolve(PLAIN, bugs={"BugHandshakeRefusesCaughtUp"})
    assert not handshake_accepts(cfg, state(cfg, rlog=(1, 2, 3), connected=False), 0)
    assert handshake_accepts(cfg, state(cfg, rlog=(1, 2), connected=False), 0)


# --- failed writes ---------------------------------------------------------------

def test_page_cache_end_counts_landed_records_and_stops_at_an_unwritten_one():
    s = state(PLAIN)
    assert page_cache_end(s) == 3
    assert page_cache_end(attrs.evolve(s, landed=1)) == 4
    assert page_cache_end(attrs.evolve(s, unwritten=frozenset({2, 3}))) == 1


def test_a_failed_put_write_answers_unknown_error_and_keeps_the_record_uncounted():
    s = a.initial_state(PLAIN)
    for landed in (0, 1):
        t = a.write_fail_to(PLAIN, s, None, landed)
        assert t.log == (1,) and t.committed == 0 and t.landed == landed and not t.writable
        assert t.reqs[-1].status == UNKNOWN_ERROR and t.reqs[-1].off == 1
        e = next(iter(t.inv_responses))
        assert e.cause == "WriteFail" and not e.written
    assert a.write_fail_to(PLAIN, s, None, 2) is None and a.write_fail_to(PLAIN, s, 1, 0) is None
    assert a.write_fail_to(PLAIN, attrs.evolve(s, writable=False), None, 0) is None


def test_a_failed_commit_keeps_the_buffer_and_may_leave_records_in_the_page_cache():
    s = state(POOL, committed=1, connected=False)
    assert {t.landed for t in a.write_fail(POOL, s)} == {0, 1, 2}
    t = a.write_fail_to(POOL, s, None, 2)
    assert t.committed == 1 and page_cache_end(t) == 3 and not t.writable
    u = a.commit_to(POOL, attrs.evolve(t, writable=True), 2)       # a retry counts what landed
    assert u.committed == 2 and u.landed == 1
    assert a.write_fail_to(POOL, attrs.evolve(s, committed=3), None, 0) is None   # nothing to commit


def test_under_the_bug_a_write_behind_the_failed_commit_may_land_beyond_it():
    """Found by a --bug campaign: a commit that crosses a segment issues two writes; the
    first fails but its bytes are there already, the second lands.  The master counts the
    failed range and the page cache holds one record more."""
    cfg = attrs.evolve(POOL, bugs={"BugFsyncCoversFailedWrite"}, file_size=8)
    s = state(cfg, log=(1, 2, 3), committed=1, connected=False)
    t = a.write_fail_to(cfg, s, 2, 1, 1)
    assert t.committed == 2 and t.landed == 1 and not t.unwritten and page_cache_end(t) == 3
    assert a.write_fail_to(cfg, s, 2, 0, 1) is None          # a hole below: nothing beyond is counted
    assert a.write_fail_to(cfg, s, 2, 1, 2) is None          # never beyond what was written
    assert a.write_fail_to(POOL, s, None, 1, 1) is None      # the correct master: no target, no beyond
    assert any(u.landed == 1 and u.committed == 2 for u in a.write_fail(cfg, s))


def test_a_process_crash_keeps_what_landed_and_a_machine_crash_may_keep_it():
    s = a.write_fail_to(PLAIN, state(PLAIN, connected=False), None, 1)
    t = one(a.master_process_crash(PLAIN, s))
    assert t.log == (1, 2, 3, 4) and t.committed == 4
    keeps = {len(u.log) for u in a.master_machine_crash(PLAIN, s)}
    assert 4 in keeps


def test_the_bug_counts_a_failed_write_and_flushes_it():
    cfg = attrs.evolve(PLAIN, bugs={"BugFsyncCoversFailedWrite"})
    s = a.initial_state(cfg)
    t = a.write_fail_to(cfg, s, None, 0)
    assert t.committed == 1 and t.unwritten == {1} and t.reqs[0].status == WAITING and not t.writable
    f = a.flush_to(cfg, t, 1)
    assert f.flushed == 1 and f.durable == 0                           # the disk holds zeros there
    assert a.flush_to(PLAIN, attrs.evolve(t, unwritten=frozenset()), 1) is None   # correct: read-only
    pool = attrs.evolve(POOL, bugs={"BugFsyncCoversFailedWrite"})
    p = state(pool, committed=1, connected=False)
    options = {(u.committed, u.unwritten) for u in a.write_fail(pool, p)}
    assert (3, frozenset({2, 3})) in options and (3, frozenset({3})) in options and (1, frozenset()) in options


# --- statuses --------------------------------------------------------------------

@pytest.mark.parametrize("covered, connected, status, ok", [
    (True, True, FLUSH_DISK_TIMEOUT, True), (True, True, FLUSH_SLAVE_TIMEOUT, False),
    (False, True, FLUSH_SLAVE_TIMEOUT, True), (False, True, SLAVE_NOT_AVAILABLE, True),
    (False, True, FLUSH_DISK_TIMEOUT, False), (False, False, FLUSH_SLAVE_TIMEOUT, False),
    (False, False, SLAVE_NOT_AVAILABLE, True), (False, True, PUT_OK, True),
])
def test_precedence(covered, connected, status, ok):
    s = state(PLAIN, connected=connected, ack=3 if covered else 0, push2SlaveMaxOffset=3 if covered else 0)
    assert precedence_ok(PLAIN, s, 1, status, "Timeout") is ok
    assert precedence_ok(PLAIN, s, 1, status, "Respond")


def test_the_swapped_precedence_answers_the_flush_failure():
    cfg = attrs.evolve(PLAIN, bugs={"BugFlushTimeoutHidesSlaveTimeout"})
    s = state(cfg)
    s = attrs.evolve(s, reqs=(a.Request(1, False, WAITING), *s.reqs[1:]))
    t = one(a.timeout(cfg, s, 1))
    assert t.reqs[0].status == FLUSH_DISK_TIMEOUT and not next(iter(t.inv_responses)).precedenceOK


def test_steps_that_do_not_apply_give_nothing():
    s = state(PLAIN)
    assert a.timeout_with(PLAIN, s, 1, PUT_OK) is None
    assert a.replica_disconnect(PLAIN, attrs.evolve(s, connected=(False,)), 0) == []
    assert a.flush_fail_to(attrs.evolve(PLAIN, bugs={"BugFlushIgnoresFsyncError"}), s, None) is None


# --- liveness ----------------------------------------------------------------------

def _graph(edges):
    """A hand-made state graph (states are placeholders: only labels and the bad set matter)."""
    s = a.initial_state(PLAIN)
    n = 1 + max(max(src, dst) for src, _, dst in edges)
    out = [[] for _ in range(n)]
    for src, label, dst in edges:
        out[src].append((label, dst))
    return Graph(states=[s] * n, edges=out, parent=[-1] + [0] * (n - 1), label=["Init"] + ["Put"] * (n - 1))


def test_a_fair_cycle_through_bad_states_is_a_violation():
    graph = _graph([(0, "Put", 1), (1, "Flush", 2), (2, "Flush", 1)])
    v = _fair_lasso("EveryRequestAnswered", graph, {1, 2}, {1, 2})
    assert v is not None and v.trace[-1][0].startswith("Cycle through 2 states: Flush")


def test_a_cycle_that_starves_an_always_enabled_fair_action_is_no_counterexample():
    graph = _graph([(0, "Put", 1), (1, "Flush", 2), (2, "Flush", 1), (1, "Respond(1)", 3), (2, "Respond(1)", 3),
                    (3, "Flush", 3)])
    assert _fair_lasso("EveryRequestAnswered", graph, {1, 2}, {1, 2}) is None


def test_a_bad_state_with_no_fair_action_is_stuttered_in():
    graph = _graph([(0, "Put", 1), (1, "Put", 2)])
    v = _fair_lasso("ReplicasCatchUp", graph, {0, 1, 2}, {2})
    assert v is not None and v.trace[-1][0] == "Stuttering"


def test_the_off_by_one_handshake_never_lets_a_slave_catch_up():
    cfg = Config(replicas=("r1",), flush_mode="SYNC_FLUSH", repl_mode="ASYNC_MASTER", file_size=2,
                 bugs={"BugHandshakeRefusesCaughtUp"})
    bounds = Bounds(max_puts=1, max_master_process_crashes=0, max_master_machine_crashes=0, max_replica_crashes=0,
                    max_replica_disconnects=1, max_fsync_failures=0)
    graph = explore(cfg, bounds, view=None, keep_graph=True).graph
    assert CHECKS["ReplicasCatchUp"](cfg, bounds, graph).property == "ReplicasCatchUp"
    fixed = attrs.evolve(cfg, bugs=frozenset())
    assert CHECKS["ReplicasCatchUp"](fixed, bounds, explore(fixed, bounds, view=None, keep_graph=True).graph) is None


def one(states):
    assert len(states) == 1, states
    return states[0]
