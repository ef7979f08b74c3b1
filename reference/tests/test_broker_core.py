"""BrokerCore (reference/failover/broker.py): the joins between the role state and the byte-level
machines that the node performs and the follower machine (test_follower_machine.py) drives through
restarts, failovers and promotions.  Here: the paths that machine does not take — a master
re-elected while it serves, a SyncStateSet decision on its own acks, what a heartbeat reports."""

from __future__ import annotations

import pytest

from reference.failover import broker_effects as bfx
from reference.failover.broker import BrokerCore
from reference.failover.epochfile import EpochFileCache
from reference.failover.sss_policy import SyncStateSetPolicy
from reference.replica import ReplicaCore
from reference.tests.test_follower_machine import SEG, Master


def _master_broker(records: int = 3) -> tuple[BrokerCore, Master]:
    broker = BrokerCore("b1", epoch_cache=EpochFileCache(), log_end_offset=0, bugs=frozenset(),
                        policy=SyncStateSetPolicy("b1", max_not_catchup_ms=1_000), checkpoint_confirm_offset=0)
    master = Master([(k, 40) for k in range(records)], None)
    broker.peers = ("s",)
    broker.attach_master(master.core)
    (written,) = broker.change_to_master(1, frozenset({"b1"}), 1)
    master.pump()
    assert tuple(map(tuple, written.entries)) == ((1, master.end),)
    return broker, master


def test_a_master_re_elected_while_serving_starts_its_epoch_at_its_log_end_and_labels_from_there():
    broker, master = _master_broker()
    first = master.end                  # epoch 1 started at the log end it was elected with
    master.put(99, 40)
    end = master.core.log.wrote
    assert end > first
    effects = broker.change_to_master(2, frozenset({"b1"}), 1)
    assert [tuple(map(tuple, e.entries)) for e in effects if isinstance(e, bfx.WriteEpochFile)] == \
        [((1, first), (2, end))]
    assert tuple(tuple(e) for e in master.core.epochs.entries) == ((1, first), (2, end))
    assert broker.rm.epoch_cache.last_start() == end and broker.rm.master_epoch == 2
    assert broker.change_to_master(2, frozenset({"b1"}), 1) == (), "E5: the same epoch twice is refused"


def test_an_expansion_joins_the_masters_ack_view_in_the_step_that_proposes_it():
    """#5663: from the proposal on, PUT_OKs wait for the proposed member too."""
    broker, master = _master_broker()
    core = master.core
    core.replica_connection_opened(1, 0)
    core.replica_handshake(1, "s", master.end, core.log.index.chain_at(master.end), 0, 3)
    master.pump()
    core.replica_ack(1, master.end, 0, 3)
    master.pump()
    (proposal,) = broker.master_check_sync_state_set(0)
    assert (proposal.action, proposal.member) == ("ExpandSyncStateSet", "s")
    assert core.sync_state_set == frozenset({"s"}), "the proposal is not in the core's ack view"
    broker.master_alter_answered(False, "b1", 1, frozenset({"b1"}), 1)
    assert core.sync_state_set == frozenset(), "a refused proposal leaves the ack view"


def test_a_slave_reports_what_its_follower_holds_and_keeps_it_when_the_follower_stops():
    broker = BrokerCore("b2", epoch_cache=EpochFileCache(((1, 0),)), log_end_offset=0, bugs=frozenset(),
                        policy=SyncStateSetPolicy("b2"), checkpoint_confirm_offset=0)
    broker.change_to_slave("b1", 1)
    follower = broker.attach_follower(ReplicaCore("s", SEG))
    follower.client.cache = EpochFileCache(((1, 0), (2, 0)))      # as a DATA header labels it
    report = broker.heartbeat_report()
    assert (report.epoch, report.max_offset, report.confirm_offset) == (2, 0, 0)
    assert broker.stops_serving_for("b3") and not broker.stops_serving_for("b1")
    broker.detach()
    assert broker.rm.epoch_cache.entries == ((1, 0), (2, 0)) and broker.follower is None
    broker.attach_follower(ReplicaCore("s", SEG))
    with pytest.raises(AssertionError, match="one machine at a time"):
        broker.attach_follower(ReplicaCore("s", SEG))


def test_a_stopped_master_hands_over_the_log_its_files_hold_without_reading_them():
    """held_log from the master core's memory is what recovering its files gives (records across
    three segments, the last one partly filled)."""
    from reference.record import scan_log

    broker, master = _master_broker(records=0)
    for key in range(14):                  # 14 records of 80 bytes: padded rolls at 256-byte segments
        master.put(key, 80)
    broker.detach()
    held = broker.take_held()
    files = scan_log(sorted(master.files), lambda start: bytes(master.files[start]), SEG)
    assert held is not None
    assert (held.scan.end_offset, held.scan.record_count, held.scan.checkpoints, held.scan.tail_bytes) == \
        (files.end_offset, files.record_count, files.checkpoints, files.tail_bytes)
    assert len(files.checkpoints) >= 3 and broker.take_held() is None, "a held log is taken once"


def test_a_follower_stopped_in_the_middle_of_a_cut_leaves_the_next_runtime_to_recover():
    broker = BrokerCore("b2", epoch_cache=EpochFileCache(((1, 0),)), log_end_offset=0, bugs=frozenset(),
                        policy=SyncStateSetPolicy("b2"), checkpoint_confirm_offset=0)
    broker.change_to_slave("b1", 1)
    follower = broker.attach_follower(ReplicaCore("s", SEG))
    follower.rescanning = follower.index_stale = True     # TruncateLog performed, RescanLog not answered yet
    follower.disconnected()                 # the role closes: its link goes first (ReplicaRuntime.close_role)
    broker.detach()
    assert broker.take_held() is None


def test_brokers_that_come_and_go_past_the_bound_are_refused_not_asserted():
    """The controller's metadata is network input: a master only ever adds slaves, so a group
    whose brokers keep changing would pass MasterCore's bound over time — refused before it."""
    from reference.master import MAX_REPLICAS

    broker, _ = _master_broker()
    assert broker.peers_problem(tuple(f"b{k}" for k in range(2, 5))) is None
    broker.peers = tuple(f"b{k}" for k in range(2, MAX_REPLICAS))
    assert broker.peers_problem(("b999",)) is None
    assert "at most 64" in broker.peers_problem(("b999", "b1000", "b1001"))


def test_a_re_elected_master_answers_its_earlier_epochs_requests_with_an_error_never_put_ok():
    """The spec's Respond needs the master's epoch to be the request's: a request waiting for the
    SyncStateSet of epoch 1 is answered FLUSH_SLAVE_TIMEOUT when epoch 2 begins (whose set is this
    master alone), never PUT_OK.  Found by the byte-level failover simulator: the core answered it
    PUT_OK at the next ACK, a step no spec path allows."""
    from reference import effects as fx
    from reference.status import PutStatus

    broker, master = _master_broker(records=0)
    broker.master_sync_state_set("b1", 1, frozenset({"b1", "s"}), 2)
    master.put(7, 40)
    assert 7 not in master.acked and master.core.requests, "it waits for s"
    broker.change_to_master(2, frozenset({"b1"}), 3)
    answers = [(e.req_id, PutStatus(e.status)) for e in master.core.take_effects() if isinstance(e, fx.Respond)]
    assert answers == [(1, PutStatus.FLUSH_SLAVE_TIMEOUT)] and not master.core.requests, answers


def test_a_demoted_master_leaves_the_confirm_offset_its_core_reached():
    """detach: confirmOffset moved on the master core's acks since the manager last synced; a
    demoted master kept the manager's older value (the byte-level simulator: ChangeToSlave moved
    confirm back, a step the spec does not take)."""
    broker, master = _master_broker()
    core = master.core
    assert core.confirm == master.end
    master.put(8, 40)                  # alone in its SyncStateSet: the put moves confirmOffset
    assert core.confirm == master.end > broker.rm.confirm_offset
    broker.detach()
    assert broker.rm.confirm_offset == master.end


def test_a_demoted_master_answers_its_waiting_requests_when_its_machine_stops():
    """detach: a request waiting for a member's ACK is answered FLUSH_SLAVE_TIMEOUT when the master's
    machine stops — none waits on a machine that is gone (found by review: a demoted master's request,
    its core discarded, waited forever once the broker was elected again)."""
    from reference import effects as fx
    from reference.status import PutStatus

    broker, master = _master_broker(records=0)
    broker.master_sync_state_set("b1", 1, frozenset({"b1", "s"}), 2)
    master.put(7, 40)
    assert master.core.requests, "it waits for s"
    core = master.core
    broker.detach()
    answers = [(e.req_id, PutStatus(e.status)) for e in core.take_effects() if isinstance(e, fx.Respond)]
    assert answers == [(1, PutStatus.FLUSH_SLAVE_TIMEOUT)] and not core.requests, answers


def test_the_held_log_ends_at_any_record_boundary_it_is_asked_for():
    """Found by `ackorder mutate` (issue 36): `end_offset - tail_start` turned to `+` in held_log passed
    everything, since every hand-over held the whole log.  A slave hands over at its parsed end,
    with a record's first bytes past it: asked for each boundary, the held log ends there, with
    the records below it, whichever segment holds the end."""
    from reference.commitlog import held_log

    _, master = _master_broker(records=0)
    for key in range(14):                  # 14 records of 80 bytes over 256-byte segments
        master.put(key, 80)
    log = master.core.log
    count = log.index.count
    ends = [log.index.end_after(k) for k in range(1, count + 1)]
    assert any(e % SEG for e in ends if e >= SEG), "no boundary inside a segment past the first"
    for k, end in enumerate(ends, 1):
        scan = held_log(log.index, log.segments, end)
        assert (scan.end_offset, scan.record_count) == (end, k), (k, end, scan.end_offset, scan.record_count)


def test_the_peers_bound_counts_a_masters_replicas_and_holds_with_no_machine():
    """Before any role's machine runs (a restarted broker), only its known peers and the new ones
    count; while master, its core's replicas count too."""
    from reference.master import MAX_REPLICAS

    idle = BrokerCore("b2", epoch_cache=EpochFileCache(((1, 0),)), log_end_offset=0, bugs=frozenset(),
                      policy=SyncStateSetPolicy("b2"), checkpoint_confirm_offset=0)
    assert idle.peers_problem(tuple(f"p{k}" for k in range(MAX_REPLICAS))) is None
    assert "at most 64" in idle.peers_problem(tuple(f"p{k}" for k in range(MAX_REPLICAS + 1)))
    broker, _ = _master_broker()                  # its core replicates to "s"
    broker.peers = ()
    assert broker.peers_problem(tuple(f"p{k}" for k in range(MAX_REPLICAS - 1))) is None
    assert "at most 64" in broker.peers_problem(tuple(f"p{k}" for k in range(MAX_REPLICAS)))


def test_only_a_change_of_master_ends_the_machine_a_broker_runs():
    master, _ = _master_broker()                               # b1, master of epoch 1
    assert not master.stops_serving_for("b1"), "named master again: it goes on serving"
    assert master.stops_serving_for("b2"), "demoted"
    slave = BrokerCore("b2", epoch_cache=EpochFileCache(((1, 0),)), log_end_offset=0, bugs=frozenset(),
                       policy=SyncStateSetPolicy("b2"), checkpoint_confirm_offset=0)
    slave.change_to_slave("b1", 1)
    assert not slave.stops_serving_for("b1"), "no machine yet"
    slave.attach_follower(ReplicaCore("s", SEG))
    assert not slave.stops_serving_for("b1"), "the same master: the follower goes on"
    assert slave.stops_serving_for("b3") and slave.stops_serving_for("b2"), "another master, or itself promoted"


def test_the_first_machines_held_log_is_zeroed_beyond_its_end_like_every_hand_over():
    scan = _held_scan_of_empty_log()
    broker = BrokerCore("b2", epoch_cache=EpochFileCache(), log_end_offset=scan.end_offset, bugs=frozenset(),
                        policy=SyncStateSetPolicy("b2"), checkpoint_confirm_offset=0, recovered=scan)
    held = broker.take_held()
    assert held.scan is scan and held.zero_beyond is True


def _held_scan_of_empty_log():
    from reference.record import scan_log
    return scan_log([], lambda start: b"", SEG)
