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
    r.on_data(10, log.data(10, 40))                   # past the end: a gap
    closed = [e for e in r.take_effects() if isinstance(e, fx.CloseMaster)]
    assert closed and "at offset 10, but this slave's log ends at 0" in closed[0].reason and not r.connected


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


def test_one_frame_across_a_segment_roll_lands_whole_in_both_files():
    """A DATA frame is cut by bytes, not by files: one frame may carry the end of a segment (its
    padding) and the start of the next; both mirrors stay one file long and the end moves by
    the frame's length."""
    log = master_log(5)
    r = ReplicaCore("r1", 256)
    r.connect()
    r.take_effects()
    r.on_data(0, log.data(0, 100))
    r.take_effects()
    r.on_data(100, log.data(100, 256) + log.data(256, log.wrote))     # the end of segment 0, then 256
    effects = r.take_effects()
    writes = [(e.start, e.position, len(e.data)) for e in effects if isinstance(e, fx.WriteData)]
    assert writes == [(0, 100, 156), (256, 0, log.wrote - 256)]
    assert r.received_end == r.parsed_end == log.wrote
    assert set(r.segments) == {256} and len(r.segments[256]) == 256, "segment 0 forgotten, 256 kept whole"
    assert [e.offset for e in effects if isinstance(e, fx.SendAck)] == [log.wrote]


def test_a_forgotten_partial_record_is_zeroed_in_place():
    log = master_log(3)
    r = ReplicaCore("r1", 256)
    r.connect()
    r.on_data(0, log.data(0, 75))
    r.disconnected()
    r.take_effects()
    r.connect()
    zero = [e for e in r.take_effects() if isinstance(e, fx.ZeroTail)]
    assert [(e.start, e.position) for e in zero] == [(0, 50)]
    assert len(r.segments[0]) == 256 and bytes(r.segments[0][50:]) == bytes(206)


def test_a_recovered_replica_holds_the_masters_chain_at_its_end():
    """The index rebuilt from the files (its headers read back from the mirror) chains as the
    master's did: the HANDSHAKE a restarted slave sends is the master's."""
    from reference.record import scan_log
    log = master_log(3)
    scan = scan_log([0], lambda start: bytes(log.segments[start]), 256)
    r = ReplicaCore.recovered("r1", 256, scan)
    r.connect()
    hs = [e for e in r.take_effects() if isinstance(e, fx.SendHandshake)][0]
    assert (hs.offset, hs.records, hs.chain) == (log.wrote, 3, log.index.chain_at(log.wrote))


def test_a_heartbeat_reports_only_on_a_connection():
    r = ReplicaCore("r1", 256)
    r.heartbeat()
    assert r.take_effects() == []
    r.connect()
    r.take_effects()
    r.heartbeat()
    assert r.take_effects() == [fx.SendAck(0, 0)]
    r.disconnected()
    r.heartbeat()
    assert r.take_effects() == []


def test_a_frame_ending_with_the_smallest_end_of_file_blank_is_parsed_to_the_next_file():
    """Records end at most END_FILE_MIN_BLANK_LENGTH (8) before a segment's end; a frame that ends
    exactly at the segment's end, with only that blank left, is parsed through it."""
    log = CommitLog(256, False, ghost=True)
    for k, size in enumerate((30, 30, 30, 30, 28), start=1):       # 4 x 50 + 48 = 248: 8 bytes left
        log.append(k, b"v" * size)
    log.append(6, b"v" * 30)                                       # rolls to segment 256
    log.confirm(log.issued)
    assert log.index.ends[4] == 248
    r = ReplicaCore("r1", 256)
    r.connect()
    r.on_data(0, log.data(0, 256))
    assert r.parsed_end == r.received_end == 256


def test_a_replica_recovered_at_a_segment_boundary_creates_the_next_file_when_data_comes():
    from reference.record import scan_log
    log = master_log(5)                                   # four records in segment 0, its padding, one in 256
    scan = scan_log([0], lambda start: bytes(log.segments[start]), 256)
    assert scan.end_offset == scan.tail_start == 256, scan
    r = ReplicaCore.recovered("r1", 256, scan)
    assert r.segments == {}, "no mirror of a file that does not exist yet"
    r.connect()
    r.take_effects()
    r.on_data(256, log.data(256, log.wrote))
    effects = r.take_effects()
    assert fx.CreateSegment(256) in effects and r.parsed_end == log.wrote


def test_an_empty_data_frame_is_taken_as_nothing():
    """Network input: an empty DATA frame at the end appends nothing and is acked, never asserted."""
    r = ReplicaCore("r1", 256)
    r.connect()
    r.take_effects()
    r.on_data(0, b"")
    assert r.received_end == 0 and r.connected and r.take_effects() == [fx.SendAck(0, 0)]
