"""The SyncStateSet policy (reference/failover/sss_policy.py): the one definition the failover
simulator checks against the spec and the running node drives."""

from __future__ import annotations

import pytest

from reference.failover import sss_policy
from reference.failover.roles import HaConnection, ReplicasManager
from reference.failover.sss_policy import ALTER_TIMED_OUT, Proposal, SyncStateSetPolicy

SSS = frozenset({"b1", "b2"})


def _decide(policy: SyncStateSetPolicy, now_ms: int, acks: dict, log_end: int, *, sss=SSS, remote=frozenset()):
    return policy.decide(now_ms, sss=sss, remote_sss=remote, acks=acks, log_end_offset=log_end, confirm_offset=0,
                         epoch_start_offset=0)


def test_a_member_that_keeps_pace_under_load_stays_while_a_slow_one_is_dropped_after_the_bound():
    """Under load the log end moves between every two checks.  b2's ack always reaches where
    the log ended at the previous check (caught up, RocketMQ's lastMasterMaxOffset): it stays.
    b3's is always two checks behind: dropped once it has not caught up for 1,000 ms."""
    policy = SyncStateSetPolicy("b1", max_not_catchup_ms=1_000)
    sss = frozenset({"b1", "b2", "b3"})
    ends = [100 * k for k in range(1, 40)]
    out = []
    for k, end in enumerate(ends):
        acks = {"b2": ends[k - 1] if k else 0, "b3": ends[k - 2] if k > 1 else 0}
        out.append(_decide(policy, 200 * k, acks, end, sss=sss))
    first = next(k for k, d in enumerate(out) if d is not None)
    assert out[first] == Proposal("ShrinkSyncStateSet", "b3", frozenset({"b1", "b2"}))
    assert 200 * first >= 1_000 and 200 * (first - 1) < 1_000 + 200, first     # not before the bound


def test_a_member_without_a_connection_is_dropped_after_the_bound_not_at_once():
    policy = SyncStateSetPolicy("b1", max_not_catchup_ms=1_000)
    assert _decide(policy, 0, {}, 50) is None
    assert _decide(policy, 999, {}, 50) is None
    assert _decide(policy, 1_000, {}, 50) == Proposal("ShrinkSyncStateSet", "b2", frozenset({"b1"}))


def test_a_caught_up_member_is_never_dropped_however_long():
    policy = SyncStateSetPolicy("b1", max_not_catchup_ms=10)
    assert all(_decide(policy, t, {"b2": 70}, 70) is None for t in range(0, 10_000, 100))


def test_expansion_takes_a_slave_whose_ack_is_the_log_end_only():
    policy = SyncStateSetPolicy("b1")
    alone = frozenset({"b1"})
    assert _decide(policy, 0, {"b2": 69}, 70, sss=alone) is None
    assert _decide(policy, 1, {"b2": 70}, 70, sss=alone) == Proposal("ExpandSyncStateSet", "b2", SSS)
    assert not sss_policy.may_expand("b1", alone, frozenset(), {"b2": 70}, 70, 80, 0, "b2")   # below confirmOffset
    assert not sss_policy.may_expand("b1", alone, frozenset(), {"b2": 70}, 70, 0, 71, "b2")   # before the epoch


def test_one_proposal_at_a_time_and_an_unanswered_one_is_sent_again_never_dropped():
    rm = ReplicasManager.initial("b1", "b1", policy=SyncStateSetPolicy("b1", alter_timeout_ms=5_000))
    rm.connections["b2"] = HaConnection(0)
    (first,) = rm.check_sync_state_set(0)
    assert first.action == "ExpandSyncStateSet" and rm.remote_sss == SSS
    assert rm.check_sync_state_set(4_999) == ()
    (again,) = rm.check_sync_state_set(5_000)
    assert again.action == "Resend" and again.sss == SSS
    assert rm.remote_sss == SSS and rm.ack_members() == {"b2"}       # the union holds meanwhile


def test_a_refusal_of_a_proposal_already_committed_keeps_the_member():
    """The first AlterSyncStateSet was committed but its answer lost; the second is refused (the
    sssEpoch moved).  The core learns the metadata first, so b2 never leaves the ack view."""
    rm = ReplicasManager.initial("b1", "b1")
    rm.connections["b2"] = HaConnection(0)
    rm.check_sync_state_set(0)
    rm.alter_answered(False, "b1", 1, SSS, 2)
    assert rm.sss == SSS and not rm.remote_sss and rm.ack_members() == {"b2"}
    rm2 = ReplicasManager.initial("b1", "b1")
    rm2.connections["b2"] = HaConnection(0)
    rm2.check_sync_state_set(0)
    rm2.alter_answered(False, "b1", 1, frozenset({"b1"}), 1)           # a real refusal: nothing committed
    assert rm2.sss == {"b1"} and not rm2.remote_sss and rm2.ack_members() == frozenset()


def test_the_policy_keeps_a_bounded_table():
    policy = SyncStateSetPolicy("b1")
    for k in range(500):
        _decide(policy, k, {f"b{k + 2}": 0}, 10, sss=frozenset({"b1"}))
    assert len(policy.caught_up_ms) <= sss_policy.MAX_TRACKED_MEMBERS


def _wrong_expand(me, sss, remote_sss, acks, log_end_offset, confirm_offset, epoch_start_offset, slave):
    """A seeded defect (no named bug switch): a connected slave inside this epoch joins,
    whatever it holds."""
    if remote_sss or slave in sss or slave == me or slave not in acks:
        return False
    return acks[slave] >= epoch_start_offset


def test_a_defect_seeded_in_the_policy_is_caught_by_the_failover_fuzzer_within_1000_seeds(monkeypatch):
    """The policy the node runs is the one every fuzz seed (reference/failover/drive.simulate,
    what `ackorder fuzz --model failover` fans out) checks step by step against the spec.
    (The shrink guard's own checks are all implied by the policy's timer and its one-at-a-time
    rule, so a defect seeded there alone changes nothing: not a test of anything.)"""
    from reference.failover.drive import simulate

    name = "may_expand"
    monkeypatch.setattr(sss_policy, name, _wrong_expand)
    for seed in range(1_000):
        run = simulate(seed)
        if run.violation:
            assert run.violation == "Refinement" and "SyncStateSet" in run.detail, run.detail
            return
    pytest.fail(f"a wrong {name} survived 1,000 failover seeds")


def test_alone_the_policy_proposes_nothing_and_a_timed_out_alter_is_named():
    policy = SyncStateSetPolicy("b1", alter_timeout_ms=10)
    assert _decide(policy, 0, {}, 0, sss=frozenset({"b1"})) is None
    assert _decide(policy, 0, {}, 0, remote=SSS) is None
    assert _decide(policy, 10, {}, 0, remote=SSS) == ALTER_TIMED_OUT
    assert _decide(policy, 11, {}, 0, remote=SSS) is None        # the clock restarts at the resend


@pytest.mark.parametrize("bugs", [frozenset(), frozenset({"BugShrinkBeforeCommit"})])
def test_bug_shrink_before_commit_stops_waiting_for_a_member_the_controller_still_holds(bugs):
    """b2 lags; the policy proposes to drop it.  Until the controller commits that, b2 may still
    be elected, so a PUT_OK must still wait for it (the union rule).  BugShrinkBeforeCommit
    counts over the proposal alone: the master's next put is acknowledged without b2."""
    rm = ReplicasManager.initial("b1", "b1", bugs=bugs, policy=SyncStateSetPolicy("b1", max_not_catchup_ms=10))
    rm.change_sync_state_set("b1", 1, SSS, 2)
    rm.log_end_offset = 100                            # the master core's log end (BrokerCore._sync)
    assert rm.check_sync_state_set(0) == ()          # b2's clock starts at the first check
    (proposal,) = rm.check_sync_state_set(10)
    assert proposal.action == "ShrinkSyncStateSet" and proposal.member == "b2"
    # the members a PUT_OK waits for: what BrokerCore pushes into MasterCore's ack view
    assert rm.ack_members() == (frozenset() if bugs else {"b2"})


def test_a_node_refuses_controller_metadata_past_what_a_master_serves():
    """The controller's GetReplicaInfo is network input: a group of more brokers than a master may
    take is refused with a log line by the node, before MasterCore.change_sync_state_set's
    assertion (at most 64 replicas) could stop the master."""
    from reference.failover.roles import MAX_SLAVES
    from reference.real.node import metadata_past_bounds

    ok = {"addresses": {str(b): f"127.0.0.1:{b}:{b}" for b in range(1, MAX_SLAVES + 2)},
          "sync_state_set": list(range(1, MAX_SLAVES + 1))}
    assert metadata_past_bounds(ok) is None
    assert "at most 65 brokers" in metadata_past_bounds({**ok, "addresses": {**ok["addresses"], "999": "h:1:2"}})
    assert "SyncStateSet of 65" in metadata_past_bounds({**ok, "sync_state_set": list(range(1, MAX_SLAVES + 2))})


def test_a_slow_member_is_dropped_at_the_first_check_past_the_bound_whatever_the_check_period():
    """Found by `ackorder mutate` (issue 36): the drop's `>=` turned to `==` passed every check, since
    each test's checks landed on the bound's exact millisecond.  Checks 300 ms apart never do here:
    the member that has not caught up since 0 goes at 1,200, the first check past 1,000."""
    policy = SyncStateSetPolicy("b1", max_not_catchup_ms=1_000)
    out = {t: _decide(policy, t, {}, 50) for t in range(0, 1_500, 300)}
    assert out == {0: None, 300: None, 600: None, 900: None,
                   1_200: Proposal("ShrinkSyncStateSet", "b2", frozenset({"b1"}))}


def test_an_unanswered_proposal_is_sent_again_at_the_first_check_past_its_timeout():
    """The same for the resend: `<` turned to `!=` held while a check fell on the timeout exactly."""
    rm = ReplicasManager.initial("b1", "b1", policy=SyncStateSetPolicy("b1", alter_timeout_ms=5_000))
    rm.connections["b2"] = HaConnection(0)
    (first,) = rm.check_sync_state_set(0)
    assert first.action == "ExpandSyncStateSet"
    assert rm.check_sync_state_set(3_000) == ()
    (again,) = rm.check_sync_state_set(6_000)
    assert again.action == "Resend" and again.sss == SSS


# --- the guards' contracts, each case one a caller never sends today (issue 36: a mutant of these
# lines passed every check, because the node and the simulator only ever ask with b1 as master,
# a connected member, and a slave's ack at the previous check's log end exactly)

def test_the_guards_name_any_broker_master_and_never_the_master_itself():
    """The names are compared for equality only: with b2 or b3 as master, b1 is a slave like another."""
    for me, slave in (("b2", "b1"), ("b3", "b1"), ("b3", "b2"), ("b1", "b3")):
        sss = frozenset({me, slave})
        assert sss_policy.may_shrink(me, sss, frozenset(), {slave: 5}, 10, slave)          # behind
        assert sss_policy.may_shrink(me, sss, frozenset(), {}, 10, slave)                  # not connected
        assert not sss_policy.may_shrink(me, sss, frozenset(), {me: 5}, 10, me)            # never itself
        alone = frozenset({me})
        assert sss_policy.may_expand(me, alone, frozenset(), {slave: 10}, 10, 0, 0, slave)
        assert not sss_policy.may_expand(me, alone, frozenset(), {me: 10}, 10, 0, 0, me)


def test_shrink_refuses_a_caught_up_member_a_non_member_and_any_while_a_proposal_is_in_flight():
    sss = frozenset({"b1", "b2"})
    assert not sss_policy.may_shrink("b1", sss, frozenset(), {"b2": 10}, 10, "b2")        # at the log end
    assert not sss_policy.may_shrink("b1", sss, frozenset(), {"b3": 5}, 10, "b3")         # not a member
    assert not sss_policy.may_shrink("b1", sss, frozenset(), {}, 10, "b3")
    assert not sss_policy.may_shrink("b1", sss, frozenset({"b1"}), {"b2": 5}, 10, "b2")   # one at a time


def test_expand_refuses_a_slave_with_no_connection_and_any_while_a_proposal_is_in_flight():
    alone = frozenset({"b1"})
    assert not sss_policy.may_expand("b1", alone, frozenset(), {}, 10, 0, 0, "b2")
    assert not sss_policy.may_expand("b1", alone, frozenset({"b1", "b2"}), {"b2": 10}, 10, 0, 0, "b2")
    assert not sss_policy.may_expand("b1", frozenset({"b1", "b2"}), frozenset(), {"b2": 10}, 10, 0, 0, "b2")


def test_a_member_whose_ack_passes_the_last_checks_log_end_is_caught_up_though_behind_the_current_one():
    """updateConnectionLastCaughtUpTime: an ack at or beyond where the log ended at the previous
    check counts (under load the ack is rarely exactly there)."""
    policy = SyncStateSetPolicy("b1", max_not_catchup_ms=1_000)
    for k in range(1, 30):
        # the log end grows by 100 per check; b2's ack is 50 past the previous check's end
        assert _decide(policy, 400 * k, {"b2": 100 * (k - 1) + 50}, 100 * k) is None, k


def test_a_member_that_left_and_comes_back_starts_a_new_clock():
    """A broker that is neither a member nor connected is forgotten; taken back later, its clock
    starts then, not at the time it was first seen."""
    policy = SyncStateSetPolicy("b1", max_not_catchup_ms=1_000)
    both = frozenset({"b1", "b2"})
    assert _decide(policy, 0, {"b2": 10}, 10, sss=both) is None                  # b2 seen at 0
    assert _decide(policy, 100, {}, 10, sss=frozenset({"b1"})) is None           # dropped, disconnected
    assert "b2" not in policy.caught_up_ms
    assert _decide(policy, 50_000, {}, 10, sss=both) is None                     # a member again: now
    assert _decide(policy, 51_000, {}, 10, sss=both) == Proposal("ShrinkSyncStateSet", "b2", frozenset({"b1"}))


def test_the_policys_bounds_are_asserted_at_their_edges():
    SyncStateSetPolicy("b1", max_not_catchup_ms=1, alter_timeout_ms=1)
    for bad in ({"max_not_catchup_ms": 0}, {"max_not_catchup_ms": -1}, {"alter_timeout_ms": 0},
                {"alter_timeout_ms": -1}):
        with pytest.raises(AssertionError):
            SyncStateSetPolicy("b1", **bad)
    # the table holds every member and every connected slave a master can have (roles.MAX_SLAVES of
    # each, no two alike), and no more than MAX_TRACKED_MEMBERS
    from reference.failover.roles import MAX_SLAVES

    n = 2 * MAX_SLAVES
    assert sss_policy.MAX_TRACKED_MEMBERS >= n
    members = frozenset({"b1"} | {f"m{k}" for k in range(n // 2)})
    acks = {f"s{k}": 10 for k in range(n - len(members) + 1)}       # members but b1, and these: n names
    policy = SyncStateSetPolicy("b1")
    _decide(policy, 0, acks, 10, sss=members)
    assert len(policy.caught_up_ms) == n
    more = {f"x{k}": 10 for k in range(sss_policy.MAX_TRACKED_MEMBERS - n + 1)}
    with pytest.raises(AssertionError):
        _decide(SyncStateSetPolicy("b1"), 0, {**acks, **more}, 10, sss=members)


def test_the_defaults_are_rocketmqs_a_member_behind_for_15_s_is_dropped_an_alter_unanswered_for_10_s_is_sent_again():
    """MessageStoreConfig.haMaxTimeSlaveNotCatchup = 15,000 ms; the alter's answer is given up after 10,000 ms."""
    policy = SyncStateSetPolicy("b1")
    assert _decide(policy, 0, {}, 50) is None
    assert _decide(policy, 14_999, {}, 50) is None
    assert _decide(policy, 15_000, {}, 50) == Proposal("ShrinkSyncStateSet", "b2", frozenset({"b1"}))
    proposed = frozenset({"b1"})
    assert _decide(policy, 24_999, {}, 50, remote=proposed) is None         # sent at 15,000
    assert _decide(policy, 25_000, {}, 50, remote=proposed) == ALTER_TIMED_OUT
