"""The master core's services, driven by hand (no runtime): group commit,
the transient-pool commit, the ordered transfer queue, deadlines, statuses."""

import attrs
import pytest

from reference import effects as fx
from reference.commitlog import CommitLog
from reference.config import StoreConfig
from reference.decisions import INF
from reference.master import MasterCore
from reference.replica import ReplicaCore
from reference.status import PutStatus as S

BASE = StoreConfig(mapped_file_size_commit_log=256, max_message_size=100, os_page_size=64)


class Driver:
    """A runtime by hand: page-cache writes succeed unless ``fail_writes`` says how the
    next ones go (None: fine; (kind, bytes written): failed); HA connections get ids 1, 2, ..."""

    def __init__(self, cfg: StoreConfig, replicas=("r1",)):
        self.core = MasterCore(cfg, replicas, 0, log=CommitLog(cfg.mapped_file_size_commit_log,
                                                                cfg.transient_store_pool_enable, ghost=True))
        self.files: dict[int, bytearray] = {}      # the page cache the writes landed in (ReadSegment)
        self.now = 0
        self.fsyncs: list[fx.Fsync] = []
        self.answers: dict[int, list[S]] = {}
        self.finals: dict[int, list[bool]] = {}      # Respond.final: the runtime forgets the route after it
        self.offsets: dict[int, list[int]] = {}      # Respond.next_offset (0 for a put never appended)
        self.sent: list[fx.SendData] = []
        self.closed: list[fx.CloseReplica] = []
        self.writes: list[fx.WriteData] = []
        self.fail_writes: list[tuple[str, int]] = []
        self.conn_of: dict[str, int] = {}
        self.next_id = 1
        self.fail_reads = False                       # segment reads back fail (EIO)
        self.held_reads: list[int] | None = None      # a list: ReadSegment starts wait there, unperformed

    def run(self):
        pending = self.core.take_effects()
        while pending:
            e = pending.pop(0)
            if isinstance(e, fx.WriteData):
                self.writes.append(e)
                fault = self.fail_writes.pop(0) if self.fail_writes else None
                written = len(e.data) if fault is None else fault[1]
                seg = self.files.setdefault(e.start, bytearray(self.core.log.segment_size))
                seg[e.position: e.position + written] = e.data[:written]
                if fault is not None:
                    self.core.write_failed(e.start, e.position, len(e.data), fault[1], self.now)
                else:
                    self.core.write_done(e.start, e.position, len(e.data), self.now)
                pending += self.core.take_effects()
            elif isinstance(e, fx.ReadSegment):
                if self.held_reads is not None:
                    self.held_reads.append(e.start)
                elif self.fail_reads:
                    self.core.segment_read_failed(e.start, f"segment {e.start}: EIO", self.now)
                else:
                    self.core.segment_read(e.start, bytes(self.files[e.start]), self.now)
                pending += self.core.take_effects()
            elif isinstance(e, fx.Fsync):
                self.fsyncs.append(e)
            elif isinstance(e, fx.Respond):
                self.answers.setdefault(e.req_id, []).append(S(e.status))
                self.finals.setdefault(e.req_id, []).append(e.final)
                self.offsets.setdefault(e.req_id, []).append(e.next_offset)
            elif isinstance(e, fx.SendData):
                self.sent.append(e)
            elif isinstance(e, fx.CloseReplica):
                self.closed.append(e)

    def put(self, size=40):
        rid = self.next_id
        self.next_id += 1
        self.core.put(rid, rid, b"m" * size, self.now)
        self.run()
        return rid

    def tick(self, advance=0):
        self.now += advance
        self.core.tick(self.now)
        self.run()

    def complete_fsync(self, ok=True):
        e = self.fsyncs.pop(0)
        (self.core.fsync_done if ok else self.core.fsync_failed)(e.start, e.upto, self.now)
        self.run()
        return e

    def status(self, rid):
        return self.answers.get(rid, [None])[-1]


def sync_flush(**kw):
    return attrs.evolve(BASE, flush_disk_type="SYNC_FLUSH", **kw)


def pooled(**kw):
    """The transient store pool on, its commit woken only by its interval (not by each put)."""
    return attrs.evolve(BASE, transient_store_pool_enable=True, wake_commit_when_put_message=False, **kw)


def test_one_fsync_releases_every_request_it_covers():
    d = Driver(sync_flush())
    ids = [d.put() for _ in range(3)]
    d.tick()                                     # group commit round: swap, one fsync
    assert len(d.fsyncs) == 1 and d.core.requests_read and not d.core.requests_write
    d.complete_fsync()
    assert [d.status(i) for i in ids] == [S.PUT_OK] * 3


def test_requests_put_during_an_fsync_wait_for_the_next_round():
    d = Driver(sync_flush())
    first = d.put()
    d.tick()
    second = d.put()                              # lands in requests_write while the fsync runs
    d.complete_fsync()
    assert d.status(first) is S.PUT_OK and d.status(second) is None
    d.tick()
    d.complete_fsync()
    assert d.status(second) is S.PUT_OK


def test_a_message_that_rolled_into_the_next_segment_is_flushed_with_the_padding():
    d = Driver(sync_flush())
    ids = [d.put(size=100) for _ in range(3)]     # 120-byte records: the third rolls to segment 256
    d.tick()
    e = d.fsyncs[0]
    assert e.start == 0 and e.upto == 256         # first pass stops at the end of segment 0
    d.complete_fsync()
    assert [d.status(i) for i in ids] == [S.PUT_OK, S.PUT_OK, None]
    assert d.fsyncs and d.fsyncs[0].upto > 256    # the second pass is issued at once
    d.complete_fsync()
    assert d.status(ids[2]) is S.PUT_OK


def test_flush_deadline_and_a_failed_fsync():
    d = Driver(sync_flush(sync_flush_timeout_ms=50))
    rid = d.put()
    d.tick()
    d.complete_fsync(ok=False)                    # EIO: never PUT_OK on it (RocketMQ #9713)
    assert d.status(rid) is None and not d.core.writable
    d.tick(advance=60)
    assert d.status(rid) is S.FLUSH_DISK_TIMEOUT
    assert d.status(d.put()) is S.SERVICE_NOT_AVAILABLE


def test_message_illegal_writes_nothing():
    d = Driver(sync_flush())
    for body in (b"", b"x" * 101):
        d.core.put(9, 9, body, 0)
        d.run()
        assert d.answers.pop(9) == [S.MESSAGE_ILLEGAL]
    assert d.core.log.wrote == 0


def connect(d: Driver, name: str, core: ReplicaCore | None = None):
    core = core or ReplicaCore(name, d.core.cfg.mapped_file_size_commit_log)
    core.connect()
    hs = next(e for e in core.take_effects() if isinstance(e, fx.SendHandshake))
    d.conn_of[name] = conn = len(d.conn_of) + 1
    d.core.replica_handshake(conn, name, hs.offset, hs.chain, d.now, hs.records)
    d.run()
    return core


def deliver(d: Driver, name: str, core: ReplicaCore):
    """Hand the master's DATA frames to the slave and its acks back."""
    conn = d.conn_of[name]
    for e in [e for e in d.sent if e.conn == conn]:
        d.sent.remove(e)
        core.on_data(e.offset, e.data)
        for a in core.take_effects():
            if isinstance(a, fx.SendAck):
                d.core.replica_ack(conn, a.offset, d.now, a.records)
                d.run()


def sync_master(**kw):
    return attrs.evolve(BASE, broker_role="SYNC_MASTER", **kw)


def test_sync_master_no_slave_is_slave_not_available_at_once():
    d = Driver(sync_master())
    assert d.status(d.put()) is S.SLAVE_NOT_AVAILABLE


def test_decoupled_acks_complete_in_offset_order_in_one_sweep():
    d = Driver(sync_master(slave_timeout_ms=100))
    r1 = connect(d, "r1")
    ids = [d.put() for _ in range(4)]
    assert all(d.status(i) is None for i in ids)
    d.tick()
    deliver(d, "r1", r1)
    assert [d.status(i) for i in ids] == [S.PUT_OK] * 4
    assert list(r1.index.keys) == ids


def test_fast_path_and_slave_deadline():
    d = Driver(sync_master(slave_timeout_ms=30))
    r1 = connect(d, "r1")
    rid = d.put()
    d.tick(advance=31)                            # the slave never got it: deadline passes
    assert d.status(rid) is S.FLUSH_SLAVE_TIMEOUT
    deliver(d, "r1", r1)
    assert d.status(rid) is S.FLUSH_SLAVE_TIMEOUT  # first completion wins


@pytest.mark.parametrize("policy, k, acking, expect", [
    ("ANY_REPLICA_MAX", 2, ["r2"], S.PUT_OK),
    ("AT_LEAST_K", 3, ["r1"], None),
    ("AT_LEAST_K", 3, ["r1", "r3"], S.PUT_OK),
    ("ALL_IN_SYNC", 2, ["r1", "r2"], None),
    ("ALL_IN_SYNC", 2, ["r1", "r2", "r3"], S.PUT_OK),
])
def test_ack_policies(policy, k, acking, expect):
    d = Driver(sync_master(ack_policy=policy, in_sync_replicas=k), replicas=("r1", "r2", "r3"))
    slaves = {n: connect(d, n) for n in ("r1", "r2", "r3")}
    rid = d.put()
    d.tick()
    for name in acking:
        deliver(d, name, slaves[name])
    assert d.status(rid) is expect


def test_at_least_k_rejects_before_the_append_when_too_few_slaves():
    d = Driver(sync_master(ack_policy="AT_LEAST_K", in_sync_replicas=3), replicas=("r1", "r2"))
    connect(d, "r1")
    d.core.put(1, 1, b"x", 0)
    d.run()
    assert d.answers[1] == [S.IN_SYNC_REPLICAS_NOT_ENOUGH] and d.core.log.wrote == 0


def test_replica_failure_overrides_flush_failure():
    d = Driver(attrs.evolve(BASE, flush_disk_type="SYNC_FLUSH", broker_role="SYNC_MASTER",
                            sync_flush_timeout_ms=20, slave_timeout_ms=500))
    connect(d, "r1")
    rid = d.put()
    d.tick(advance=21)                            # flush deadline; the replica leg is pending too
    assert d.status(rid) is S.FLUSH_SLAVE_TIMEOUT


def test_blocking_mode_registers_the_replica_leg_after_the_flush():
    d = Driver(attrs.evolve(BASE, flush_disk_type="SYNC_FLUSH", broker_role="SYNC_MASTER", ack_mode="BLOCKING"))
    rid = d.put()
    assert d.status(rid) is None and not d.core.repl_deadlines   # no slave check yet
    d.tick()
    d.complete_fsync()
    assert d.status(rid) is S.SLAVE_NOT_AVAILABLE              # now handleHA runs: no slave


def test_transient_pool_commit_least_pages_and_replication_reads_committed_only():
    d = Driver(attrs.evolve(BASE, broker_role="SYNC_MASTER", transient_store_pool_enable=True,
                            commit_commit_log_least_pages=4, commit_interval_commit_log_ms=200,
                            commit_commit_log_thorough_interval_ms=200, wake_commit_when_put_message=True))
    connect(d, "r1")
    rid = d.put(size=10)
    d.tick()
    assert d.core.log.committed == 0 and not d.sent   # 30 bytes < 4 pages of 64: wait
    d.tick(advance=200)                                # the thorough interval commits anyway
    assert d.core.log.committed == d.core.log.wrote and d.sent
    assert d.status(rid) is None


def test_handshake_refuses_a_slave_with_records_of_an_earlier_incarnation():
    cfg = sync_master()
    d = Driver(cfg)
    r1 = connect(d, "r1")
    d.put()
    d.put()
    d.tick()
    deliver(d, "r1", r1)
    fresh = Driver(cfg)                                # the master lost everything (power loss)
    fresh.put(size=55)                                 # different records at the same offsets
    fresh.put(size=60)
    r1.disconnected()
    connect(fresh, "r1", r1)
    assert fresh.closed and "differs" in fresh.closed[0].reason
    assert "r1" not in fresh.core.conns


def test_an_ack_beyond_the_log_closes_the_connection():
    d = Driver(sync_master())
    connect(d, "r1")
    d.core.replica_ack(d.conn_of["r1"], 10_000, 0, 3)
    d.run()
    assert "beyond" in d.closed[0].reason and "r1" not in d.core.conns


def test_recovered_log_keeps_its_chain():
    d = Driver(sync_flush())
    for _ in range(9):
        d.put(size=70)
    from reference.record import scan_log
    segs = {s: bytes(b) for s, b in d.files.items()}
    scan = scan_log(list(segs), segs.__getitem__, 256)
    again = CommitLog.recovered(256, False, scan)
    ghost = d.core.log.ghost
    assert again.wrote == d.core.log.wrote and again.index.count == ghost.count == 9
    assert again.base == d.core.log.wrote - d.core.log.wrote % 256       # only the last segment in memory
    for offset in [0, *again.index.checkpoints, *ghost.ends]:
        if offset >= again.base:
            assert again.index.chain_at(offset) == ghost.chain_at(offset), offset
        elif offset in again.index.checkpoints:
            assert again.index.checkpoints[offset].chain == ghost.chain_at(offset), offset


# --- issue 36: survivors of `ackorder mutate --ack-deciding`, each a case no test asked about

def test_consumers_read_up_to_the_largest_put_ok_and_never_a_timed_out_record():
    """readable_end is min(the largest nextOffset answered PUT_OK, committed): a record whose
    request timed out is not readable for that, however far the log goes."""
    d = Driver(BASE, replicas=())                   # ASYNC_FLUSH, ASYNC_MASTER: PUT_OK at the append
    ok = d.put()
    assert d.status(ok) is S.PUT_OK and d.core.readable_end() == d.core.log.committed > 0
    first_end = d.core.readable_end()
    d2 = Driver(sync_master(slave_timeout_ms=50))
    connect(d2, "r1")                               # connected, never acks
    late = d2.put()
    d2.tick(advance=60)
    assert d2.status(late) is S.FLUSH_SLAVE_TIMEOUT and d2.core.log.committed > 0
    assert d2.core.readable_end() == 0
    assert first_end == d.core.log.committed


@pytest.mark.parametrize("flush_ms, slave_ms, advance_ms", [(200, 50, 60), (20, 500, 21)],
                         ids=["replica deadline first", "flush deadline first"])
def test_bug_flush_timeout_hides_slave_timeout_swaps_a_deadlines_status_too(flush_ms, slave_ms, advance_ms):
    """The switch's counterexample (no slave connected) swaps the fail-fast answer; with a slave
    connected that never acks and an fsync that never completes, whichever deadline passes first
    finds both legs pending: the correct answer is FLUSH_SLAVE_TIMEOUT (thenCombine: the replica
    failure wins), the switch's FLUSH_DISK_TIMEOUT."""
    for bugs, want in ((frozenset(), S.FLUSH_SLAVE_TIMEOUT),
                       (frozenset({"BugFlushTimeoutHidesSlaveTimeout"}), S.FLUSH_DISK_TIMEOUT)):
        d = Driver(sync_master(flush_disk_type="SYNC_FLUSH", slave_timeout_ms=slave_ms,
                               sync_flush_timeout_ms=flush_ms, bugs=bugs))
        connect(d, "r1")
        rid = d.put()
        d.tick()                                  # the fsync is issued and never completes
        d.tick(advance=advance_ms)                # the first deadline only
        assert d.status(rid) is want, (bugs, d.answers)
        assert d.answers == {rid: [want]}, bugs


@pytest.mark.parametrize("bugs", [frozenset(), frozenset({"BugDoubleResponse"})], ids=["correct", "double-response"])
def test_a_deadline_answers_only_a_request_whose_own_leg_is_still_pending(bugs):
    """The flush deadline passes over a request whose flush is done (it waits for its slave): no
    answer, under BugDoubleResponse too (its second answer is a PUT_OK's); the replica deadline
    passes over one whose slave acked (it waits for its fsync): no answer either."""
    d = Driver(sync_master(flush_disk_type="SYNC_FLUSH", slave_timeout_ms=200, sync_flush_timeout_ms=50, bugs=bugs))
    connect(d, "r1")                              # never acks
    rid, later = d.put(), d.put()                 # the fsync covers both: the frontier is past rid's end
    d.tick()
    d.complete_fsync()
    assert d.core.flush_frontier() > d.core.log.ghost.ends[0]
    d.tick(advance=60)                            # past the flush deadlines, the fsync long done
    assert d.status(rid) is None and d.status(later) is None, d.answers
    d.tick(advance=200)
    assert d.answers[rid] == [S.FLUSH_SLAVE_TIMEOUT]

    d = Driver(sync_master(flush_disk_type="SYNC_FLUSH", slave_timeout_ms=50, sync_flush_timeout_ms=200))
    r1 = connect(d, "r1")
    rid, later = d.put(), d.put()
    d.tick()                                      # the fsync is issued
    deliver(d, "r1", r1)                          # and the slave acks both: coverage past rid's end
    d.tick(advance=60)                            # past the replica deadlines, the acks long in
    assert d.status(rid) is None and d.status(later) is None, d.answers
    d.complete_fsync()
    assert d.answers[rid] == [S.PUT_OK] and d.answers[later] == [S.PUT_OK]


def test_bug_flush_one_file_releases_all_releases_at_the_fsync_that_moved_records():
    """At the first pass of a flush across a segment roll (records moved), the switch releases
    everything committed; the correct code only what the pass covered."""
    for bugs, third in ((frozenset(), None), (frozenset({"BugFlushOneFileReleasesAll"}), S.PUT_OK)):
        d = Driver(sync_flush(bugs=bugs))
        ids = [d.put(size=100) for _ in range(3)]  # the third rolls to segment 256
        d.tick()
        d.complete_fsync()                        # the first pass: up to 256
        assert [d.status(i) for i in ids[:2]] == [S.PUT_OK, S.PUT_OK]
        assert d.status(ids[2]) is third, bugs

def three_acked():
    """A SYNC_MASTER core whose one slave holds and acked three records."""
    d = Driver(sync_master(slave_timeout_ms=1_000))
    r1 = connect(d, "r1")
    for _ in range(3):
        d.put()
    d.tick()
    deliver(d, "r1", r1)
    return d, r1


@pytest.mark.parametrize("shape", ["more records", "fewer records", "moved on, same records",
                                   "moved back, same records"])
def test_a_report_like_the_last_but_in_one_field_drops_the_connection(shape):
    """Only a report equal to the last (a heartbeat) is taken without its checks; one that differs
    from it in its offset or its record count alone is mangled: the master drops that connection."""
    d, r1 = three_acked()
    hc = d.core.conns["r1"]
    ends = d.core.log.ghost.ends
    assert hc.ack_records == 3 and hc.ack_offset == ends[2]
    offset, records = {"more records": (ends[2], 4), "fewer records": (ends[2], 2),
                       "moved on, same records": (ends[2] + 1, 3),
                       "moved back, same records": (ends[1], 3)}[shape]
    d.core.replica_ack(d.conn_of["r1"], offset, d.now, records)
    d.run()
    assert "r1" not in d.core.conns and [c.conn for c in d.closed] == [d.conn_of["r1"]]
    # claiming more records than are committed (or an offset past the log, which claims one more) is
    # the spec's TakeReport refusal; claiming as many or fewer, at the wrong offset, is a mangled
    # report the spec drops (ReplicaDisconnect)
    beyond = shape in ("more records", "moved on, same records")
    step = ("ReplicaAck", "r1", 4) if beyond else ("ReplicaDisconnect", "r1")
    assert d.core.spec_steps[-1] == step, d.core.spec_steps[-3:]
    assert not d.core._parked, "a refused report waits for nothing: the connection is gone"
    # a heartbeat, and a late report that is true, are taken and change nothing
    d, r1 = three_acked()
    for offset, records in ((ends[2], 3), (ends[1], 2)):
        d.core.replica_ack(d.conn_of["r1"], offset, d.now, records)
        d.run()
        assert d.core.conns["r1"].ack_offset == ends[2] and not d.closed


def test_the_confirm_view_holds_at_most_max_slaves_and_its_committed_part():
    from reference.failover.roles import MAX_SLAVES

    d = Driver(sync_master())
    d.core.begin_epoch(((1, 0),), 0)
    names = frozenset(f"s{k}" for k in range(MAX_SLAVES))
    d.core.set_confirm_view(names, names, 0)
    with pytest.raises(AssertionError):
        d.core.set_confirm_view(frozenset(), names | {"one-more"}, 0)
    with pytest.raises(AssertionError):
        d.core.set_confirm_view(frozenset({"s0"}), frozenset({"s1"}), 0)


@pytest.mark.parametrize("bugs", [frozenset(), frozenset({"BugDoubleResponse"})], ids=["correct", "double-response"])
def test_every_answer_is_final_but_the_first_of_a_double_response(bugs):
    """Respond.final tells the runtime to forget the producer's route: every answer is the last one,
    except, under BugDoubleResponse, a PUT_OK whose flush deadline is still to pass."""
    d = Driver(sync_master(flush_disk_type="SYNC_FLUSH", slave_timeout_ms=100, sync_flush_timeout_ms=100,
                           bugs=bugs))
    r1 = connect(d, "r1")
    ok = d.put()
    d.tick()
    deliver(d, "r1", r1)
    d.complete_fsync()
    late = d.put()                                # never flushed, never acked: a timeout
    d.tick(advance=150)
    assert d.answers[ok][0] is S.PUT_OK and d.answers[late] == [S.FLUSH_SLAVE_TIMEOUT]
    if bugs:
        assert d.finals[ok] == [False, True] and d.finals[late] == [True]
    else:
        assert d.finals == {ok: [True], late: [True]}


@pytest.mark.parametrize("policy", ["AT_LEAST_K", "ALL_IN_SYNC"])
def test_only_any_replica_max_fails_fast_on_a_slave_too_far_behind(policy):
    """4.x's isSlaveOK (SLAVE_NOT_AVAILABLE at once when its slave is too far behind) is
    ANY_REPLICA_MAX's; AT_LEAST_K and ALL_IN_SYNC wait for their slaves until the deadline."""
    d = Driver(sync_master(ack_policy=policy, ha_max_gap_not_in_sync=1, slave_timeout_ms=100))
    r1 = connect(d, "r1")
    d.put()
    d.tick()
    deliver(d, "r1", r1)
    rid = d.put()                                 # the slave is a whole record behind: past the gap
    assert d.status(rid) is None, d.answers
    d.tick(advance=150)
    assert d.status(rid) is S.FLUSH_SLAVE_TIMEOUT


def test_any_replica_max_fails_fast_only_past_the_gap_not_in_sync():
    """isSlaveOK: nextOffset - push2SlaveMaxOffset > haMaxGapNotInSync; at the gap exactly it waits."""
    probe = Driver(sync_master())
    r = connect(probe, "r1")
    probe.put()
    probe.tick()
    deliver(probe, "r1", r)
    first_end = probe.core.push2SlaveMaxOffset
    probe.put()
    gap = probe.core.log.wrote - first_end          # the second record, past what the slave acked
    assert first_end > 0 and gap > 0
    for max_gap, waits in ((gap, True), (gap - 1, False)):
        d = Driver(sync_master(ha_max_gap_not_in_sync=max_gap, slave_timeout_ms=1_000))
        r1 = connect(d, "r1")
        d.put()
        d.tick()
        deliver(d, "r1", r1)
        rid = d.put()
        assert (d.status(rid) is None) == waits, (max_gap, d.answers)
        if not waits:
            assert d.status(rid) is S.SLAVE_NOT_AVAILABLE



def test_after_a_heartbeat_a_late_report_or_a_refused_connection_nothing_waits_for_a_segment_read():
    """A report the master has handled says so (True): only one that needs a segment read back waits
    (parked) with every later frame of its connection behind it."""
    d, r1 = three_acked()
    conn, ends = d.conn_of["r1"], d.core.log.ghost.ends
    d.core.replica_ack(conn, ends[2], d.now, 3)                   # a heartbeat
    d.core.replica_ack(conn, ends[1], d.now, 2)                   # a late report, true
    d.run()
    assert not d.core._parked, d.core._parked
    fourth = d.put()
    d.tick()
    deliver(d, "r1", r1)                                          # the next report is taken at once
    assert d.core.conns["r1"].ack_records == 4 and d.status(fourth) is S.PUT_OK
    d.core.replica_ack(99, 10, d.now, 1)                          # an ACK on no accepted connection
    d.run()
    assert d.closed and not d.core._parked


def test_bug_flush_timeout_hides_slave_timeout_swaps_only_while_the_flush_is_pending():
    """The switch turns a replica failure into FLUSH_DISK_TIMEOUT only while the request's own fsync
    is pending: a record that is flushed (at the fsync's end, or below it) keeps its replica status,
    at isSlaveOK's fail-fast (BLOCKING: the leg joins after the fsync) and at the replica deadline."""
    bug = frozenset({"BugFlushTimeoutHidesSlaveTimeout"})
    d = Driver(sync_master(flush_disk_type="SYNC_FLUSH", ack_mode="BLOCKING", bugs=bug))
    first, last = d.put(), d.put()                 # no slave; one fsync covers both
    d.tick()
    d.complete_fsync()
    assert d.core.flush_frontier() == d.core.log.ghost.ends[1] > d.core.log.ghost.ends[0]
    assert d.answers == {first: [S.SLAVE_NOT_AVAILABLE], last: [S.SLAVE_NOT_AVAILABLE]}

    d = Driver(sync_master(flush_disk_type="SYNC_FLUSH", slave_timeout_ms=50, sync_flush_timeout_ms=500, bugs=bug))
    connect(d, "r1")                              # connected, never acks
    first, last = d.put(), d.put()
    d.tick()
    d.complete_fsync()
    d.tick(advance=60)                            # the replica deadlines, the fsync done
    assert d.answers == {first: [S.FLUSH_SLAVE_TIMEOUT], last: [S.FLUSH_SLAVE_TIMEOUT]}


def test_bug_double_response_answers_again_only_while_the_flush_deadline_is_queued():
    """A PUT_OK given after its flush deadline passed (the fsync was done, the slave late) is final:
    the deadline that would answer again is gone."""
    d = Driver(sync_master(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=50, slave_timeout_ms=500,
                           bugs=frozenset({"BugDoubleResponse"})))
    r1 = connect(d, "r1")
    rid = d.put()
    d.tick()
    d.complete_fsync()
    d.tick(advance=60)                            # the flush deadline passes over a flushed record
    assert d.status(rid) is None
    deliver(d, "r1", r1)
    d.tick(advance=600)
    assert d.answers[rid] == [S.PUT_OK] and d.finals[rid] == [True]


def test_double_response_second_answer_names_the_legs_pending_then():
    """BugDoubleResponse's second answer is the deadline's status for what is pending when the flush
    deadline passes. The record was flushed (it had a PUT_OK), so with BugFlushTimeoutHidesSlaveTimeout
    on as well, once its slave has gone, it is SLAVE_NOT_AVAILABLE, never the swapped FLUSH_DISK_TIMEOUT."""
    # AT_LEAST_K counts the connected slaves' acks: the coverage falls when the slave goes
    d = Driver(sync_master(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=50, slave_timeout_ms=500,
                           ack_policy="AT_LEAST_K", in_sync_replicas=2,
                           bugs=frozenset({"BugDoubleResponse", "BugFlushTimeoutHidesSlaveTimeout"})))
    r1 = connect(d, "r1")
    rid = d.put()
    d.tick()
    deliver(d, "r1", r1)
    d.complete_fsync()
    assert d.answers[rid] == [S.PUT_OK]
    d.core.replica_disconnected(d.conn_of["r1"])
    d.tick(advance=60)
    assert d.answers[rid] == [S.PUT_OK, S.SLAVE_NOT_AVAILABLE]


def perform_in_runs(d: Driver, fault_at: int | None = None) -> list[list[fx.WriteData]]:
    """The real runtime's way (reference/real/master_server.py ``_perform``): every WriteData of one
    turn, in runs of contiguous writes to one segment, each one pwritev; the first run fails after
    ``fault_at`` bytes.  A run the core cancels is not written.  Returns the runs performed."""
    effects = d.core.take_effects()
    writes = [e for e in effects if isinstance(e, fx.WriteData)]
    runs: list[list[fx.WriteData]] = []
    for e in writes:
        if runs and runs[-1][-1].start == e.start and runs[-1][-1].end == e.offset:
            runs[-1].append(e)
        else:
            runs.append([e])
    performed = []
    for k, run in enumerate(runs):
        first = run[0]
        if d.core.write_cancelled(first.start, first.position, len(first.data)):
            for e in run:
                d.core.write_failed(e.start, e.position, len(e.data), 0, d.now)
            continue
        performed.append(run)
        written = sum(len(e.data) for e in run) if (k or fault_at is None) else fault_at
        for e in run:
            seg = d.files.setdefault(e.start, bytearray(d.core.log.segment_size))
            n = min(written, len(e.data))
            seg[e.position: e.position + n] = e.data[:n]
            if n == len(e.data):
                d.core.write_done(e.start, e.position, len(e.data), d.now)
            else:
                d.core.write_failed(e.start, e.position, len(e.data), n, d.now)
            written -= n
    for e in effects:
        if isinstance(e, fx.Respond):
            d.answers.setdefault(e.req_id, []).append(S(e.status))
    d.run()
    return performed


def test_writes_issued_before_a_failed_one_are_cancelled_and_never_reach_the_page_cache():
    """Four puts of one loop turn: A and B fill segment 0, C rolls into segment 256 (the blank
    before it ends the first run), D follows C.  The first run fails inside B: B is answered
    UNKNOWN_ERROR (its record never counted), C and D SERVICE_NOT_AVAILABLE and forgotten.  The
    second run, C's and D's records, was issued before the failure: the core cancels it, so no
    restart finds a record whose producer was told it is not stored."""
    d = Driver(BASE, replicas=())                  # ASYNC_FLUSH, ASYNC_MASTER: PUT_OK once written
    ids = list(range(1, 5))
    for rid, size in zip(ids, (100, 100, 100, 40)):
        d.core.put(rid, rid, b"m" * size, d.now)
    performed = perform_in_runs(d, fault_at=130)
    assert [[(e.offset, e.end) for e in run] for run in performed] == [[(0, 120), (120, 240), (240, 256)]]
    assert [d.status(i) for i in ids] == [S.PUT_OK, S.UNKNOWN_ERROR, S.SERVICE_NOT_AVAILABLE,
                                          S.SERVICE_NOT_AVAILABLE]
    assert 256 not in d.files and d.core.log.wrote == 240 and not d.core.writes
    # with nothing failing, nothing is cancelled
    d = Driver(BASE, replicas=())
    for rid, size in zip(ids, (100, 100, 100, 40)):
        d.core.put(rid, rid, b"m" * size, d.now)
    assert len(perform_in_runs(d)) == 2 and [d.status(i) for i in ids] == [S.PUT_OK] * 4


def test_flush_real_time_service_waits_for_its_least_pages_until_the_thorough_interval():
    """FlushRealTimeService (ASYNC_FLUSH): every flushIntervalCommitLog (500 ms) it flushes only if
    flushCommitLogLeastPages (4 pages) are dirty, and whatever is dirty once per
    flushCommitLogThoroughInterval (10 s)."""
    d = Driver(BASE, replicas=())                   # pages of 64 bytes: 4 pages are 256 bytes
    d.put()                                         # one 60-byte record
    d.tick(advance=500)
    assert not d.fsyncs
    d.tick(advance=9_499)                           # a round at 9,999 ms: not yet thorough
    assert not d.fsyncs
    d.tick(advance=1)                               # 10 s, but no round is due (the last at 9,999)
    assert not d.fsyncs
    d.tick(advance=499)                             # the next round, past 10 s: thorough
    assert [e.upto for e in d.fsyncs] == [60]
    d.complete_fsync()
    d.put()
    d.tick(advance=500)                             # 10 s are counted from that thorough flush
    assert not d.fsyncs


@pytest.mark.parametrize("wake", [True, False])
def test_a_put_wakes_the_real_time_flush_only_when_told(wake):
    """wakeFlushWhenPutMessage: a put under ASYNC_FLUSH wakes FlushRealTimeService at once."""
    d = Driver(attrs.evolve(BASE, wake_flush_when_put_message=wake, flush_commit_log_least_pages=0), replicas=())
    d.put()
    d.tick()
    assert bool(d.fsyncs) == wake
    d.tick(advance=500)
    assert d.fsyncs


@pytest.mark.parametrize("wake", [True, False])
def test_a_put_wakes_the_commit_service_only_when_told(wake):
    """wakeCommitWhenPutMessage (transient store pool): a put wakes CommitRealTimeService at once;
    else it commits at its 200 ms interval."""
    d = Driver(attrs.evolve(BASE, transient_store_pool_enable=True, wake_commit_when_put_message=wake,
                            commit_commit_log_least_pages=0), replicas=())
    d.put()
    d.tick()
    assert bool(d.writes) == wake
    d.tick(advance=200)
    assert d.writes


def test_housekeeping_closes_a_connection_that_never_greets_at_the_interval_and_not_before():
    d = Driver(sync_master(ha_housekeeping_interval_ms=1_000))
    d.now = 500
    d.core.replica_connection_opened(7, d.now)
    d.tick(advance=999)
    assert not d.closed
    d.tick(advance=2)                                # a tick past the interval, not on it
    assert [(c.conn, c.reason) for c in d.closed] == [(7, "no HANDSHAKE in 1001 ms")]


def test_housekeeping_drops_a_slave_only_while_data_it_was_sent_waits_for_its_ack():
    """Found by `ackorder mutate` (issue 36): the clock was the slave's last ack of something new,
    and an idle slave's heartbeats repeat its last report: after 20 s without puts, the first put's
    DATA went out and the same tick dropped the slave ("acknowledged nothing for 30000 ms").  The
    clock now starts when data goes in flight to a slave that had acknowledged everything."""
    d = Driver(sync_master(ha_housekeeping_interval_ms=1_000, slave_timeout_ms=50))
    r1 = connect(d, "r1")
    for _ in range(5):                               # nothing in flight: an idle slave stays,
        d.tick(advance=1_000)                        # reporting the same offset every second
        r1.heartbeat()
        for a in r1.take_effects():
            if isinstance(a, fx.SendAck):
                d.core.replica_ack(d.conn_of["r1"], a.offset, d.now, a.records)
                d.run()
    assert "r1" in d.core.conns and not d.closed
    d.put()
    d.tick()                                         # DATA sent, never acknowledged
    d.tick(advance=999)
    assert "r1" in d.core.conns
    d.tick(advance=2)                                # a tick past the interval, not on it
    assert "r1" not in d.core.conns
    assert d.closed[-1].reason == "slave r1 acknowledged nothing for 1001 ms with 60 bytes in flight"


def test_a_failed_segment_read_closes_only_the_connection_whose_stream_needs_it():
    """The segment a slave far behind needs cannot be read back (EIO): that slave's connection is
    closed (it reconnects and the read is tried again); a slave that keeps up is untouched.  No
    simulator or machine failed a segment read before issue 36's third session."""
    d = Driver(sync_flush(broker_role="SYNC_MASTER", slave_timeout_ms=60_000), replicas=("r1", "r2"))
    _grow(d, connect(d, "r2"), "r2", 12)            # about six segments, all flushed and acked by r2
    assert d.core.log.base > 0, "the master still holds its first segment: nothing to read back"
    d.fail_reads = True
    connect(d, "r1")                                  # from offset 0: its stream needs segment 0
    d.tick()
    assert [c.conn for c in d.closed] == [d.conn_of["r1"]] and "EIO" in d.closed[0].reason
    assert "r1" not in d.core.conns and "r2" in d.core.conns and not d.core._reads
    d.fail_reads = False
    r1 = connect(d, "r1")                             # again, and the read works
    for _ in range(20):
        d.tick()
        deliver(d, "r1", r1)
    assert r1.received_end == d.core.log.committed


def test_the_next_wakeup_is_the_earliest_service_or_deadline_due():
    """next_wakeup_ms is when the runtime must tick next: a later answer leaves a service or a
    deadline late by up to a second (the cap), which no answer checks but this test."""
    pool = Driver(pooled(flush_interval_commit_log_ms=5_000), replicas=())
    pool.put()
    assert pool.core.log.issued < pool.core.log.wrote and pool.core.next_wakeup_ms(0) == 200   # the commit interval
    flush = Driver(attrs.evolve(BASE, flush_interval_commit_log_ms=300), replicas=())
    flush.put()
    assert flush.core.next_wakeup_ms(0) == 300                                                # FlushRealTimeService
    idle = Driver(sync_master(ha_housekeeping_interval_ms=400))
    assert idle.core.next_wakeup_ms(0) == 1_000                                               # nothing due: the cap
    idle.core.replica_connection_opened(9, 0)
    assert idle.core.next_wakeup_ms(0) == 400                                                 # a greeting owed
    owed = Driver(sync_master(ha_housekeeping_interval_ms=400, slave_timeout_ms=60_000,
                              flush_interval_commit_log_ms=5_000))
    connect(owed, "r1")
    owed.now = 100
    owed.put()
    owed.tick()                                                                               # DATA in flight at 100
    assert owed.core.next_wakeup_ms(100) == 500                                               # an ack owed since 100


def test_push2_slave_max_offset_starts_at_zero_as_isslaveok_counts_from_it():
    """Before any slave reports, isSlaveOK measures a put's distance from offset 0."""
    for gap, waits in ((60, True), (59, False)):    # the first record ends at 60
        d = Driver(sync_master(ha_max_gap_not_in_sync=gap, slave_timeout_ms=1_000))
        connect(d, "r1")
        assert d.core.push2SlaveMaxOffset == 0
        rid = d.put()
        assert (d.status(rid) is None) == waits, (gap, d.answers)


def test_a_master_takes_up_to_64_slaves():
    d = Driver(sync_master())
    names = ("r1",) + tuple(f"s{k}" for k in range(63))
    d.core.change_sync_state_set(names, frozenset({"r1"}))
    assert len(d.core.replicas) == 64
    with pytest.raises(AssertionError, match="replicas unbounded"):
        d.core.change_sync_state_set(names + ("one-more",), frozenset({"r1"}))


def test_an_answer_for_a_record_never_appended_carries_no_offset():
    """MESSAGE_ILLEGAL, IN_SYNC_REPLICAS_NOT_ENOUGH and a read-only store's SERVICE_NOT_AVAILABLE
    name no offset (0): the record is in no log."""
    offsets = {}

    def answers(d):
        for e in d.core.take_effects():
            if isinstance(e, fx.Respond):
                offsets[S(e.status)] = e.next_offset
    d = Driver(sync_master(ack_policy="AT_LEAST_K", in_sync_replicas=3))
    d.core.put(1, 1, b"", 0)                                      # empty: MESSAGE_ILLEGAL
    d.core.put(2, 2, b"x", 0)                                     # one slave of the two needed
    answers(d)
    d = Driver(sync_flush(sync_flush_timeout_ms=50))
    d.put()
    d.tick()
    d.complete_fsync(ok=False)                                    # read-only from here
    d.core.put(9, 9, b"x", d.now)
    answers(d)
    assert offsets == {S.MESSAGE_ILLEGAL: 0, S.IN_SYNC_REPLICAS_NOT_ENOUGH: 0, S.SERVICE_NOT_AVAILABLE: 0}


@pytest.mark.parametrize("flush_ms, slave_ms", [(100, 1_000), (1_000, 100)], ids=["flush", "replica"])
def test_the_next_wakeup_is_the_earliest_deadline_not_the_latest(flush_ms, slave_ms):
    d = Driver(sync_master(slave_timeout_ms=slave_ms, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=flush_ms,
                           group_commit_interval_ms=5_000, ha_housekeeping_interval_ms=60_000))
    connect(d, "r1")
    d.put()
    d.tick()                                       # the fsync is issued and stays in flight
    d.now = 50
    d.put()
    assert d.core.next_wakeup_ms(60) == 100        # the first put's deadline, not the second's (150)


# --- issue 36: what the mutation campaign of master.py outside ACK_DECIDING showed no check pinned ---

def test_a_partly_failed_pool_commit_counts_its_whole_records_and_retries_from_there():
    """Transient store pool: a commit (one WriteData of three 60-byte records) fails after 130 bytes.
    The model's rule (write_failed, as for a short write without the pool): the two whole records
    in those bytes are committed (a Commit step), and the retry writes from 120.  RocketMQ's
    MappedFile.commit0 leaves committedPosition where it was and writes all 180 bytes again: the
    same bytes, so both are safe; the spec's Commit steps describe this one."""
    d = Driver(pooled(commit_commit_log_least_pages=0), replicas=())
    for rid in (1, 2, 3):
        d.core.put(rid, rid, b"m" * 40, d.now)
    d.run()
    d.fail_writes = [("EIO", 130)]
    d.tick(advance=200)                              # CommitRealTimeService's interval
    assert [(w.offset, w.end) for w in d.writes] == [(0, 180)]
    assert d.core.log.committed == 120 and ("Commit", 2) in d.core.spec_steps
    d.tick(advance=200)
    assert [(w.offset, w.end) for w in d.writes] == [(0, 180), (120, 180)] and d.core.log.committed == 180


def test_decoupled_sync_master_checks_its_slaves_once_at_the_put_not_again_at_the_fsync():
    """DECOUPLED (4.9's asyncPutMessage: submitFlushRequest and submitReplicaRequest side by side):
    isSlaveOK is asked once, when the put is appended, and the replica leg then waits for
    GroupTransferService.  A slave lost while the fsync runs fails the request at its slave deadline
    (with the status decisions.deadline_status gives), not at once when the fsync returns, as
    BLOCKING's handleHA-after-handleDiskFlush would."""
    d = Driver(sync_flush(broker_role="SYNC_MASTER", ack_mode="DECOUPLED", slave_timeout_ms=100,
                          sync_flush_timeout_ms=1_000))
    connect(d, "r1")
    rid = d.put()
    d.tick()                                         # the fsync is in flight
    d.core.replica_disconnected(d.conn_of["r1"])
    d.run()
    d.complete_fsync()
    assert d.status(rid) is None and len(d.core.repl_deadlines) == 1
    d.tick(advance=101)
    assert d.answers[rid] == [S.SLAVE_NOT_AVAILABLE]


def test_an_idle_group_commit_service_does_not_wake_the_runtime():
    """SYNC_FLUSH with nothing to flush and no request waiting: the next wake-up is the cap, not
    GroupCommitService's 10 ms interval (an idle broker would spin)."""
    d = Driver(sync_flush(), replicas=())
    assert d.core.next_wakeup_ms(0) == 1_000
    d.put()
    assert d.core.next_wakeup_ms(0) == 0             # a put wakes GroupCommitService at once


def test_a_greeting_owed_later_does_not_postpone_an_earlier_deadline():
    d = Driver(sync_flush(sync_flush_timeout_ms=100, group_commit_interval_ms=5_000,
                          ha_housekeeping_interval_ms=400), replicas=())
    d.put()
    d.tick()                                         # the fsync stays in flight: a flush deadline at 100
    d.core.replica_connection_opened(9, 0)           # a greeting owed at 400
    assert d.core.next_wakeup_ms(0) == 100


def test_housekeeping_drops_a_slave_that_keeps_being_sent_data_and_never_acknowledges():
    """New puts keep the stream going: that is no ack, and must not restart the slave's clock."""
    d = Driver(sync_master(ha_housekeeping_interval_ms=1_000, slave_timeout_ms=50))
    connect(d, "r1")
    for k in range(4):
        d.now = 300 * k                              # 0, 300, 600, 900: DATA each time, no ack
        d.put()
        d.tick()
    d.tick(advance=99)
    assert "r1" in d.core.conns
    d.tick(advance=2)
    assert "r1" not in d.core.conns
    assert d.closed[-1].reason.startswith("slave r1 acknowledged nothing for 1001 ms")


def _far_behind(replicas=("r1", "r2", "r3")) -> tuple[Driver, dict]:
    """A master 12 segments long that holds only its last in memory, r3 keeping up, and reads
    back held (``Driver.held_reads``) until the test performs or fails them."""
    d = Driver(sync_flush(broker_role="SYNC_MASTER", slave_timeout_ms=60_000, ha_housekeeping_interval_ms=600_000,
                          ha_send_window_bytes=256), replicas=replicas)
    r3 = connect(d, "r3")
    _grow(d, r3, "r3", 24)
    assert d.core.log.base > 1_536, d.core.log.base
    d.held_reads = []
    return d, {"r3": r3}


def _grow(d: Driver, slave: ReplicaCore, name: str, records: int) -> None:
    """``records`` puts of 120-byte records, each flushed and acknowledged by ``slave``."""
    for _ in range(records):
        d.put(size=100)
        d.tick()
        deliver(d, name, slave)
        if d.fsyncs:
            d.complete_fsync()
    d.tick()


def _perform_reads(d: Driver) -> None:
    while d.held_reads:
        start = d.held_reads.pop(0)
        d.core.segment_read(start, bytes(d.files[start]), d.now)
        d.run()


def test_a_failed_segment_read_drops_the_accepted_slave_whose_stream_needs_it_and_no_other():
    """r2 streams from segments read back and waits, window full, at 1,536 (a segment still in no
    cache).  r1's handshake from 0 waits for segment 0, evicted: that read fails and closes r1 only.
    Then r2's own read (1,536) fails: r2 is dropped as an accepted slave."""
    d, slaves = _far_behind()
    slaves["r2"] = r2 = connect(d, "r2")
    _perform_reads(d)
    for _ in range(5):
        deliver(d, "r2", r2)
        _perform_reads(d)
    hc = d.core.conns["r2"]
    assert (hc.ack_offset, hc.next_transfer) == (1_280, 1_536) and 0 not in d.core._old
    # r2 holds through 1,536 and says it holds through 1,400 (a whole record, in a segment still
    # cached: the report is checked at once, nothing parks), so its stream goes on from 1,536
    for e in [e for e in d.sent if e.conn == d.conn_of["r2"]]:
        r2.on_data(e.offset, e.data)
    r2.take_effects()
    assert r2.received_end == 1_536
    d.core.replica_ack(d.conn_of["r2"], 1_400, d.now, d.core._old[1_280][0].records_upto(1_400))
    d.run()
    assert d.held_reads == [1_536] and not d.core._parked
    connect(d, "r1")
    assert d.held_reads == [1_536, 0]
    d.held_reads.clear()
    d.core.segment_read_failed(0, "segment 0: EIO", d.now)     # while r2's read is under way
    d.run()
    assert [(c.conn, c.reason) for c in d.closed] == [(d.conn_of["r1"], "segment 0: EIO")]
    assert set(d.core.conns) == {"r2", "r3"} and d.core._reads == {1_536}
    d.core.segment_read_failed(1_536, "segment 1536: EIO", d.now)
    d.run()
    assert d.closed[-1].conn == d.conn_of["r2"] and set(d.core.conns) == {"r3"}


def test_frames_parked_behind_a_segment_read_run_in_their_order():
    """r1's HANDSHAKE waits for segment 0 to be read back, and its first ACK arrives behind it:
    once the read is in, the HANDSHAKE runs first (r1 accepted), then the ACK."""
    d, _ = _far_behind()
    conn = len(d.conn_of) + 1
    connect(d, "r1")
    assert d.held_reads == [0] and "r1" not in d.core.conns
    d.core.replica_ack(conn, 0, d.now, 0)
    _perform_reads(d)
    assert "r1" in d.core.conns and not d.closed and conn not in d.core._parked
    assert d.core.conns["r1"].next_transfer > 0 and d.core.conns["r1"].ack_offset == 0


def test_outside_failover_every_transfer_header_is_labelled_epoch_0_from_0():
    """No epoch entries: the header's label is (0, 0), as a 4.x slave expects (it reads none)."""
    d = Driver(sync_master())
    connect(d, "r1")
    d.put()
    d.put()
    d.tick()
    assert d.sent and {(e.epoch, e.epoch_start) for e in d.sent} == {(0, 0)}


@pytest.mark.parametrize("r1_acks", [False, True], ids=["r1-acks-nothing", "r1-acks-its-first-record"])
def test_a_slave_at_most_two_segments_behind_committed_keeps_its_segments_in_memory(r1_acks):
    """RETAINED_SEGMENTS_BEHIND: the master keeps the segments from a slave's ack on while it is within
    two segments of committed's; farther behind, it stops holding memory and is served by segment
    reads (which park its reports and can outlast a deadline: how much is kept is behaviour)."""
    d = Driver(sync_flush(broker_role="SYNC_MASTER", slave_timeout_ms=60_000, ha_housekeeping_interval_ms=600_000,
                          ha_send_window_bytes=120, ha_transfer_batch_size=120), replicas=("r1", "r2"))
    r1 = connect(d, "r1")                            # its ack stays at 0, or at 120 (inside segment 0)
    r2 = connect(d, "r2")
    bases = {}
    for k in range(9):                               # 120-byte records, two per 256-byte segment
        _grow(d, r2, "r2", 1)
        if r1_acks and k == 0:
            deliver(d, "r1", r1)
            assert d.core.conns["r1"].ack_offset == 120
        bases[d.core.log.segment_start(d.core.log.committed)] = d.core.log.base
    assert bases == {0: 0, 256: 0, 512: 0, 768: 768, 1024: 1024}


@pytest.mark.parametrize("replicas, cached", [(("r1",), 2), (("r1", "r2"), 3), (("r1", "r2", "r3"), 4)])
def test_the_cache_of_segments_read_back_holds_one_more_than_the_slaves_and_at_least_two(replicas, cached):
    """Each slave streaming from the files may need its own segment, and one more serves the next
    reader: a smaller cache reads the same segment again for every slave (each read parks a report)."""
    d = Driver(sync_flush(broker_role="SYNC_MASTER", slave_timeout_ms=60_000, ha_housekeeping_interval_ms=600_000,
                          ha_send_window_bytes=256), replicas=replicas)
    for _ in range(32):                              # no slave yet: the master forgets all but the last segment
        d.put(size=100)
        d.tick()
        if d.fsyncs:
            d.complete_fsync()
    d.tick()
    assert d.core.log.base >= 3_584
    d.held_reads = []
    r1 = connect(d, "r1")

    def stream(rounds: int) -> None:
        for _ in range(rounds):
            _perform_reads(d)
            deliver(d, "r1", r1)
    stream(8)
    assert len(d.core._old) == cached and max(d.core._old) >= 1_536, sorted(d.core._old)   # 7 or more read
    d.core.change_sync_state_set(replicas, frozenset(replicas[:1]))     # the same slaves: the same size
    stream(4)
    assert len(d.core._old) == cached and max(d.core._old) >= 2_304, sorted(d.core._old)
    if cached == 2:                                  # a SyncStateSet change that adds slaves grows it
        d.core.change_sync_state_set(("r1", "r2", "r3"), frozenset({"r1"}))
        stream(4)
        assert len(d.core._old) == 4, sorted(d.core._old)


def test_commit_real_time_service_rounds_are_counted_from_the_last_round_not_from_zero():
    """CommitRealTimeService (transient store pool): a round every commitIntervalCommitLog (200 ms)
    after the last one, whatever the clock reads."""
    d = Driver(pooled(commit_commit_log_least_pages=0), replicas=())
    d.now = 1_000
    d.put()
    d.tick()                                         # a round at 1,000 commits the record
    d.now = 1_100
    d.put()
    d.tick()                                         # 100 ms later: no round
    assert len(d.writes) == 1
    d.now = 1_200
    d.tick()
    assert len(d.writes) == 2


def test_commit_real_time_service_waits_for_its_least_pages_until_the_thorough_interval_since_the_last_commit():
    """commitCommitLogLeastPages (4 pages of 64 bytes) unless commitCommitLogThoroughInterval has
    passed since the last commit: 60 bytes written after a commit at 1,000 wait for 2,000."""
    d = Driver(pooled(commit_commit_log_least_pages=4, commit_commit_log_thorough_interval_ms=1_000), replicas=())
    for _ in range(3):
        d.put()                                      # 180 bytes: under 4 pages
    d.tick(advance=200)
    assert not d.writes
    d.now = 1_000
    d.tick()                                         # thorough: whatever is written
    assert [(w.offset, w.end) for w in d.writes] == [(0, 180)]
    d.put()                                          # [180, 240): the segment is not full
    d.now = 1_200
    d.tick()
    assert len(d.writes) == 1
    d.now = 2_100                                    # 1,100 ms after the last commit: thorough
    d.tick()
    assert [(w.offset, w.end) for w in d.writes] == [(0, 180), (180, 240)]


def test_flush_real_time_service_counts_only_the_dirty_bytes_above_the_flushed_offset():
    """flushCommitLogLeastPages counts committed - flushed: after segment 0 is flushed, 120 bytes in
    segment 256 are under 4 pages and wait."""
    d = Driver(BASE, replicas=())
    for _ in range(5):
        d.put()                                      # the fifth rolls into segment 256: segment 0 is full
    d.tick(advance=500)
    assert [e.upto for e in d.fsyncs] == [256]
    d.complete_fsync()
    d.put()                                          # [316, 376)
    d.tick(advance=500)
    assert not d.fsyncs and d.core.log.flushed == 256


def test_bug_any_replica_for_all_in_sync_changes_only_all_in_sync():
    """The switch reads ALL_IN_SYNC as ANY_REPLICA_MAX; a k-of-n policy stays k-of-n with it on."""
    d = Driver(sync_master(ack_policy="AT_LEAST_K", in_sync_replicas=3, slave_timeout_ms=60_000,
                           bugs=frozenset({"BugAnyReplicaForAllInSync"})), replicas=("r1", "r2"))
    r1 = connect(d, "r1")
    connect(d, "r2")
    rid = d.put()
    d.tick()
    deliver(d, "r1", r1)                             # one slave of the two the put needs
    d.tick()
    assert d.status(rid) is None


def test_housekeeping_names_the_bytes_in_flight_beyond_the_last_ack():
    d = Driver(sync_master(ha_housekeeping_interval_ms=1_000, slave_timeout_ms=50))
    r1 = connect(d, "r1")
    d.put()
    d.tick()
    deliver(d, "r1", r1)                             # acknowledges [0, 60)
    d.put()
    d.tick()
    d.tick(advance=1_001)
    assert d.closed[-1].reason == "slave r1 acknowledged nothing for 1001 ms with 60 bytes in flight"


def test_a_slave_whose_connection_drops_while_its_handshake_waits_may_connect_again():
    """r1's HANDSHAKE waits for a segment read; the connection drops: r1 is no longer connecting, so
    its next connection is taken (not closed as "already connected")."""
    d, _ = _far_behind()
    first = len(d.conn_of) + 1
    connect(d, "r1")
    assert d.held_reads == [0] and d.core.connecting == {"r1": first}
    d.core.replica_disconnected(first)
    connect(d, "r1")                                 # the read asked for is still under way
    assert not d.closed and d.core.connecting == {"r1": first + 1} and d.held_reads == [0]
    _perform_reads(d)
    assert "r1" in d.core.conns and not d.closed


def test_group_commit_rounds_are_counted_from_the_last_round_not_from_every_tick():
    """GroupCommitService.waitForRunning(10): with a request waiting for data the pool has not
    committed yet, a tick 5 ms after a round runs no round, and the next is due 10 ms after it."""
    d = Driver(sync_flush(transient_store_pool_enable=True, wake_commit_when_put_message=False,
                          commit_commit_log_least_pages=4, commit_commit_log_thorough_interval_ms=10_000,
                          sync_flush_timeout_ms=60_000), replicas=())
    d.now = 1_000
    d.put()
    d.tick()                                         # the put's round: the request waits, nothing to fsync
    assert d.core.requests_read and not d.fsyncs and d.core.log.committed == 0
    d.tick(advance=5)
    assert d.core.next_wakeup_ms(d.now) == 1_010
    d.tick(advance=10)                               # 1,015: past the interval, a round runs
    assert d.core.next_wakeup_ms(d.now) == 1_025


def test_a_segment_read_back_that_differs_from_the_log_closes_the_connection_that_waits_and_says_why():
    d, _ = _far_behind()
    slave = connect(d, "r1")
    _perform_reads(d)                                # segment 0 reads back fine: r1 is taken
    deliver(d, "r1", slave)                          # and acknowledges it: its stream needs segment 256
    r1 = d.conn_of["r1"]
    assert d.held_reads == [256] and "r1" in d.core.conns
    d.held_reads.clear()
    data = bytearray(d.files[256])
    data[120:240] = bytes(120)                       # the segment's second record gone: a blank there
    d.core.segment_read(256, bytes(data), d.now)
    d.run()
    assert [(c.conn, c.reason) for c in d.closed] == [
        (r1, "segment 256 read back does not hold the records the log wrote there (1 of 2)")]
    assert "r1" not in d.core.conns


@pytest.mark.parametrize("how", ["disconnected", "bad input"])
@pytest.mark.parametrize("which", ["r1", "r2"])
def test_a_connection_that_goes_while_its_handshake_waits_leaves_the_other_waiting_one_alone(how, which):
    """r1 and r2 both wait for segment 0 (r1 on the lower connection id); one connection goes: only
    its slave stops connecting, and the other's handshake is taken when the read is in."""
    d, _ = _far_behind()
    connect(d, "r1")
    connect(d, "r2")
    waiting = {"r1": d.conn_of["r1"], "r2": d.conn_of["r2"]}
    assert d.core.connecting == waiting and d.held_reads == [0]
    gone = waiting.pop(which)
    if how == "disconnected":
        d.core.replica_disconnected(gone)
    else:
        d.core.replica_bad_input(gone, "a frame no slave sends")
    d.run()
    assert d.core.connecting == waiting
    _perform_reads(d)
    assert set(d.core.conns) == {"r3", *waiting}


def test_a_failed_segment_read_leaves_a_slave_behind_it_that_waits_for_its_ack_not_for_the_read():
    """r2 waits, window full, at 1,536 (it needs no read until it acknowledges); r1 streams past it
    and needs segment 1,792, whose read fails: r1 goes, r2 stays."""
    d, _ = _far_behind()
    r2 = connect(d, "r2")
    _perform_reads(d)
    for _ in range(5):
        deliver(d, "r2", r2)
        _perform_reads(d)
    assert d.core.conns["r2"].next_transfer == 1_536 and not d.held_reads
    r1 = connect(d, "r1")
    for _ in range(12):
        if d.held_reads == [1_792]:
            break
        _perform_reads(d)
        deliver(d, "r1", r1)
    assert d.held_reads == [1_792] and d.core.conns["r1"].next_transfer == 1_792
    d.held_reads.clear()
    d.core.segment_read_failed(1_792, "segment 1792: EIO", d.now)
    d.run()
    assert [c.conn for c in d.closed] == [d.conn_of["r1"]] and set(d.core.conns) == {"r2", "r3"}


def test_check_invariants_holds_with_writes_in_flight_and_behind_a_failed_one():
    """The core's own invariants while WriteData effects are in flight: the first at committed, and
    after a failed write the stale ones behind it (above committed) until they are answered."""
    d = Driver(BASE, replicas=())
    for rid in (1, 2, 3):
        d.core.put(rid, rid, b"m" * 40, d.now)
    writes = [e for e in d.core.take_effects() if isinstance(e, fx.WriteData)]
    assert [(e.offset, e.end) for e in writes] == [(0, 60), (60, 120), (120, 180)]
    d.core.check_invariants()                        # the first write in flight starts at committed (0)
    d.core.write_done(writes[0].start, writes[0].position, len(writes[0].data), d.now)
    d.core.write_failed(writes[1].start, writes[1].position, len(writes[1].data), 0, d.now)
    assert d.core.log.committed == 60 and [(w.offset, w.stale) for w in d.core.writes] == [(120, True)]
    d.core.check_invariants()                        # a stale write above committed
    d.core.write_failed(writes[2].start, writes[2].position, len(writes[2].data), 0, d.now)
    d.core.check_invariants()


def test_an_idle_commit_tick_is_no_round():
    """CommitRealTimeService with nothing written to commit does not start its interval: a put
    50 ms after an idle tick is committed at the next tick."""
    d = Driver(pooled(commit_commit_log_least_pages=0), replicas=())
    d.now = 1_000
    d.tick()
    d.now = 1_050
    d.put()
    d.tick()
    assert [(w.offset, w.end) for w in d.writes] == [(0, 60)]


@pytest.mark.parametrize("pool", [True, False], ids=["commit", "flush"])
def test_a_record_that_rolls_into_the_next_segment_is_committed_and_flushed_below_the_least_pages(pool):
    """CommitRealTimeService and FlushRealTimeService do not wait for their least pages once a
    segment is complete (MappedFile.isFull): 316 bytes, under 8 pages of 64, go at the next round."""
    d = Driver(attrs.evolve(BASE, transient_store_pool_enable=pool, wake_commit_when_put_message=False,
                            commit_commit_log_least_pages=8, commit_commit_log_thorough_interval_ms=10_000,
                            flush_commit_log_least_pages=8), replicas=())
    d.now = 1_000
    for _ in range(5):
        d.put()                                      # the fifth rolls into segment 256
    d.tick()
    if pool:
        assert d.writes and d.core.log.committed == 316
    else:
        assert [e.upto for e in d.fsyncs] == [256]


def test_flush_real_time_service_flushes_at_exactly_its_least_pages_and_its_thorough_interval():
    """flushCommitLogLeastPages is "at least": two 64-byte records with least 2 pages of 64 go.  And
    the thorough flush is due at 10,000 ms exactly, not after."""
    d = Driver(attrs.evolve(BASE, flush_commit_log_least_pages=2), replicas=())
    d.put(size=44)
    d.put(size=44)                                   # 128 bytes dirty: exactly 2 pages
    d.tick(advance=500)
    assert [e.upto for e in d.fsyncs] == [128]
    d = Driver(BASE, replicas=())
    d.put()
    d.now = 10_000
    d.tick()
    assert [e.upto for e in d.fsyncs] == [60]


def test_a_group_commit_round_forgets_every_request_its_fsync_released():
    d = Driver(sync_flush())
    d.put()
    d.put()
    d.tick()                                         # one round, one fsync for both
    assert len(d.core.requests_read) == 2
    d.complete_fsync()
    assert not d.core.requests_read and not d.core.requests_write


def test_housekeeping_drops_a_slave_at_the_interval_exactly():
    d = Driver(sync_master(ha_housekeeping_interval_ms=1_000, slave_timeout_ms=50))
    connect(d, "r1")
    d.put()
    d.tick()                                         # DATA in flight at 0
    d.tick(advance=999)
    assert "r1" in d.core.conns
    d.tick(advance=1)
    assert "r1" not in d.core.conns


def test_the_next_wakeup_is_never_in_the_past():
    """A greeting overdue (the connection opened at 0, the interval 400 ms, the clock at 1,000):
    the runtime is told to tick now, not at 400."""
    d = Driver(sync_master(ha_housekeeping_interval_ms=400))
    d.core.replica_connection_opened(9, 0)
    assert d.core.next_wakeup_ms(1_000) == 1_000


def test_a_pool_commit_that_fails_before_its_first_byte_is_no_commit_step():
    """Nothing reached the page cache: committed stays, and the spec sees WriteFail alone (a Commit
    step there would restart the thorough interval's clock, too)."""
    d = Driver(pooled(commit_commit_log_least_pages=0), replicas=())
    for rid in (1, 2):
        d.core.put(rid, rid, b"m" * 40, d.now)
    d.run()
    d.fail_writes = [("EIO", 0)]
    d.tick(advance=200)
    assert d.core.log.committed == 0 and not any(step[0] == "Commit" for step in d.core.spec_steps)
    assert d.core.spec_steps[-1] == ("WriteFail", None, None)


def test_commit_real_time_service_commits_at_exactly_its_least_pages():
    """commitCommitLogLeastPages is "at least": two 64-byte records with least 2 pages of 64 go."""
    d = Driver(pooled(commit_commit_log_least_pages=2, commit_commit_log_thorough_interval_ms=10_000), replicas=())
    d.now = 1_000
    d.put(size=44)
    d.put(size=44)
    d.tick()
    assert [(w.offset, w.end) for w in d.writes] == [(0, 128)]


@pytest.mark.parametrize("refusal", ["second handshake", "unknown slave", "already connected", "differs"])
def test_a_refused_handshake_leaves_nothing_parked(refusal):
    """Each refusal is decided at once: nothing waits for a segment read on that connection after it."""
    d = Driver(sync_master(), replicas=("r1", "r2"))
    r1 = connect(d, "r1")
    conn = d.conn_of["r1"] if refusal == "second handshake" else 99
    name = {"unknown slave": "stranger", "differs": "r2"}.get(refusal, "r1")
    chain = b"\x01" * 16 if refusal == "differs" else r1.index.chain_at(0)
    d.core.replica_handshake(conn, name, 0, chain, d.now, 0)
    d.run()
    assert d.closed and not d.core._parked and not d.core.connecting, (d.closed, d.core._parked)


def test_a_service_interval_longer_than_the_cap_leaves_the_wakeup_at_the_cap():
    """next_wakeup_ms answers at most a second ahead: a commit or flush interval of 5 s does not
    push the wake-up past it."""
    pool = Driver(pooled(commit_interval_commit_log_ms=5_000, flush_interval_commit_log_ms=5_000), replicas=())
    pool.put()
    assert pool.core.log.issued < pool.core.log.wrote and pool.core.next_wakeup_ms(0) == 1_000
    flush = Driver(attrs.evolve(BASE, flush_interval_commit_log_ms=5_000), replicas=())
    flush.put()
    assert flush.core.log.committed > flush.core.log.flushed and flush.core.next_wakeup_ms(0) == 1_000


# --- the TransientStorePool's size: puts refused while no buffer is left ---------------------------

def _held_commits(**kw):
    return pooled(commit_interval_commit_log_ms=10**9, commit_commit_log_thorough_interval_ms=10**9,
                  commit_commit_log_least_pages=10**6, **kw)


def test_a_pooled_master_refuses_puts_while_no_pool_buffer_is_left_and_takes_them_after_a_commit():
    """With the commits held off the write buffer fills a segment per pool buffer; with none left a
    put is answered busy at once (rejectRequest: isTransientStorePoolDeficient), never buffered."""
    d = Driver(_held_commits(transient_store_pool_size=3))
    ids = [d.put(size=100) for _ in range(12)]
    statuses = [d.status(i) for i in ids]
    accepted = statuses.count(S.PUT_OK)
    assert statuses == [S.PUT_OK] * accepted + [S.OS_PAGE_CACHE_BUSY] * (12 - accepted), statuses
    assert accepted == 5 and d.core.log.pool_buffers_in_use() == 3 and not d.writes   # two 120-byte records a segment
    assert all(d.offsets[i] == [0] for i in ids[accepted:]), "a busy put was never appended: no offset"
    assert d.core.log.wrote == 2 * 256 + 120 and d.core.log.committed == 0
    d.core.check_invariants()
    d.tick(10**9)                                 # the commit: one write per buffered segment
    assert [(w.start, w.position) for w in d.writes] == [(0, 0), (256, 0), (512, 0)]
    assert d.core.log.pool_buffers_in_use() == 1
    assert d.status(d.put(size=100)) == S.PUT_OK


def test_a_commit_of_a_full_pool_hands_the_runtime_one_write_per_buffer_not_one_per_put():
    """The defect the mutation review found (issue 36): an unbounded write buffer made one commit
    emit a write per buffered segment, and 65,537 of them stopped the master on an assertion.  At
    the largest pool a commit writes at most its 1,024 buffers; the surplus puts are answered busy."""
    from reference.config import MAX_TRANSIENT_STORE_POOL_SIZE
    from reference.master import MAX_WRITES_IN_FLIGHT

    d = Driver(_held_commits(mapped_file_size_commit_log=128, max_message_size=64,
                             transient_store_pool_size=MAX_TRANSIENT_STORE_POOL_SIZE))
    ids = [d.put(size=60) for _ in range(MAX_TRANSIENT_STORE_POOL_SIZE + 16)]
    busy = sum(d.status(i) == S.OS_PAGE_CACHE_BUSY for i in ids)
    assert busy == 16 and d.core.log.pool_buffers_in_use() == MAX_TRANSIENT_STORE_POOL_SIZE
    d.core.check_invariants()
    d.tick(10**9)
    assert len(d.writes) == MAX_TRANSIENT_STORE_POOL_SIZE < MAX_WRITES_IN_FLIGHT
    d.core.check_invariants()


@pytest.mark.parametrize("size", [0, 1, 1025, True])
def test_a_pool_size_that_leaves_no_buffer_or_passes_the_bound_is_refused_by_name(size):
    from spec.config import ConfigError

    with pytest.raises(ConfigError, match="transient_store_pool_size"):
        pooled(transient_store_pool_size=size)


# --- the last master.py survivors of the mutation campaign (issue 36), pinned -----------------------

def test_under_the_double_response_switch_an_async_flush_put_ok_is_final():
    """BugDoubleResponse answers twice only a request whose flush deadline is still queued; under
    ASYNC_FLUSH no request has one, so its PUT_OK is final and the runtime may forget its route."""
    d = Driver(attrs.evolve(BASE, bugs={"BugDoubleResponse"}))
    rid = d.put()
    assert d.answers[rid] == [S.PUT_OK] and d.finals[rid] == [True]


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_a_pool_commit_wakes_the_flush_service_at_once(flush):
    """CommitRealTimeService wakes the flush service after a commit: the fsync of the committed
    bytes is due in the loop turn that learns of the commit, not a flush interval later."""
    d = Driver(pooled(flush_disk_type=flush, flush_interval_commit_log_ms=500, flush_commit_log_least_pages=0,
                      group_commit_interval_ms=10, commit_interval_commit_log_ms=50,
                      commit_commit_log_thorough_interval_ms=50, sync_flush_timeout_ms=60_000), replicas=())
    d.now = 1_000
    d.put()
    d.tick()                             # the flush round runs before the commit, which lands in this turn
    assert d.core.log.committed > 0 and not d.fsyncs
    assert d.core.next_wakeup_ms(d.now) == d.now
    d.tick()
    assert [f.upto for f in d.fsyncs] == [d.core.log.committed]


def test_under_fsync_covers_failed_write_a_failed_commit_wakes_the_flush_at_once():
    """BugFsyncCoversFailedWrite with the pool counts a failed commit's range as committed and
    wakes the flush service, as a successful commit does: the follow-up fsync covers it at once."""
    d = Driver(pooled(flush_disk_type="SYNC_FLUSH", commit_interval_commit_log_ms=50, group_commit_interval_ms=10,
                      commit_commit_log_thorough_interval_ms=50, sync_flush_timeout_ms=60_000,
                      bugs={"BugFsyncCoversFailedWrite"}), replicas=())
    d.now = 1_000
    d.fail_writes = [("EIO", 0)]
    d.put()
    d.tick()                             # the commit fails; the switch counts it as committed
    assert not d.core.writable and d.core.log.committed > 0 and not d.fsyncs
    assert d.core.next_wakeup_ms(d.now) == d.now
    d.tick()
    assert [f.upto for f in d.fsyncs] == [d.core.log.committed]


def test_a_fixed_cursor_ships_its_label_unbounded_and_a_moving_one_stops_at_the_next_epoch():
    """transfer_label: a connection whose cursor is fixed (BugTransferCursorNotReset) ships its
    cursor's label with no end, as ReplicasManager.next_transfer does; otherwise a batch ends
    where the next epoch starts."""
    d = Driver(BASE, replicas=())
    for _ in range(3):
        d.put(size=100)
    d.core.begin_epoch(((1, 0), (2, 240)), 0, bugs=frozenset({"BugTransferCursorNotReset"}))
    assert d.core.transfer_label(0, 0) == (1, 0, 240)
    assert d.core.transfer_label(0, 1) == (1, 0, INF)


@pytest.mark.parametrize("claim", [+1, -1])
def test_a_handshake_whose_record_count_differs_from_the_log_at_its_offset_is_refused(claim):
    """HandshakeAccepts: a slave at a real offset with the right chain hash there, that claims one
    record more or one fewer than the master's log holds up to that offset, is no slave of it."""
    d = Driver(sync_master(), replicas=("r1",))
    for _ in range(3):
        d.put(size=100)
    index = d.core.log.index
    offset = index.end_after(2)
    d.core.replica_handshake(1, "r1", offset, index.chain_at(offset), d.now, 2 + claim)
    d.run()
    assert [(c.conn, c.reason) for c in d.closed] == [
        (1, f"slave r1: slave claims {2 + claim} records up to {offset}, the master's log has 2")]
    assert "r1" not in d.core.conns


def test_a_second_connection_with_an_accepted_slaves_exact_handshake_is_refused_as_already_connected():
    """The name check comes first: a copy of a connected slave's own HANDSHAKE (right offset,
    chain and records) on another connection is refused, and the slave keeps its connection."""
    d = Driver(sync_master(), replicas=("r1",))
    slave = connect(d, "r1")
    d.put(size=100)
    deliver(d, "r1", slave)
    hc = d.core.conns["r1"]
    offset = hc.ack_offset
    d.core.replica_handshake(7, "r1", offset, d.core.log.index.chain_at(offset), d.now, hc.ack_records)
    d.run()
    assert [(c.conn, c.reason) for c in d.closed] == [(7, "slave r1 is already connected")]
    assert d.core.conns["r1"].conn == d.conn_of["r1"]


@pytest.mark.parametrize("order", ["greater", "less"])
def test_a_segment_read_back_with_as_many_records_but_another_chain_is_refused(order):
    """segment_read checks the re-indexed segment against the next checkpoint as a pair: a file
    holding as many valid records, one of them another message (so another chain hash, greater
    or less than the log's), is not the segment the log wrote."""
    from reference.commitlog import LogIndex
    from reference.record import encode

    d, _ = _far_behind()
    slave = connect(d, "r1")
    _perform_reads(d)
    deliver(d, "r1", slave)
    r1 = d.conn_of["r1"]
    assert d.held_reads == [256]
    d.held_reads.clear()
    log = d.core.log
    cp, nxt = log.index.checkpoints[256], log.index.checkpoints[512]
    for key in range(1, 1_000):
        data = bytearray(d.files[256])
        data[120:240] = encode(key, b"n" * 100)   # a valid record of the same size, another message
        index = LogIndex.of_segment(log.segment_size, cp, bytes(data))
        assert index.count == nxt.records
        if (index.last_chain > nxt.chain) == (order == "greater") and index.last_chain != nxt.chain:
            break
    d.core.segment_read(256, bytes(data), d.now)
    d.run()
    assert [c.conn for c in d.closed] == [r1] and "does not hold the records" in d.closed[0].reason
    assert "r1" not in d.core.conns


def test_a_slave_that_acknowledges_nothing_is_sent_no_batch_once_its_window_is_full():
    """ha_send_window_bytes: the transfer sends while less than a window is in flight; a batch may
    overshoot it, and once it has, nothing more goes until the slave acknowledges."""
    d = Driver(sync_master(ha_send_window_bytes=200, slave_timeout_ms=60_000, ha_housekeeping_interval_ms=600_000))
    connect(d, "r1")
    for _ in range(6):
        d.put(size=100)                           # 120-byte records: in flight 120, then 240 (past 200)
    sent = [(e.offset, e.offset + len(e.data)) for e in d.sent]
    assert sent == [(0, 120), (120, 240)] and d.core.log.committed > 600, (sent, d.core.log.committed)


def test_frames_parked_behind_a_handshake_refused_on_replay_die_with_its_connection():
    """A HANDSHAKE that waits for a segment read and is refused when the read is in closes its
    connection; the frames parked behind it are that connection's and must not run.  A second,
    correct HANDSHAKE behind it used to be accepted on the closed connection: the slave counted
    as connected on a dead socket, and the real one refused as "already connected"."""
    d, _ = _far_behind()
    offset = d.core.log.ghost.end_after(2)
    d.core.replica_connection_opened(50, d.now)
    d.core.replica_handshake(50, "r1", offset, bytes(16), d.now, 2)        # the wrong chain: refused
    d.core.replica_handshake(50, "r1", offset, d.core.log.ghost.chain_at(offset), d.now, 2)
    d.run()
    assert d.held_reads == [0] and len(d.core._parked[50]) == 2
    _perform_reads(d)
    assert [c.conn for c in d.closed] == [50] and "differs from the master's" in d.closed[0].reason
    assert "r1" not in d.core.conns and 50 not in d.core._parked and not d.core.connecting
    d.core.check_invariants()
