"""The slave: append only at its end, verify records, forget a partial tail."""

from reference import effects as fx
from reference.commitlog import CommitLog
from reference.replica import ReplicaCore


def master_log(n: int, size: int = 30) -> CommitLog:
    log = CommitLog(256, False, ghost=True)
    for k in range(1, n + 1):
        log.append(k, b"v" * size)
    log.confirm(log.issued)        # the page cache has it all
    return log


def test_frames_at_the_end_are_appended_and_acked():
    log = master_log(5)
    r = ReplicaCore("r1", 256, ghost=True)
    r.connect()
    r.take_effects()
    for start, end in ((0, 100), (100, 256), (256, log.wrote)):   # the fifth record rolled to segment 256
        r.on_data(start, log.data(start, end))
    effects = r.take_effects()
    assert list(r.ghost.keys) == [1, 2, 3, 4, 5]
    assert all(r.ghost.chain_at(b) == log.index.chain_at(b) for b in (0, *log.index.ends, 256))
    assert r.index.base == 256 and list(r.index.keys) == [5] and set(r.segments) == {256}   # bounded
    assert [e.offset for e in effects if isinstance(e, fx.SendAck)] == [100, 256, log.wrote]
    assert [s[0] for s in r.spec_steps] == ["Transfer"] * 5
    assert [s[2] for s in r.spec_steps] == [1, 2, 3, 4, 5]      # keys a trace writer needs (the index forgets)


def test_a_frame_at_the_wrong_offset_drops_the_connection():
    log = master_log(2)
    r = ReplicaCore("r1", 256)
    r.connect()
    r.on_data(10, log.data(10, 40))
    assert any(isinstance(e, fx.CloseMaster) for e in r.take_effects()) and not r.connected


def test_a_corrupt_record_drops_the_connection():
    log = master_log(1)
    data = bytearray(log.data(0, log.wrote))
    data[-1] ^= 0xFF
    r = ReplicaCore("r1", 256)
    r.connect()
    r.on_data(0, bytes(data))
    assert any(isinstance(e, fx.CloseMaster) and "CRC" in e.reason for e in r.take_effects())


def test_reconnect_forgets_a_partial_record_and_reports_the_boundary():
    log = master_log(3)
    r = ReplicaCore("r1", 256)
    r.connect()
    r.on_data(0, log.data(0, 75))            # one record and a half (records are 50 bytes)
    r.disconnected()
    r.take_effects()
    r.connect()
    hs = [e for e in r.take_effects() if isinstance(e, fx.SendHandshake)][0]
    assert hs.offset == 50 and hs.records == 1 and hs.chain == log.index.chain_at(50)
