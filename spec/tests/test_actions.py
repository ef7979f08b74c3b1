"""Targeted checks of the twin's actions: the behaviours each one exists for."""

import attrs

from spec import actions as a
from spec.config import Bounds, Config
from spec.functions import file_end
from spec.properties import INVARIANTS, type_ok
from spec.state import FLUSH_DISK_TIMEOUT, PUT_OK, SLAVE_NOT_AVAILABLE, TORN, UP

SF = Config(replicas=("r1",), flush_mode="SYNC_FLUSH", repl_mode="ASYNC_MASTER", file_size=2)
SM = Config(replicas=("r1", "r2"), flush_mode="ASYNC_FLUSH", repl_mode="SYNC_MASTER",
            ack_policy="ALL_IN_SYNC", transient_store_pool=True)


def one(states):
    assert len(states) == 1, states
    return states[0]


def puts(cfg, n, s=None):
    s = s or a.initial_state(cfg)
    for _ in range(n):
        s = one(a.put(cfg, s))
    return s


def deepest(states):
    """The flush or commit that reaches furthest (one that started after every write)."""
    return max(states, key=lambda t: (t.flushed, t.committed))


def test_group_commit_releases_every_covered_waiter_in_one_flush():
    s = puts(SF, 2)
    t = deepest(a.flush(SF, s))
    assert t.flushed == 2 and all(r.flush_done for r in t.reqs)


def test_an_fsync_covers_what_was_committed_when_it_started():
    s = puts(SF, 2)
    assert sorted(t.flushed for t in a.flush(SF, s)) == [1, 2]  # a put raced the fsync: only 1 covered
    partial = next(t for t in a.flush(SF, s) if t.flushed == 1)
    assert [r.flush_done for r in partial.reqs] == [True, False]


def test_a_flush_stops_at_the_file_end_so_a_rolled_message_needs_a_second_flush():
    cfg = attrs.evolve(SF, file_size=1)
    s = puts(cfg, 2)
    t = one(a.flush(cfg, s))  # file 1 ends at offset 1: no fsync reaches further
    assert (t.flushed, [r.flush_done for r in t.reqs]) == (1, [True, False])
    u = one(a.flush(cfg, t))
    assert u.flushed == 2 and all(r.flush_done for r in u.reqs)
    assert file_end(cfg, 1) == 2  # a watermark on a boundary belongs to the next file


def test_replication_reads_only_committed_data_with_the_pool():
    s = puts(SM, 1)
    s = one(a.replica_connect(SM, s, 0))
    assert a.transfer(SM, s, 0) == []          # the record is still in the write buffer
    s = one(a.commit(SM, s))
    s = one(a.transfer(SM, s, 0))
    assert s.rlog[0] == (1,)


def test_a_commit_copies_what_was_written_when_it_started_and_stops_at_the_file_end():
    cfg = attrs.evolve(SM, file_size=4)
    assert sorted(t.committed for t in a.commit(cfg, puts(cfg, 3))) == [1, 2, 3]
    assert sorted(t.committed for t in a.commit(SM, puts(SM, 3))) == [1, 2]  # file 1 holds 2 records


def test_all_in_sync_waits_for_every_replica_then_answers():
    s = puts(SM, 1)
    s = one(a.commit(SM, s))
    for k in (0, 1):
        s = one(a.replica_connect(SM, s, k))
    s = one(a.transfer(SM, s, 0))
    s = one(a.replica_ack(SM, s, 0))
    assert a.respond(SM, s, 1) == []
    s = one(a.transfer(SM, s, 1))
    s = one(a.replica_ack(SM, s, 1))
    assert one(a.respond(SM, s, 1)).reqs[0].status == PUT_OK


def test_timeout_status_follows_then_combine():
    s = puts(SM, 1)
    assert one(a.timeout(SM, s, 1)).reqs[0].status == SLAVE_NOT_AVAILABLE  # no slave connected
    t = puts(SF, 1)
    assert one(a.timeout(SF, t, 1)).reqs[0].status == FLUSH_DISK_TIMEOUT


def test_machine_crash_keeps_any_prefix_from_durable_and_maybe_a_torn_record():
    s = puts(SF, 2)
    s = one(a.flush(attrs.evolve(SF, file_size=1), s))  # durable = 1 (file 1 ends there)
    logs = sorted(t.log for t in a.master_machine_crash(SF, s))
    assert logs == sorted([(1,), (1, 2), (1, TORN)])
    recovered = {one(a.recover(SF, t)).log for t in a.master_machine_crash(SF, s)}
    assert recovered == {(1,), (1, 2)}


def test_process_crash_loses_only_the_write_buffer():
    cfg = attrs.evolve(SF, transient_store_pool=True)
    s = one(a.commit(cfg, puts(cfg, 1)))
    s = puts(cfg, 1, s)  # second record only in the write buffer
    t = one(a.master_process_crash(cfg, s))
    assert t.log == (1,) and all(r.status == "CLIENT_TIMEOUT" for r in t.reqs)


def test_handshake_refuses_a_replica_holding_records_of_an_earlier_incarnation():
    cfg = attrs.evolve(SM, transient_store_pool=False, replicas=("r1",), ack_policy="ANY_REPLICA_MAX")
    s = puts(cfg, 2)
    s = one(a.replica_connect(cfg, s, 0))
    s = one(a.transfer(cfg, one(a.transfer(cfg, s, 0)), 0))
    crashed = [t for t in a.master_machine_crash(cfg, s) if t.log == ()]
    s = one(a.recover(cfg, crashed[0]))
    s = puts(cfg, 2, s)
    assert s.rlog[0] == (1, 2) and s.log == (3, 4)
    assert a.replica_connect(cfg, s, 0) == []
    buggy = attrs.evolve(cfg, bugs={"BugHandshakeOffsetOnly"})
    assert one(a.replica_connect(buggy, s, 0)).connected == (True,)


def test_successors_respect_the_bounds():
    s = a.initial_state(SF)
    labels = [lab for lab, _ in a.successors(SF, Bounds(max_puts=0, max_master_process_crashes=0,
                                                        max_master_machine_crashes=0, max_replica_crashes=0,
                                                        max_fsync_failures=0), s)]
    assert "Put" not in labels and "MasterMachineCrash" not in labels
    assert a.initial_state(SF).mstate == UP


def test_successors_of_named_actions_are_the_filtered_successors():
    """``only`` (what the spec state machine asks for) gives exactly the pairs of those
    actions, in the same order, as filtering all of them, along random walks of both configs."""
    import random

    bounds = Bounds(max_puts=6, max_master_process_crashes=2, max_master_machine_crashes=2, max_replica_crashes=2,
                    max_replica_disconnects=2, max_fsync_failures=1, max_write_failures=1, max_forged_reports=1)
    rng = random.Random(7)
    names = {"Put", "Commit", "Flush", "FlushFail", "WriteFail", "Respond", "Timeout", "MasterProcessCrash",
             "MasterMachineCrash", "Recover", "ReplicaConnect", "Transfer", "ReplicaAck", "ForgedAck",
             "ReplicaDisconnect", "ReplicaCrash", "ReplicaRestart"}
    seen = set()
    for cfg in (SF, SM):
        s = a.initial_state(cfg)
        for _ in range(300):
            every = list(a.successors(cfg, bounds, s))
            for only in [frozenset({n}) for n in names] + [frozenset({"Respond", "Timeout", "Transfer"})]:
                assert list(a.successors(cfg, bounds, s, only)) == [
                    (lab, t) for lab, t in every if lab.split("(")[0] in only]
            seen |= {lab.split("(")[0] for lab, _ in every}
            s = rng.choice(every)[1] if every else a.initial_state(cfg)
    assert seen == names      # every action had successors somewhere on the walks


def test_type_ok_bites_on_a_malformed_state():
    s = a.initial_state(SF)
    assert type_ok(SF, s)
    assert not type_ok(SF, attrs.evolve(s, mstate="ASLEEP"))
    assert not type_ok(SF, attrs.evolve(s, log=(-1,)))
    assert set(INVARIANTS) >= {"TypeOK", "NoAckBeforeFlush", "AckedSurvivesCrash"}


def test_a_crash_aborts_the_same_requests_given_the_waiting_ones_as_candidates():
    """abort_waiting reads only ``candidates`` when told where the waiting requests are (the
    refinement checker knows): same successor as the scan of every request."""
    cfg = Config(replicas=("r1",), flush_mode="SYNC_FLUSH", repl_mode="ASYNC_MASTER", file_size=8)
    s = a.initial_state(cfg)
    for _ in range(4):
        s = a.put(cfg, s)[0]
    flushes = a.flush_to(cfg, s, 2)
    s = a.respond(cfg, flushes, 1)[0] if flushes and a.respond(cfg, flushes, 1) else s
    waiting = {i for i, r in enumerate(s.reqs, start=1) if r.status == "WAITING"}
    assert waiting and len(waiting) < len(s.reqs)      # one answered, the others waiting
    whole = a.master_process_crash(cfg, s)
    assert a.master_process_crash(cfg, s, waiting | {1}) == whole
    assert a.abort_waiting(cfg, s, waiting) == a.abort_waiting(cfg, s)
    assert all(r.status != "WAITING" for r in whole[0].reqs)
