"""Unit checks of the failover twin's rules, one RocketMQ rule each (the
TLC cross-check pins the whole state machine; these name the rules)."""

import attrs

from spec.failover.actions import (
    change_to_slave, elect_master, initial_state, put, replica_connect, respond, successors,
)
from spec.failover.config import FailoverBounds, FailoverConfig
from spec.failover.explore import permute
from spec.failover.functions import ack_covered, consistent_point
from spec.failover.properties import INVARIANTS, SAFETY
from spec.failover.state import MASTER, SLAVE

CFG = FailoverConfig(brokers=("b1", "b2", "b3"))
S0 = initial_state(CFG)


def _set(t, k, v):
    return t[:k] + (v,) + t[k + 1:]


def test_initial_state_satisfies_every_safety_property():
    assert all(INVARIANTS[p](CFG, S0) for p in SAFETY)


def test_handshake_cuts_a_demoted_master_back_to_the_new_masters_epoch_start():
    # rocketmq.md 3.14: M (b1) wrote records 1, 2 in epoch 1; N (b2) has record 1 and was promoted at
    # offset 1 (epoch 2), then wrote record 3.  M is cut back to min(M.max, N's epoch-1 end) = 1.
    s = attrs.evolve(
        S0, masterId="b2", masterEpoch=2, role=(SLAVE, MASTER, SLAVE), bMasterId=("b2", "b2", "b2"),
        bEpoch=(2, 2, 2), bSSS=(frozenset(), frozenset({"b2"}), frozenset()), bSssEpoch=(0, 2, 0),
        syncStateSet=frozenset({"b2"}), sssEpoch=2,
        blog=((1, 2), (1, 3), ()), epochCache=(((1, 0),), ((1, 0), (2, 1)), ()))
    assert consistent_point(CFG, s, 0, 1) == 1
    (t,) = replica_connect(CFG, s, "b1")
    assert t.blog[0] == (1,) and t.epochCache[0] == ((1, 0), (2, 1)) and t.connected[0] and t.ack[0] == 1


def test_no_common_epoch_cuts_the_whole_log_and_follows_from_0():
    """findConsistentPoint fails (only a lost epoch file leaves no common epoch): the slave cuts its
    whole log, durably even under B14, and follows from 0 (FollowerCore.epoch_reply's choice);
    a master whose entries do not cover 0 is refused."""
    s = attrs.evolve(S0, blog=((), (7,), ()), epochCache=(((1, 0),), ((3, 0),), ()),
                     bMasterId=("b1", "b1", "b1"))
    assert consistent_point(CFG, s, 1, 0) == -1
    for cfg in (CFG, attrs.evolve(CFG, bugs={"BugTruncateNotDurable"})):
        (t,) = replica_connect(cfg, s, "b2")
        assert (t.blog[1], t.staleTail[1], t.epochCache[1], t.ack[1], t.connected[1]) == ((), (), ((1, 0),), 0, True)
    uncovered = attrs.evolve(s, blog=((5,), (7,), ()), epochCache=(((2, 1),), ((3, 0),), ()))
    assert replica_connect(CFG, uncovered, "b2") == []


def test_union_rule_waits_for_the_proposed_member():
    # b1's local SSS is {b1}; {b1, b2} is proposed: an ack needs b2 (#5663).
    s = attrs.evolve(S0, bRemoteSSS=(frozenset({"b1", "b2"}), frozenset(), frozenset()),
                     alterPending=(True, False, False))
    (s,) = put(CFG, s, "b1")
    assert not ack_covered(CFG, s, 0, 1) and respond(CFG, s, 1) == []
    buggy = attrs.evolve(CFG, bugs={"BugCommittedSssOnly"})
    assert ack_covered(buggy, s, 0, 1) and respond(buggy, s, 1)


def test_union_rule_waits_for_a_member_proposed_to_be_dropped():
    # b1's SSS is {b1, b2}; dropping b2 is proposed but not committed: b2 may still be elected, so
    # an ack still needs it.  BugShrinkBeforeCommit counts over the proposal {b1} alone.
    s = attrs.evolve(S0, bSSS=(frozenset({"b1", "b2"}), frozenset(), frozenset()), syncStateSet=frozenset({"b1", "b2"}),
                     bRemoteSSS=(frozenset({"b1"}), frozenset(), frozenset()), alterPending=(True, False, False))
    (s,) = put(CFG, s, "b1")
    assert not ack_covered(CFG, s, 0, 1) and respond(CFG, s, 1) == []
    buggy = attrs.evolve(CFG, bugs={"BugShrinkBeforeCommit"})
    assert ack_covered(buggy, s, 0, 1) and respond(buggy, s, 1)


def test_election_only_from_live_sss_members_and_a_failed_one_still_bumps_the_epoch():
    dead_master = attrs.evolve(S0, up=(False, True, True), syncStateSet=frozenset({"b1", "b2"}))
    assert {t.masterId for t in elect_master(CFG, dead_master)} == {"b2"}          # E4
    assert all(t.masterEpoch == 2 and t.syncStateSet == {"b2"} for t in elect_master(CFG, dead_master))
    alone = attrs.evolve(S0, up=(False, True, True))
    (t,) = elect_master(CFG, alone)                                                  # E2
    assert t.masterId == CFG.no_broker and t.masterEpoch == 2 and t.syncStateSet == {"b1"}
    assert elect_master(CFG, S0) == []                                               # the master is alive


def test_role_changes_only_on_a_larger_epoch():
    s = attrs.evolve(S0, masterId="b2")           # same epoch: nothing happens (E5)
    assert change_to_slave(CFG, s, "b3") == []
    s = attrs.evolve(s, masterEpoch=2)
    (t,) = change_to_slave(CFG, s, "b3")
    assert t.bMasterId[2] == "b2" and t.bEpoch[2] == 2


def test_symmetry_swaps_followers_consistently():
    s = attrs.evolve(S0, blog=((1,), (1,), ()), connected=(False, True, False), ack=(0, 1, 0))
    p = permute(CFG, s, {"b2": "b3", "b3": "b2"})
    assert p.blog == ((1,), (), (1,)) and p.connected == (False, False, True) and p.ack == (0, 0, 1)
    assert permute(CFG, p, {"b2": "b3", "b3": "b2"}) == s


def test_successor_labels_name_the_tla_actions():
    labels = {lab.split("(")[0] for lab, _ in successors(CFG, FailoverBounds(max_cut_offs=1), S0)}
    assert {"Put", "ReplicaConnect", "BrokerCrash", "CutFromController"} <= labels
