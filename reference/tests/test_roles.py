"""The ReplicasManager (reference/failover/roles.py), the role and epoch state of a broker: E5, the
new master's epoch entry, fencing after a restart, the confirmOffset clamp, a refused alter — each
rule on its own — and the pure rules the byte-level cores call (ack_view, confirm_with,
transfer_label) against the spec on random states.  The bytes these rules govern are checked
against the spec step by step by the failover simulator (test_failover_drive.py), which drives
BrokerCores over MasterCore and FollowerCore; every broker-side bug switch is shown to bite in
the table of docs/reference.md."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.failover import broker_effects as fx
from reference.failover.bugs import BROKER_BUG_NAMES
from reference.failover.epochfile import EpochFileCache
from reference.failover.roles import (
    MASTER, SLAVE, HaConnection, ReplicasManager, RoleError, ack_view, confirm_with, transfer_label,
)
from spec.failover import actions as sa
from spec.failover import functions as sf
from spec.failover.config import FailoverConfig

BROKERS = ("b1", "b2", "b3")


def cfg(*bugs: str) -> FailoverConfig:
    return FailoverConfig(brokers=BROKERS, initial_master="b1", bugs=frozenset(bugs))


# --- E5, the new master's entry, fencing --------------------------------------------------------

def test_role_changes_take_only_a_larger_epoch():
    rm = ReplicasManager.initial("b2", "b1")
    assert rm.change_to_master(1, frozenset({"b2"}), 2) == ()          # epoch 1 is known: refused
    assert rm.role == SLAVE and rm.master_epoch == 1
    assert rm.change_to_slave("b3", 1) == () and rm.master_id == "b1"
    assert rm.change_to_slave("b3", 2) == (fx.StartHaClient("b3"),) and rm.master_id == "b3"
    assert rm.change_to_slave("b1", 2) == () and rm.master_id == "b3"   # an older or equal epoch loses
    with pytest.raises(RoleError, match="b2: change_to_slave names 'b2' as master"):
        rm.change_to_slave("b2", 9)


def test_a_new_master_appends_its_epoch_at_its_max_offset_and_writes_the_file_first():
    rm = ReplicasManager.initial("b2", "b1")
    rm.log_end_offset = rm.confirm_offset = 10                 # what its follower held (BrokerCore.detach)
    rm.epoch_cache = EpochFileCache(((1, 0),))
    effects = rm.change_to_master(2, frozenset({"b2"}), 2)
    assert effects == (fx.StopHaClient(), fx.WriteEpochFile(((1, 0), (2, 10))))
    assert rm.role == MASTER and rm.epoch_cache.entries == ((1, 0), (2, 10)) and rm.confirm_offset == 10


def test_a_new_master_drops_entries_of_its_epoch_or_later():
    rm = ReplicasManager.recover("b2", epoch_cache=EpochFileCache(((1, 0), (3, 4))), log_end_offset=6,
                                 checkpoint_confirm_offset=6)
    rm.change_to_master(3, frozenset({"b2"}), 4)
    assert rm.epoch_cache.entries == ((1, 0), (3, 6))


def test_a_restarted_broker_is_fenced_until_it_learns_its_role():
    rm = ReplicasManager.recover("b2", epoch_cache=EpochFileCache(((1, 0), (2, 9))), log_end_offset=7,
                                 checkpoint_confirm_offset=5)
    assert rm.fenced and rm.role == SLAVE and rm.master_epoch == 0
    assert rm.epoch_cache.entries == ((1, 0),)            # the entry for records the log lost goes
    with pytest.raises(RoleError):
        rm.propose_sync_state_set(frozenset({"b2"}))
    assert rm.change_to_slave("b1", 3) == (fx.StartHaClient("b1"),)
    assert not rm.fenced and rm.master_id == "b1"


def test_recovery_clamps_confirm_offset_and_bug_confirm_not_clamped_does_not():
    kw = dict(epoch_cache=EpochFileCache(((1, 0),)), log_end_offset=7, checkpoint_confirm_offset=12)
    assert ReplicasManager.recover("b2", **kw).confirm_offset == 7
    assert ReplicasManager.recover("b2", **kw, bugs=frozenset({"BugConfirmNotClamped"})).confirm_offset == 12
    c = cfg("BugConfirmNotClamped")                      # the spec's variant does the same
    s = attrs.evolve(sa.initial_state(c), up=(True, False, True), blog=((), (1,) * 7, ()), confirm=(0, 12, 0))
    (t,) = sa.broker_restart(c, s, "b2")
    (u,) = sa.broker_restart(cfg(), s, "b2")
    assert (t.confirm[1], u.confirm[1]) == (12, 7)


# --- the SyncStateSet proposal --------------------------------------------------------------------

def test_alter_refused_drops_the_proposal():
    rm = ReplicasManager.initial("b1", "b1")
    rm.log_end_offset = 5
    rm.propose_sync_state_set(frozenset({"b1", "b2"}))
    rm.alter_refused()
    assert rm.remote_sss == frozenset() and rm.confirm_offset == 5, "alone again: the log end"
    with pytest.raises(RoleError):
        ReplicasManager.initial("b2", "b1").propose_sync_state_set(frozenset({"b2"}))


# --- the transfer label -----------------------------------------------------------------------------

@st.composite
def master_caches(draw):
    n = draw(st.integers(min_value=1, max_value=4))
    epochs = sorted(draw(st.sets(st.integers(min_value=1, max_value=9), min_size=n, max_size=n)))
    starts = [0] + sorted(draw(st.lists(st.integers(min_value=0, max_value=40), min_size=n - 1, max_size=n - 1)))
    return EpochFileCache(tuple(zip(epochs, starts)))


@settings(max_examples=300, deadline=None)
@given(master_caches(), st.integers(min_value=0, max_value=45), st.integers(min_value=0, max_value=10),
       st.booleans())
def test_transfer_label_is_the_specs(cache, offset, cursor, bug):
    bugs = frozenset({"BugTransferCursorNotReset"}) if bug else frozenset()
    s = attrs.evolve(sa.initial_state(cfg(*bugs)), epochCache=(cache.entries, (), ()), cursorEpoch=(0, cursor, 0))
    assert transfer_label(cache, offset, cursor, bugs=bugs) == sf.transfer_label(cfg(*bugs), s, 0, 1, offset)


# --- the pure rules against the spec on random states ---------------------------------------------

SETS = st.sets(st.sampled_from(BROKERS)).map(frozenset)


@settings(max_examples=500, deadline=None)
@given(SETS, SETS, st.tuples(st.booleans(), st.booleans(), st.booleans()),
       st.tuples(*[st.sampled_from(BROKERS + ("NoBroker",))] * 3), st.tuples(*[st.integers(0, 6)] * 3),
       st.integers(0, 6), st.integers(0, 6), st.integers(0, 6),
       st.sets(st.sampled_from(["BugNoAllAck", "BugCommittedSssOnly", "BugConfirmOverConnected"])))
def test_ack_and_confirm_rules_are_the_specs(sss, remote, connected, masters, acks, log_len, old, off, bugs):
    c = cfg(*bugs)
    sss = sss | {"b1"}
    s = attrs.evolve(sa.initial_state(c), bSSS=(sss, frozenset(), frozenset()),
                     bRemoteSSS=(remote, frozenset(), frozenset()), connected=connected, bMasterId=masters,
                     ack=acks, blog=(tuple(range(log_len)), (), ()))
    conns = {b: HaConnection(acks[k]) for k, b in enumerate(BROKERS)
             if k != 0 and sf.connected_to(c, s, k, "b1")}
    bugs = frozenset(bugs)
    assert ack_view(sss, remote, bugs=bugs) == sf.ack_view(c, s, 0)
    view = sss | remote
    assert confirm_with("b1", view, conns, log_len, old, bugs=bugs) == sf.confirm_with(
        c, s, 0, view, s.connected, s.ack, old)


def test_every_broker_bug_switch_has_a_bite_test_named_in_the_docs():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reference.md").read_text()
    rows = dict(re.findall(r"^\| `(Bug\w+)` \| .*? \| (.*) \|$", doc, re.M))
    assert sorted(rows) == sorted(BROKER_BUG_NAMES)
    for bug, tests in rows.items():
        named = re.findall(r"`(test_\w+)\.py::(test_\w+)`", tests)
        assert named, f"docs/reference.md names no test for {bug}"
        for module, name in named:
            assert hasattr(importlib.import_module(f"reference.tests.{module}"), name), (bug, module, name)


def test_the_role_the_metadata_names_only_for_a_larger_epoch():
    from reference.failover.epochfile import EpochFileCache
    from reference.failover.roles import MASTER, SLAVE, ReplicasManager

    rm = ReplicasManager.recover("b1", epoch_cache=EpochFileCache(), log_end_offset=0, checkpoint_confirm_offset=0)
    assert rm.role_named(None, 5) is None                 # no master elected yet
    assert rm.role_named("b1", 1) == MASTER and rm.role_named("b2", 1) == SLAVE
    rm.change_to_slave("b2", 3)
    assert rm.role_named("b1", 3) is None and rm.role_named("b2", 2) is None     # E5: not a larger epoch
    assert rm.role_named("b1", 4) == MASTER


# --- issue 36: the SyncStateSet guards, each clause on its own (every caller checks the role first,
# and a stale answer fails two clauses at once, so a mutant of any one clause passed every simulator)

def _master(sss=frozenset({"b1", "b2"}), sss_epoch=3) -> ReplicasManager:
    rm = ReplicasManager.initial("b1", "b1")
    rm.change_to_master(2, sss, sss_epoch)
    rm.connections = {"b2": HaConnection(5), "b3": HaConnection(10)}     # b2 behind, b3 at the log end
    rm.log_end_offset = 10
    return rm


def test_change_sync_state_set_takes_only_its_own_epochs_newer_set():
    new = frozenset({"b1", "b2", "b3"})
    for refused in (("b2", 2, new, 4),          # another master named
                    ("b1", 1, new, 4),          # an older master epoch
                    ("b1", 3, new, 4),          # a newer one: a role change comes first
                    ("b1", 2, new, 3),          # the same sssEpoch
                    ("b1", 2, new, 2)):         # an older one
        rm = _master()
        assert rm.change_sync_state_set(*refused) is False, refused
        assert rm.sss == frozenset({"b1", "b2"}) and rm.sss_epoch == 3, refused
    rm = _master()
    assert rm.change_sync_state_set("b1", 2, new, 4) is True and rm.sss == new and rm.sss_epoch == 4
    slave = ReplicasManager.initial("b2", "b1")
    assert slave.change_sync_state_set("b2", slave.master_epoch, new, 9) is False and slave.sss_epoch != 9


def test_only_a_master_waits_for_members_shrinks_expands_or_proposes():
    rm = _master(sss=frozenset({"b1", "b2"}))
    assert rm.ack_members() == frozenset({"b2"})
    assert rm.may_shrink("b2") and rm.may_expand("b3")
    slave = ReplicasManager.initial("b2", "b1")
    slave.sss = frozenset({"b2", "b3"})
    slave.connections = {"b3": HaConnection(0), "b1": HaConnection(10)}   # as a master's would be
    slave.log_end_offset = 10
    assert slave.ack_members() == frozenset()
    assert not slave.may_shrink("b3") and not slave.may_expand("b1")
    with pytest.raises(RoleError):
        slave.propose_sync_state_set(frozenset({"b2"}))


def test_a_proposal_holds_the_master_and_at_most_max_slaves_brokers():
    rm = _master(sss=frozenset({"b1"}))
    full = frozenset({"b1"} | {f"s{k}" for k in range(63)})             # MAX_SLAVES, 64, written out
    assert rm.propose_sync_state_set(full) == full
    for bad in (full | {"one-more"}, frozenset({"b2"})):
        rm = _master(sss=frozenset({"b1"}))
        with pytest.raises(AssertionError):
            rm.propose_sync_state_set(bad)


def test_a_refused_alter_drops_the_proposal_and_an_accepted_one_keeps_the_set_it_committed():
    rm = _master(sss=frozenset({"b1"}))
    rm.propose_sync_state_set(frozenset({"b1", "b2"}))
    rm.alter_answered(True, "b1", 2, frozenset({"b1", "b2"}), 4)
    assert rm.sss == frozenset({"b1", "b2"}) and rm.remote_sss == frozenset()
    rm.propose_sync_state_set(frozenset({"b1"}))
    rm.alter_answered(False, "b1", 2, frozenset({"b1", "b2"}), 4)
    assert rm.remote_sss == frozenset() and rm.sss == frozenset({"b1", "b2"})


def test_an_accepted_alter_whose_metadata_is_not_newer_keeps_the_proposal_in_flight():
    """The answer's metadata is learned first; accepted, the proposal stays in the ack view until a
    newer SyncStateSet arrives (#5663: dropping it would let a PUT_OK skip a member the controller
    may already hold)."""
    rm = _master(sss=frozenset({"b1"}))
    proposal = rm.propose_sync_state_set(frozenset({"b1", "b2"}))
    rm.alter_answered(True, "b1", 2, frozenset({"b1"}), 3)      # metadata as of before the commit
    assert rm.remote_sss == proposal and rm.ack_members() == frozenset({"b2"})


# --- issue 36: the failover cores' campaign (roles.py survivors) ----------------------------------

def test_the_initial_master_holds_sss_epoch_one_as_the_controllers_first_record_does():
    rm = ReplicasManager.initial("b1", "b1")
    assert rm.change_sync_state_set("b1", 1, frozenset({"b1", "b2"}), 1) is False, "the same sssEpoch"
    assert rm.change_sync_state_set("b1", 1, frozenset({"b1", "b2"}), 2) is True


def test_a_slave_told_its_own_master_again_only_records_the_epoch():
    rm = ReplicasManager.initial("b2", "b1")
    assert rm.change_to_slave("b1", 2) == () and (rm.role, rm.master_id, rm.master_epoch) == (SLAVE, "b1", 2)
    assert rm.change_to_slave("b3", 3) == (fx.StartHaClient("b3"),), "a new master: a new handshake"


def test_a_demoted_master_closes_its_connections_and_a_slave_has_none_to_close():
    rm = _master()
    assert rm.change_to_slave("b3", 3) == (fx.CloseConnections(("b2", "b3")), fx.StartHaClient("b3"))
    assert rm.connections == {} and rm.sss == frozenset() and rm.role == SLAVE
    alone = ReplicasManager.initial("b1", "b1")                  # a master with no connection
    assert alone.change_to_slave("b2", 2) == (fx.StartHaClient("b2"),)


def test_only_a_master_checks_its_sync_state_set():
    """checkSyncStateSetAndDoReport: a master whose slave holds everything proposes it; a slave,
    whatever its view, proposes nothing."""
    rm = _master(sss=frozenset({"b1"}))
    rm.connections = {"b2": HaConnection(10)}
    out = rm.check_sync_state_set(0)
    assert [type(e).__name__ for e in out] == ["ProposeSyncStateSet"] and rm.remote_sss == frozenset({"b1", "b2"})
    slave = ReplicasManager.initial("b2", "b1")
    assert slave.check_sync_state_set(0) == ()


def test_under_bug_epoch_append_unchecked_the_bad_entry_reaches_the_spec_not_an_assertion():
    """The switch's out-of-order entry must be taken (and written), so that the refinement check
    and E1 see it; the manager's own order invariant is off under that switch only."""
    bug = frozenset({"BugEpochAppendUnchecked"})
    rm = ReplicasManager("b1", epoch_cache=EpochFileCache(((1, 0), (2, 100))), log_end_offset=50, confirm_offset=0,
                         bugs=bug)
    (written,) = rm.change_to_master(3, frozenset({"b1"}), 1)
    assert written.entries == ((1, 0), (2, 100), (3, 50)) and not rm.epoch_cache.ordered
    correct = ReplicasManager("b1", epoch_cache=EpochFileCache(((1, 0), (2, 100))), log_end_offset=50,
                              confirm_offset=0)
    with pytest.raises(AssertionError):
        correct.change_to_master(3, frozenset({"b1"}), 1)


def test_role_changes_refuse_an_older_epoch_too():
    rm = ReplicasManager.initial("b2", "b1")
    rm.change_to_slave("b3", 3)
    assert rm.change_to_master(2, frozenset({"b2"}), 9) == () and rm.role == SLAVE and rm.master_epoch == 3
    assert rm.change_to_slave("b1", 2) == () and rm.master_id == "b3" and rm.master_epoch == 3


def test_names_are_compared_for_equality_not_order():
    """Broker names are ids: b2 is not b1's master because "b1" < "b2"."""
    slave = ReplicasManager.initial("b1", "b2")
    assert slave.role == SLAVE and slave.master_id == "b2"
    other = ReplicasManager.initial("b2", "b1")
    assert other.role_named("b1", 2) == SLAVE and other.role_named("b3", 2) == SLAVE
    assert other.role_named("b2", 2) == MASTER


def test_a_master_takes_a_sync_state_set_and_connections_at_the_bound():
    """64 (MAX_SLAVES, written out): the most the node lets through is taken, never asserted."""
    sss = frozenset({"b1"} | {f"s{k}" for k in range(63)})
    rm = ReplicasManager.initial("b1", "b1")
    assert rm.change_to_master(2, sss, 2) and rm.sss == sss
    rm.connections = {f"s{k}": HaConnection(0) for k in range(63)} | {"t": HaConnection(0)}
    rm.check_invariants()


def test_only_a_slave_that_was_following_stops_its_ha_client_when_promoted():
    master = ReplicasManager.initial("b1", "b1")
    assert [type(e).__name__ for e in master.change_to_master(2, frozenset({"b1"}), 2)] == ["WriteEpochFile"]
    slave = ReplicasManager.initial("b2", "b1")
    assert [type(e).__name__ for e in slave.change_to_master(2, frozenset({"b2"}), 2)] == ["StopHaClient",
                                                                                             "WriteEpochFile"]
    fenced = ReplicasManager.recover("b3", epoch_cache=EpochFileCache(), log_end_offset=0, checkpoint_confirm_offset=0)
    assert [type(e).__name__ for e in fenced.change_to_master(2, frozenset({"b3"}), 2)] == ["WriteEpochFile"]
