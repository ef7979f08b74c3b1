"""Regressions for the defects found from outside (issue 11), on the core:
a failed page-cache write was acknowledged, and HA input the master should
not trust was trusted.  Each scenario also runs with the bug switch that
restores the old behaviour, to show the test bites."""

import attrs
import pytest

from reference import effects as fx
from reference.replica import ReplicaCore
from reference.status import PutStatus as S
from reference.tests.test_master_core import BASE, Driver, connect, deliver

SYNC_FLUSH = attrs.evolve(BASE, flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=50)


def round_in_flight_then_a_failed_write(d: Driver):
    """The defect as found: A (two records, segment 0) and B (rolled into segment 1) form
    one group-commit round whose fsync of segment 0 is in flight when C's write (behind B)
    fails.  The old core then issued the round's follow-up fsync for segment 1 without
    looking at the writable flag, and it covered C."""
    a = [d.put(size=90), d.put(size=90)]
    b = d.put(size=40)
    d.tick()                                        # the round {A, B}: fsync of segment 0
    assert len(d.fsyncs) == 1
    d.fail_writes = [("EIO", 0)]
    c = d.put(size=40)
    return a, b, c


def test_a_failed_write_is_never_acknowledged_by_the_follow_up_fsync():
    d = Driver(SYNC_FLUSH)
    a, b, c = round_in_flight_then_a_failed_write(d)
    assert d.status(c) is S.UNKNOWN_ERROR and not d.core.writable
    c_start = d.writes[-1].offset
    while d.fsyncs:                                 # the fsync in flight returns: not counted
        assert d.complete_fsync().upto <= c_start, "an fsync reached the failed write"
    assert not d.fsyncs and d.core.log.flushed < c_start
    assert all(d.status(x) is None for x in [*a, b])     # read-only: nothing more is vouched for
    d.tick(advance=51)
    assert all(d.status(x) is S.FLUSH_DISK_TIMEOUT for x in [*a, b]) and d.status(c) is S.UNKNOWN_ERROR
    assert d.status(d.put()) is S.SERVICE_NOT_AVAILABLE


def test_the_bug_switch_acknowledges_the_failed_write():
    d = Driver(attrs.evolve(SYNC_FLUSH, bugs={"BugFsyncCoversFailedWrite"}))
    a, b, c = round_in_flight_then_a_failed_write(d)
    while d.fsyncs:
        d.complete_fsync()
    assert d.status(c) is S.PUT_OK                  # the defect: PUT_OK for bytes never written


@pytest.mark.parametrize("kind, written", [("EIO", 0), ("ENOSPC", 0), ("short", 7)])
def test_a_failed_write_under_async_flush_is_unknown_error(kind, written):
    d = Driver(BASE)                                # ASYNC_FLUSH + ASYNC_MASTER: PUT_OK at the append
    ok = d.put()
    d.fail_writes = [(kind, written)]
    failed = d.put()
    assert d.status(ok) is S.PUT_OK and d.status(failed) is S.UNKNOWN_ERROR
    assert d.core.log.committed == d.writes[-1].offset
    assert d.status(d.put()) is S.SERVICE_NOT_AVAILABLE


def test_a_short_write_keeps_the_whole_records_it_copied():
    d = Driver(attrs.evolve(BASE, transient_store_pool_enable=True, commit_interval_commit_log_ms=1000,
                            commit_commit_log_least_pages=100, commit_commit_log_thorough_interval_ms=1000))
    ids = [d.put(size=30) for _ in range(3)]        # 50 bytes each, in the write buffer
    d.fail_writes = [("short", 120)]                # the commit copies two whole records, then fails
    d.tick(advance=1000)
    assert d.core.log.committed == 100 and not d.core.writable
    assert d.core.log.issued == d.core.log.committed          # the next commit retries from there
    d.tick(advance=1000)
    assert d.core.log.committed == d.core.log.wrote and all(d.status(i) is S.PUT_OK for i in ids)


POOL_MASTER = attrs.evolve(BASE, broker_role="SYNC_MASTER", transient_store_pool_enable=True,
                           commit_interval_commit_log_ms=1000, commit_commit_log_least_pages=100,
                           commit_commit_log_thorough_interval_ms=1000, slave_timeout_ms=50)


def test_an_ack_for_the_write_buffer_is_refused():
    """The forged report of the issue: offset = wrote, 0 records, nothing committed."""
    d = Driver(POOL_MASTER)
    connect(d, "r1")
    rid = d.put()
    assert d.core.log.committed == 0
    d.core.replica_ack(d.conn_of["r1"], d.core.log.wrote, d.now, 0)
    d.run()
    assert d.closed and d.closed[0].conn == d.conn_of["r1"] and "r1" not in d.core.conns
    assert d.core.push2SlaveMaxOffset == 0 and d.status(rid) is not S.PUT_OK


def test_the_bug_switch_trusts_the_write_buffer():
    d = Driver(attrs.evolve(POOL_MASTER, bugs={"BugAckCheckedAgainstWrote"}))
    connect(d, "r1")
    rid = d.put()
    d.core.replica_ack(d.conn_of["r1"], d.core.log.wrote, d.now, 1)
    d.run()
    assert d.status(rid) is S.PUT_OK and d.core.log.committed == 0   # acked, only in the write buffer


@pytest.mark.parametrize("offset_from_committed, records_delta, why", [
    (0, 1, "claims"),          # the right offset, the wrong record count
    (1, 0, "beyond"),          # past what the master could have shipped
    (10_000, 0, "beyond"),     # past everything written
])
def test_mangled_acks_close_only_that_connection(offset_from_committed, records_delta, why):
    d = Driver(attrs.evolve(BASE, broker_role="SYNC_MASTER"), replicas=("r1", "r2"))
    slaves = {n: connect(d, n) for n in ("r1", "r2")}
    d.put()
    d.tick()
    deliver(d, "r1", slaves["r1"])
    log = d.core.log
    offset = log.committed + offset_from_committed
    d.core.replica_ack(d.conn_of["r2"], offset, d.now, log.records_upto(offset) + records_delta)
    d.run()
    assert [c.conn for c in d.closed] == [d.conn_of["r2"]] and why in d.closed[0].reason
    assert "r1" in d.core.conns and "r2" not in d.core.conns


def test_a_second_connection_under_a_name_never_touches_the_first():
    d = Driver(attrs.evolve(BASE, broker_role="SYNC_MASTER", slave_timeout_ms=100))
    r1 = connect(d, "r1")
    first = d.conn_of["r1"]
    hs_offset, chain = r1.parsed_end, r1.index.chain_at(r1.parsed_end)
    for conn in (7, 8, 9):                       # impostors, including one with the very same handshake
        d.core.replica_handshake(conn, "r1", hs_offset, chain, d.now, 0)
        d.run()
    assert [c.conn for c in d.closed] == [7, 8, 9] and all("already connected" in c.reason for c in d.closed)
    assert d.core.conns["r1"].conn == first
    rid = d.put()
    d.tick()
    deliver(d, "r1", r1)
    assert d.status(rid) is S.PUT_OK             # the original connection still acks


def test_unknown_names_and_a_second_handshake_are_refused():
    d = Driver(attrs.evolve(BASE, broker_role="SYNC_MASTER"))
    r1 = connect(d, "r1")
    d.core.replica_handshake(5, "nobody", 0, bytes(16), d.now, 0)
    d.run()
    assert d.closed[-1].conn == 5 and "unknown" in d.closed[-1].reason
    d.core.replica_handshake(d.conn_of["r1"], "r1", r1.parsed_end, r1.index.chain_at(r1.parsed_end), d.now, 0)
    d.run()
    assert d.closed[-1].conn == d.conn_of["r1"] and "second HANDSHAKE" in d.closed[-1].reason
    assert "r1" not in d.core.conns and ("ReplicaDisconnect", "r1") in d.core.spec_steps


def test_bad_input_on_one_connection_closes_that_connection_only():
    d = Driver(attrs.evolve(BASE, broker_role="SYNC_MASTER"), replicas=("r1", "r2"))
    connect(d, "r1")
    connect(d, "r2")
    d.core.replica_bad_input(d.conn_of["r1"], "malformed frame: unknown frame type 99")
    d.run()
    assert [c.conn for c in d.closed] == [d.conn_of["r1"]] and set(d.core.conns) == {"r2"}


def test_a_stalled_connection_is_closed_by_housekeeping():
    d = Driver(attrs.evolve(BASE, broker_role="SYNC_MASTER", ha_housekeeping_interval_ms=100,
                            slave_timeout_ms=1000))
    connect(d, "r1")
    d.put()
    d.tick()                                     # data in flight to r1, never acknowledged
    assert d.sent and not d.closed
    assert d.core.next_wakeup_ms(d.now) <= d.now + 100
    d.tick(advance=100)
    assert d.closed and "acknowledged nothing" in d.closed[0].reason and "r1" not in d.core.conns


def test_a_connection_that_never_greets_is_closed_by_housekeeping():
    """Found by a clean 20,000-seed campaign (seeds 162960313501156, 239952543230344): a bit
    flipped in a HANDSHAKE's length left the master waiting for the rest of the frame and the
    slave waiting for DATA, forever.  The master now closes a connection that has not greeted
    within the housekeeping interval, and the slave reconnects."""
    d = Driver(attrs.evolve(BASE, broker_role="SYNC_MASTER", ha_housekeeping_interval_ms=100))
    d.core.replica_connection_opened(7, d.now)
    d.core.replica_connection_opened(8, d.now)
    d.core.replica_handshake(8, "r1", 0, connect_chain(), d.now, 0)     # 8 greets, 7 never does
    assert d.core.next_wakeup_ms(d.now) <= d.now + 100
    d.tick(advance=99)
    assert not d.closed
    d.tick(advance=1)
    assert [c.conn for c in d.closed] == [7] and "no HANDSHAKE" in d.closed[0].reason
    assert d.core.conns["r1"].conn == 8 and not d.core.ungreeted
    d.core.replica_connection_opened(9, d.now)
    d.core.replica_disconnected(9)                  # gone before greeting: forgotten
    assert not d.core.ungreeted


def connect_chain() -> bytes:
    return ReplicaCore("r1", BASE.mapped_file_size_commit_log).index.chain_at(0)


def test_write_results_must_come_in_order():
    d = Driver(BASE)
    d.core.put(1, 1, b"x" * 10, 0)
    first = next(e for e in d.core.take_effects() if isinstance(e, fx.WriteData))
    with pytest.raises(AssertionError, match="out of order"):
        d.core.write_done(first.start, first.position + 1, len(first.data), 0)


def test_the_caught_up_bug_counts_records_where_committed_stops_in_a_roll():
    """Found by a --bug campaign: the padding before a rolled record was written, the record's
    own write failed, so committed stops at the segment end, inside the last index entry.
    A slave holding every committed record is "caught up" in the spec's terms (records), so
    BugHandshakeRefusesCaughtUp must refuse it; the correct master accepts it."""
    def rolled_then_failed(cfg):
        d = Driver(attrs.evolve(cfg, broker_role="SYNC_MASTER"))
        d.put(size=100)
        d.put(size=100)                              # 240 bytes: the next record rolls to 256
        slave = connect(d, "r1")                     # behind: accepted by both masters
        d.tick()
        deliver(d, "r1", slave)                      # the slave holds both records
        d.core.replica_disconnected(d.conn_of.pop("r1"))
        slave.disconnected()
        d.fail_writes = [None, ("EIO", 0)]           # the padding lands, the record does not
        d.put(size=100)
        log = d.core.log
        assert log.committed == 256 and log.records_upto(log.committed) == 2 and not d.core.writable
        assert slave.parsed_end == 240
        return d, slave

    for cfg, refused in ((BASE, False), (attrs.evolve(BASE, bugs={"BugHandshakeRefusesCaughtUp"}), True)):
        d, slave = rolled_then_failed(cfg)
        connect(d, "r1", slave)
        assert ("r1" not in d.core.conns) == refused, cfg.bugs
