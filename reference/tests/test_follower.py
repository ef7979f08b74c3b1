"""Epochs on the HA wire: MasterCore labels every transfer header (no batch spans two epochs)
and answers EPOCH_QUERY on the HA connection; FollowerCore (reference/failover/follower.py) cuts
its log against the master's entries before its HANDSHAKE and learns each batch's epoch from the
header.  Driven by hand, master and follower in one test, no runtime."""

from __future__ import annotations

import attrs

from reference import effects as fx
from reference.failover import broker_effects as bfx
from reference.failover.epochfile import EpochEntry, EpochFileCache
from reference.failover.follower import RESCANNING, FollowerCore
from reference.record import scan_log
from reference.replica import ReplicaCore
from reference.tests.test_master_core import BASE, Driver

SEG = BASE.mapped_file_size_commit_log


def _master(sizes: list[int], epochs=None, then: list[int] = (), view=frozenset({"s"}), bugs=frozenset(),
            replicas=("s",)) -> Driver:
    """A master whose log holds one record per size (keys 1, 2, ...), then ``epochs``
    begun (confirmOffset 0, the SyncStateSet ``view`` besides itself), then the ``then`` records."""
    d = Driver(attrs.evolve(BASE, ha_transfer_batch_size=1 << 20), replicas=replicas)
    for size in sizes:
        d.put(size)
    if epochs is not None:
        d.core.begin_epoch(epochs, 0, bugs)
        d.core.set_confirm_view(frozenset(view), frozenset(view), 0)
    for size in then:
        d.put(size)
    return d


def _files_of(d: Driver) -> dict[int, bytes]:
    return {start: bytes(seg) for start, seg in d.files.items()}


def _scan(files: dict[int, bytes], upto: int):
    def read(start: int) -> bytes:
        keep = max(0, min(SEG, upto - start))
        return files[start][:keep] + bytes(SEG - keep)
    return scan_log([s for s in files if s < upto], read, SEG)


def _replica_holding(files: dict[int, bytes], end: int) -> ReplicaCore:
    return ReplicaCore.recovered("s", SEG, _scan(files, end))


class Link:
    """One HA connection between a hand-driven master and a follower."""

    def __init__(self, d: Driver, follower: FollowerCore, files: dict[int, bytes] | None = None) -> None:
        self.d, self.f, self.files, self.conn = d, follower, files or {}, 7
        self.follower_effects: list = []
        self.master_effects: list = []

    def _from_master(self) -> list:
        out = self.d.core.take_effects()
        self.master_effects += out
        return out

    def connect(self) -> None:
        self.d.core.replica_connection_opened(self.conn, self.d.now)
        self.f.connect()
        self.pump()

    def pump(self) -> None:
        for _ in range(100):
            moved = False
            for e in self.f.take_effects():
                self.follower_effects.append(e)
                moved = True
                if isinstance(e, fx.SendEpochQuery):
                    self.d.core.replica_epoch_query(self.conn, self.d.now)
                elif isinstance(e, fx.SendHandshake):
                    self.d.core.replica_handshake(self.conn, self.f.replica.name, e.offset, e.chain, self.d.now, e.records)
                elif isinstance(e, fx.SendAck):
                    self.d.core.replica_ack(self.conn, e.offset, self.d.now, e.records)
                elif isinstance(e, fx.RescanLog):
                    self.f.rescanned(_scan(self.files, e.upto))
            for e in self._from_master():
                moved = True
                if isinstance(e, fx.SendEpochs) and e.conn == self.conn:
                    self.f.epoch_reply(e.entries, e.log_end_offset, e.confirm_offset)
                elif isinstance(e, fx.SendData) and e.conn == self.conn:
                    self.f.on_data(e.offset, e.data, e.epoch, e.epoch_start, e.confirm_offset)
            if not moved:
                return
        raise AssertionError("the link did not settle")


def test_transfer_batches_never_span_an_epoch_and_carry_its_label_and_the_confirm_offset():
    d = _master([40, 40], epochs=((1, 0), (2, 120)), then=[40])
    f = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)
    link = Link(d, f)
    link.connect()
    sent = [e for e in link.master_effects if isinstance(e, fx.SendData)]
    assert [(e.offset, e.offset + len(e.data), e.epoch, e.epoch_start) for e in sent] == \
        [(0, 120, 1, 0), (120, 180, 2, 120)]
    # sent at the connect, before the slave's first ack: computeConfirmOffset was still its ack, 0
    assert all(e.confirm_offset == 0 for e in sent) and d.core.readable_end() == 180
    # the follower learned both epochs from the headers, each written to its epoch file before
    # the bytes of that epoch were reported
    assert f.cache.entries == (EpochEntry(1, 0), EpochEntry(2, 120)) and f.received_end == 180
    kinds = [type(e).__name__ for e in link.follower_effects]
    assert kinds.index("WriteEpochFile") < kinds.index("SendAck")
    files = [e.entries for e in link.follower_effects if isinstance(e, bfx.WriteEpochFile)]
    assert files[-1] == f.cache.entries and f.confirm_offset <= 180


def test_a_deposed_masters_tail_is_cut_at_the_consistent_point_before_its_handshake():
    old = _master([40, 40, 40], epochs=((1, 0),))               # wrote a third record no one else has
    new = _master([40, 40], epochs=((1, 0), (2, 120)), then=[30, 30])
    files = _files_of(old)
    f = FollowerCore(_replica_holding(files, 180), EpochFileCache(((1, 0),)), 180)
    link = Link(new, f, files)
    link.connect()
    follower = [e for e in link.follower_effects if not isinstance(e, (fx.WriteData, fx.CreateSegment,
                                                                      fx.SendAck))]
    assert follower[:5] == [fx.SendEpochQuery(), bfx.TruncateLog(120), bfx.FsyncLog(120),
                            bfx.WriteEpochFile(((1, 0), (2, 120))), fx.RescanLog(120)]
    assert isinstance(follower[5], fx.SendHandshake) and follower[5].offset == 120
    assert new.core.name_of(link.conn) == "s"      # the master took the handshake: a prefix of its log
    assert f.received_end == new.core.log.committed and f.cache.entries[-1] == EpochEntry(2, 120)


def test_a_cut_in_memory_only_is_the_bug_switchs_and_nothing_else_decides_it():
    old = _master([40, 40, 40], epochs=((1, 0),))
    new = _master([40, 40], epochs=((1, 0), (2, 120)), then=[30])
    files = _files_of(old)
    link = Link(new, FollowerCore(_replica_holding(files, 180), EpochFileCache(((1, 0),)), 0,
                                  bugs=frozenset({"BugTruncateNotDurable"})), files)
    link.connect()
    cut = [e for e in link.follower_effects if isinstance(e, (bfx.TruncateLog, bfx.FsyncLog))]
    assert cut == [bfx.TruncateLog(120, on_disk=False)]
    assert new.core.name_of(link.conn) == "s"      # the running slave holds the cut in memory


def test_a_log_with_no_epoch_in_common_is_cut_whole_and_follows_from_zero():
    old = _master([40, 40])
    new = _master([30], epochs=((3, 0),))
    files = _files_of(old)
    f = FollowerCore(_replica_holding(files, 120), EpochFileCache(), 0)   # its epoch file was lost
    link = Link(new, f, files)
    link.connect()
    kinds = [e for e in link.follower_effects if isinstance(e, (bfx.HandshakeFailed, bfx.TruncateLog,
                                                                bfx.WriteEpochFile, fx.RescanLog))]
    assert isinstance(kinds[0], bfx.HandshakeFailed)
    assert kinds[1:] == [bfx.TruncateLog(0), bfx.WriteEpochFile(()), bfx.WriteEpochFile(((3, 0),)), fx.RescanLog(0)]
    assert bfx.FsyncLog(0) in link.follower_effects, "the cut to 0 is made durable before anything follows"
    assert f.received_end == new.core.log.committed and f.cache.entries == (EpochEntry(3, 0),)
    assert f.confirm_offset == 0, "nothing of the cut log is confirmed"


def test_what_the_master_sends_out_of_turn_drops_the_link_never_an_assertion():
    d = _master([40], epochs=((2, 0),))
    f = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)
    f.on_data(0, b"x", 2, 0, 0)                              # DATA before any handshake
    assert any(isinstance(e, fx.CloseMaster) for e in f.take_effects())
    f.disconnected()
    Link(d, f).connect()
    f.take_effects()
    assert f.cache.last_epoch() == 2
    for bad in [(f.received_end, b"y" * 60, 1, 0, 0),         # an epoch going back
                (f.received_end, b"y" * 60, 3, f.received_end + 1, 0)]:    # a label starting after its bytes
        end = f.received_end
        f.on_data(*bad)
        closed = [e for e in f.take_effects() if isinstance(e, fx.CloseMaster)]
        assert closed and "not a label" in closed[0].reason and f.received_end == end
        f.disconnected()
        f.connect()
        f.epoch_reply(((2, 0),), end, 0)
        f.take_effects()
    f.epoch_reply(((2, 0),), 0, 0)                            # a second reply on one connection
    assert any(isinstance(e, fx.CloseMaster) for e in f.take_effects())
    f.disconnected()
    f.connect()
    f.epoch_reply(((3, 0), (2, 10)), 0, 0)                    # entries out of order
    assert any(isinstance(e, fx.CloseMaster) and "not in order" in e.reason for e in f.take_effects())


def test_the_master_answers_one_epoch_query_per_connection_before_its_handshake():
    d = _master([40], epochs=((4, 0),))
    d.core.replica_connection_opened(1, 0)
    d.core.replica_epoch_query(1, 0)
    assert [e for e in d.core.take_effects() if isinstance(e, fx.SendEpochs)] == \
        [fx.SendEpochs(1, ((4, 0),), 60, min(d.core.readable_end(), 60))]
    d.core.replica_epoch_query(1, 0)                          # asked twice: not a slave
    assert [e.conn for e in d.core.take_effects() if isinstance(e, fx.CloseReplica)] == [1]
    d.core.check_invariants()
    d.core.replica_connection_opened(2, 0)
    d.core.replica_handshake(2, "s", 0, ReplicaCore("s", SEG).index.chain_at(0), 0, 0)
    d.core.take_effects()
    d.core.replica_epoch_query(2, 0)                          # after its HANDSHAKE
    assert [e.conn for e in d.core.take_effects() if isinstance(e, fx.CloseReplica)] == [2]
    assert d.core.epoch_queried == set()
    d.core.check_invariants()


def test_rescanning_is_a_state_the_heartbeat_respects():
    old = _master([40, 40, 40], epochs=((1, 0),))
    files = _files_of(old)
    f = FollowerCore(_replica_holding(files, 180), EpochFileCache(((1, 0),)), 0)
    f.connect()
    f.epoch_reply(((1, 0), (2, 60)), 60, 0)
    assert f.state == RESCANNING
    f.heartbeat()
    assert not any(isinstance(e, fx.SendAck) for e in f.take_effects())
    f.rescanned(_scan(files, 60))
    assert f.state == "TRANSFER" and f.received_end == 60


# --- one confirmOffset rule: computeConfirmOffset (roles.confirm_with) in the byte-level master -----

def test_the_masters_confirm_offset_is_the_specs_rule_over_its_sync_state_set():
    alone = _master([40], epochs=((1, 0),), then=[40], view=frozenset())
    assert alone.core.readable_end() == 120              # alone in its SSS: the log end, put by put
    d = _master([40, 40], epochs=((1, 0),), view=frozenset({"s", "t"}), replicas=("s", "t"))
    assert d.core.readable_end() == 0                    # members with no connection: the old value
    s = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)
    Link(d, s).connect()
    assert d.core.readable_end() == 0                    # t has no connection yet (#6662)
    t = FollowerCore(ReplicaCore("t", SEG), EpochFileCache(), 0)
    link = Link(d, t)
    link.conn = 8
    link.connect()
    assert d.core.readable_end() == 120                  # both hold everything: the minimum of their acks
    d.core.replica_disconnected(8)
    d.put(40)
    assert d.core.readable_end() == 120                  # t gone: kept, not recomputed over s alone


def test_confirm_over_the_connected_members_only_is_the_bug_switchs():
    d = _master([40, 40], epochs=((1, 0),), view=frozenset({"s", "t"}), replicas=("s", "t"),
                bugs=frozenset({"BugConfirmOverConnected"}))
    Link(d, FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)).connect()
    assert d.core.readable_end() == 120                  # B12: t has no connection, and is not waited for


def test_a_header_carries_the_max_offset_only_under_its_bug_switch():
    for bugs, expected in ((frozenset(), 0), (frozenset({"BugSlaveConfirmFromMaxOffset"}), 120)):
        d = _master([40, 40], epochs=((1, 0),), view=frozenset({"s", "t"}), replicas=("s", "t"), bugs=bugs)
        link = Link(d, FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0))
        link.connect()
        assert [e.confirm_offset for e in link.master_effects if isinstance(e, fx.SendData)] == [expected]


def test_an_ack_of_a_member_only_proposed_leaves_the_confirm_offset_as_the_spec_does():
    d = _master([40, 40], epochs=((1, 0),))
    d.core.set_confirm_view(frozenset(), frozenset({"s"}), 0)     # ExpandSyncStateSet(s) in flight
    Link(d, FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)).connect()
    assert d.core.readable_end() == 0          # ReplicaAck recomputes only for a member of bSSS
    d.core.set_confirm_view(frozenset({"s"}), frozenset({"s"}), 120)   # committed: ChangeSyncStateSet's value
    assert d.core.readable_end() == 120


def test_an_epoch_reply_that_does_not_cover_the_stream_start_drops_the_link_never_an_assertion():
    """A hostile master, or one whose epoch file was lost (its first entry starts at its log end):
    the handshake would assert that the master's entries cover the point."""
    for cache, entries, end in [((), (), 0), ((), ((5, 100),), 200), (((1, 0),), ((2, 100),), 200)]:
        f = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(cache), 0)
        f.connect()
        f.take_effects()
        f.epoch_reply(entries, end, 0)
        closed = [e for e in f.take_effects() if isinstance(e, fx.CloseMaster)]
        assert closed and "do not cover offset" in closed[0].reason and f.state == "READY", (cache, entries)


def test_the_whole_records_before_a_bad_one_take_the_batchs_label():
    d = _master([40, 40], epochs=((1, 0), (2, 60)))
    f = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)
    link = Link(d, f)
    d.core.replica_connection_opened(link.conn, 0)
    f.connect()
    d.core.replica_epoch_query(link.conn, 0)
    reply = next(e for e in d.core.take_effects() if isinstance(e, fx.SendEpochs))
    f.epoch_reply(reply.entries, reply.log_end_offset, reply.confirm_offset)
    f.take_effects()
    good = bytes(d.files[0][60:120])
    bad = bytearray(good)
    bad[30] ^= 0xFF                                   # the second record's body: its CRC fails
    f.on_data(0, bytes(d.files[0][:60]), 1, 0, 0)
    f.on_data(60, good + bytes(bad), 2, 60, 0)
    effects = f.take_effects()
    assert any(isinstance(e, fx.CloseMaster) for e in effects)
    assert f.replica.parsed_end == 120 and f.cache.entries == (EpochEntry(1, 0), EpochEntry(2, 60))
    assert [e.entries for e in effects if isinstance(e, bfx.WriteEpochFile)] == [((1, 0), (2, 60))], \
        "the label reaches the epoch file, not only the cache"
    assert not any(isinstance(e, bfx.ReportOffset) for e in effects)


def test_a_heartbeat_reports_only_in_transfer():
    d = _master([40, 40], epochs=((1, 0),))
    f = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)
    link = Link(d, f)
    f.heartbeat()                                   # READY: no connection
    d.core.replica_connection_opened(link.conn, d.now)
    f.connect()
    f.heartbeat()                                   # HANDSHAKE: the epochs not yet answered
    assert not any(isinstance(e, fx.SendAck) for e in link.f.effects + f.replica.effects)
    link.pump()
    assert f.state == "TRANSFER" and f.received_end == 120
    f.heartbeat()
    assert [e for e in f.take_effects() if isinstance(e, fx.SendAck)] == [fx.SendAck(120, 2)]


def test_the_masters_entries_need_cover_only_where_the_stream_starts():
    """A master whose epoch file keeps only its recent epochs still serves a slave that shares
    them: the stream starts at the consistent point, not at 0."""
    old = _master([40, 40, 40], epochs=((1, 0), (2, 60)))
    files = _files_of(old)
    f = FollowerCore(_replica_holding(files, 180), EpochFileCache(((1, 0), (2, 60))), 0)
    f.connect()
    f.take_effects()
    f.epoch_reply(((2, 60),), 240, 0)
    effects = f.take_effects()
    assert not any(isinstance(e, fx.CloseMaster) for e in effects) and f.state == "TRANSFER"
    assert [e.offset for e in effects if isinstance(e, fx.SendHandshake)] == [180]


def test_an_epoch_reply_with_no_epoch_in_common_must_cover_offset_zero():
    """No consistent point: the slave would follow from 0, so the master's entries must cover 0;
    the reason names at most three of them."""
    old = _master([40, 40], epochs=((1, 0),))
    files = _files_of(old)
    for entries in (((2, 1),), ((2, 1), (3, 2), (4, 3)), ((2, 1), (3, 2), (4, 3), (5, 4))):
        f = FollowerCore(_replica_holding(files, 120), EpochFileCache(((1, 0),)), 0)
        f.connect()
        f.take_effects()
        f.epoch_reply(entries, 200, 0)
        closed = [e for e in f.take_effects() if isinstance(e, fx.CloseMaster)]
        assert closed and "do not cover offset 0" in closed[0].reason and f.state == "READY"
        assert ("..." in closed[0].reason) == (len(entries) > 3) and "epoch=5" not in closed[0].reason
        assert all(f"epoch={e}, start_offset={at})" in closed[0].reason for e, at in entries[:3]), closed[0].reason


def test_an_epoch_reply_of_max_entries_is_taken_and_one_more_drops_the_link():
    from reference.failover.epochfile import MAX_EPOCH_ENTRIES
    entries = tuple((e, e - 1) for e in range(1, MAX_EPOCH_ENTRIES + 2))
    for count, dropped in ((MAX_EPOCH_ENTRIES, False), (MAX_EPOCH_ENTRIES + 1, True)):
        f = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)
        f.connect()
        f.take_effects()
        f.epoch_reply(entries[:count], count, 0)
        closed = [e for e in f.take_effects() if isinstance(e, fx.CloseMaster)]
        assert bool(closed) == dropped and f.state == ("READY" if dropped else "TRANSFER"), count


def test_a_rescan_answered_after_the_link_dropped_sends_nothing_on_it():
    """A runtime may answer RescanLog after the connection is gone (dropped by bad input, or
    closed): the index is rebuilt, and nothing (no HANDSHAKE, no report) goes out until the next
    connection's own epoch query."""
    old = _master([40, 40, 40], epochs=((1, 0),))
    files = _files_of(old)
    for lose in ("bad input", "closed", "another reply"):
        f = FollowerCore(_replica_holding(files, 180), EpochFileCache(((1, 0),)), 0)
        f.connect()
        f.epoch_reply(((1, 0), (2, 60)), 60, 0)
        assert f.state == RESCANNING
        if lose == "bad input":
            f.on_bad_input("a garbage frame")
        elif lose == "closed":
            f.disconnected()
        else:
            f.epoch_reply(((1, 0), (2, 60)), 60, 0)
        f.take_effects()
        f.rescanned(_scan(files, 60))
        f.heartbeat()
        assert f.state == "READY" and f.log_end_offset == 60, lose
        assert not [e for e in f.take_effects() if isinstance(e, (fx.SendHandshake, fx.SendAck))], lose
        f.connect()                                   # the next connection starts over
        assert [type(e).__name__ for e in f.take_effects()] == ["SendEpochQuery"]


def test_a_bad_record_after_a_partial_one_drops_the_link_never_an_assertion():
    """Batches are cut by bytes, so a frame may end inside a record; a wrong offset or a corrupt
    rest after it drops the link."""
    d = _master([40], epochs=((1, 0),))
    record = bytes(d.files[0][:60])
    for offset, rest in ((99, record[30:]), (30, record[30:40] + bytes(20))):
        f = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)
        link = Link(_master([], epochs=((1, 0),)), f)
        link.connect()
        f.take_effects()
        assert f.state == "TRANSFER"
        f.on_data(0, record[:30], 1, 0, 0)
        f.on_data(offset, rest, 1, 0, 0)
        assert any(isinstance(e, fx.CloseMaster) for e in f.take_effects()) and f.state == "READY"
        assert f.log_end_offset == 0


def test_data_while_rescanning_or_a_bad_first_record_drops_the_link():
    old = _master([40, 40, 40], epochs=((1, 0),))
    files = _files_of(old)
    f = FollowerCore(_replica_holding(files, 180), EpochFileCache(((1, 0),)), 0)
    assert not f.index_stale, "a follower that never cut has an index that says what its files hold"
    f.connect()
    f.epoch_reply(((1, 0), (2, 60)), 60, 0)
    assert f.state == RESCANNING
    f.take_effects()
    f.on_data(60, bytes(files[0][60:120]), 2, 60, 0)
    closed = [e for e in f.take_effects() if isinstance(e, fx.CloseMaster)]
    assert closed and "a DATA frame in state RESCANNING" in closed[0].reason
    d = _master([40], epochs=((1, 0),))
    bad = bytearray(d.files[0][:60])
    bad[30] ^= 0xFF
    g = FollowerCore(ReplicaCore("s", SEG), EpochFileCache(), 0)
    Link(_master([], epochs=((1, 0),)), g).connect()
    g.take_effects()
    g.on_data(0, bytes(bad), 1, 0, 0)                 # nothing whole before it: no label to keep
    assert any(isinstance(e, fx.CloseMaster) for e in g.take_effects()) and g.state == "READY"
    assert g.log_end_offset == 0 and g.cache.entries == ((1, 0),)
