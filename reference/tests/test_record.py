"""Records, padding and the CRC recovery scan."""

import pytest

from reference.record import (
    BLANK_MAGIC, END_FILE_MIN_BLANK_LENGTH, HEADER_SIZE, blank, encode, recover_log, scan_segment,
)

SEG = 256


def segment(*records: bytes, pad_to_end: bool = False) -> bytes:
    data = b"".join(records)
    if pad_to_end:
        data += blank(SEG - len(data))
    return data.ljust(SEG, b"\0")


def test_round_trip_and_end_of_data():
    data = segment(encode(1, b"alpha"), encode(2, b"beta"))
    scan = scan_segment(data, 0)
    assert [(r.key, r.offset, r.size) for r in scan.records] == [(1, 0, 25), (2, 25, 24)]
    assert scan.valid_end == 49 and not scan.ends_with_blank and scan.problem is None


def test_blank_record_completes_a_segment():
    data = segment(encode(1, b"x" * 100), pad_to_end=True)
    scan = scan_segment(data, 512)
    assert scan.ends_with_blank and scan.valid_end == 512 + SEG


@pytest.mark.parametrize("cut", [3, 10, HEADER_SIZE + 2])
def test_a_torn_record_stops_the_scan(cut):
    good, torn = encode(1, b"alpha"), encode(2, b"b" * 40)
    data = segment(good, torn[:cut])
    scan = scan_segment(data, 0)
    assert [r.key for r in scan.records] == [1] and scan.valid_end == len(good)
    assert scan.problem is not None or cut < 8


def test_flipped_byte_is_a_crc_mismatch_and_the_bug_keeps_it():
    rec = bytearray(encode(7, b"payload"))
    rec[-1] ^= 0xFF
    data = segment(encode(1, b"a"), bytes(rec))
    assert "CRC mismatch" in scan_segment(data, 0).problem
    kept = scan_segment(data, 0, keep_torn=True)
    assert [r.key for r in kept.records] == [1, 7]  # BugRecoveryKeepsTorn


def test_recovery_across_segments_drops_everything_after_the_first_bad_record():
    seg0 = segment(encode(1, b"x" * 150), pad_to_end=True)
    bad = bytearray(encode(2, b"y" * 50))
    bad[30] ^= 1
    seg1 = segment(encode(3, b"z"), bytes(bad))
    seg2 = segment(encode(4, b"w"))
    report = recover_log({0: seg0, SEG: seg1, 2 * SEG: seg2}, SEG)
    assert [r.key for r in report.records] == [1, 3]
    assert report.end_offset == SEG + HEADER_SIZE + 1
    assert any("CRC mismatch" in d for d in report.dropped)
    assert any("after the end of the log" in d for d in report.dropped)


def test_blank_needs_room_for_its_header():
    assert len(blank(END_FILE_MIN_BLANK_LENGTH)) == 8
    assert int.from_bytes(blank(8)[4:8], "big") == BLANK_MAGIC
    with pytest.raises(AssertionError):
        blank(7)


def test_the_magic_codes_are_rocketmqs():
    """The file format is RocketMQ's: MESSAGE_MAGIC_CODE and BLANK_MAGIC_CODE (CommitLog.java)."""
    import struct

    assert struct.unpack_from(">I", encode(1, b"x"), 4)[0] == 0xDAA320A7
    assert struct.unpack_from(">I", blank(8), 4)[0] == 0xCBD43194


def test_the_chain_hash_is_the_same_in_every_build():
    """Master and slave compare chain hashes at the handshake: two builds of ackorder (a rolling
    upgrade) must compute the same 16 bytes, from the start value, the offset and the header's
    first 12 bytes (size, magic, CRC) and nothing else."""
    from reference.record import CHAIN_START, chain_next

    assert CHAIN_START == bytes(16)
    rec = encode(7, b"hello")
    assert chain_next(CHAIN_START, 0, encode(1, b"x")[:12]).hex() == "e8806963a89ecfdbd7ab42f0c8e6c7cc"
    assert chain_next(bytes(range(16)), 4096, rec).hex() == "83c527b92ca64c045256f30708f45f4a"
    assert chain_next(bytes(range(16)), 4096, rec[:12] + b"\xff" * 8) == chain_next(bytes(range(16)), 4096, rec)


@pytest.mark.parametrize("head, want", [
    ((0, 0), "unwritten"),
    ((5, 0), "bad magic 0x00000000"),                 # a size with no magic: torn, not unwritten
    ((0, 0xDAA320A7), "impossible size 0"),
])
def test_read_head_tells_unwritten_space_from_a_torn_header(head, want):
    import struct

    from reference.record import read_head

    buf = struct.pack(">II", *head).ljust(SEG, b"\0")
    assert str(read_head(buf, 0, SEG)).startswith(want)


def test_a_log_scan_counts_from_zero_resumes_from_its_last_checkpoint_and_keeps_its_tail():
    from reference.record import CHAIN_START, Checkpoint, scan_log

    one, two, three = encode(1, b"a" * 100), encode(2, b"b" * 100), encode(3, b"c" * 50)
    segs = {0: segment(one, pad_to_end=True), SEG: segment(two, pad_to_end=True), 2 * SEG: segment(three)}
    scan = scan_log(sorted(segs), segs.__getitem__, SEG)
    assert (scan.record_count, scan.end_offset, scan.dropped) == (3, 2 * SEG + len(three), ())
    assert [cp.records for cp in scan.checkpoints] == [0, 1, 2] and scan.tail_start == 2 * SEG
    assert [r.key for r in scan.tail_records] == [3] and scan.tail_bytes == three
    read = []
    again = scan_log(sorted(segs), lambda s: read.append(s) or segs[s], SEG, resume=scan.checkpoints)
    assert read == [2 * SEG] and (again.record_count, again.end_offset) == (3, scan.end_offset)
    assert again.checkpoints == scan.checkpoints
    # a log that ends at a segment start: no tail
    whole = {0: segs[0], SEG: segs[SEG]}
    end = scan_log(sorted(whole), whole.__getitem__, SEG)
    assert (end.end_offset, end.tail_start, end.tail_records, end.tail_bytes) == (2 * SEG, 2 * SEG, (), b"")
    assert scan_log([], {}.__getitem__, SEG).checkpoints == (Checkpoint(0, 0, CHAIN_START),)


def test_recovery_reports_each_records_crc_and_drops_nothing_from_a_clean_log():
    import struct

    recs = (encode(1, b"alpha"), encode(2, b"beta"))
    report = recover_log({0: segment(*recs)}, SEG)
    assert [r.crc for r in report.records] == [struct.unpack_from(">I", r, 8)[0] for r in recs]
    assert report.dropped == ()


def test_record_size_is_the_header_and_the_body():
    from reference.record import record_size

    for body in (b"", b"x", b"y" * 100):
        assert record_size(len(body)) == len(encode(1, body)) == HEADER_SIZE + len(body)


def test_what_is_wrong_names_the_global_offset_and_the_bytes_left():
    import struct

    from reference.record import read_head

    bad_blank = (bytes(40) + struct.pack(">II", 16, BLANK_MAGIC)).ljust(SEG, b"\0")
    assert read_head(bad_blank, 40, SEG) == f"a blank record of size 16 with {SEG - 40} bytes left"
    too_long = (bytes(40) + struct.pack(">II", SEG, BLANK_MAGIC)).ljust(SEG, b"\0")   # past the segment's end
    assert read_head(too_long, 40, SEG) == f"a blank record of size {SEG} with {SEG - 40} bytes left"
    one = encode(1, b"a" * 5)
    data = (one + struct.pack(">II", SEG, 0xDAA320A7)).ljust(SEG, b"\0")
    assert read_head(data, len(one), SEG) == f"impossible size {SEG} with {SEG - len(one)} bytes left in the segment"
    scan = scan_segment(data, 512)
    assert scan.problem == f"the record at offset {512 + len(one)}: impossible size {SEG} with " \
                           f"{SEG - len(one)} bytes left in the segment"
    torn = bytearray(segment(one, encode(2, b"b" * 5)))
    torn[len(one) + HEADER_SIZE] ^= 1                              # the second record's body
    scan = scan_segment(bytes(torn), 512)
    assert scan.problem == f"CRC mismatch in the record at offset {512 + len(one)} (torn or corrupt)"
    kept = scan_segment(bytes(torn), 512, keep_torn=True)          # BugRecoveryKeepsTorn
    assert [r.offset for r in kept.records] == [512, 512 + len(one)]


def test_garbage_after_unwritten_space_is_dropped_and_named_in_a_later_segment():
    from reference.record import scan_log

    one = encode(1, b"a" * 100)
    first = segment(one, pad_to_end=True)
    rec = encode(2, b"b" * 10)
    second = (rec + bytes(20) + b"\x01garbage").ljust(SEG, b"\0")
    segs = {0: first, SEG: second}
    scan = scan_log(sorted(segs), segs.__getitem__, SEG)
    assert scan.end_offset == SEG + len(rec)
    assert scan.dropped == (f"segment {SEG}: bytes {SEG + len(rec)}..{2 * SEG} dropped: "
                            "garbage after the last record",)
    report = recover_log(segs, SEG)
    assert [(r.offset, r.size) for r in report.records] == [(0, len(one)), (SEG, len(rec))]


def test_read_head_takes_an_empty_body_and_refuses_any_other_magic():
    import struct

    from reference.record import read_head

    assert read_head(segment(encode(1, b"")), 0, SEG) == HEADER_SIZE
    for magic in (0xFFFFFFFF, 0xDAA320A8, 0x00000001):
        buf = struct.pack(">II", 40, magic).ljust(SEG, b"\0")
        assert read_head(buf, 0, SEG) == f"bad magic 0x{magic:08x}"


def test_everything_after_the_end_of_the_log_is_dropped_and_each_segment_named():
    """A torn record ends the log: the valid segments after it are dropped, each named; so is a
    segment past a missing one (a gap: the log cannot continue across it)."""
    from reference.record import scan_log

    one, two = encode(1, b"a" * 100), encode(2, b"b" * 100)
    torn = bytearray(segment(one, two))
    torn[len(one) + HEADER_SIZE] ^= 1
    whole = segment(encode(3, b"c" * 10), pad_to_end=True)
    segs = {0: bytes(torn), SEG: whole, 2 * SEG: whole}
    scan = scan_log(sorted(segs), segs.__getitem__, SEG)
    assert (scan.end_offset, scan.record_count) == (len(one), 1)
    assert scan.dropped[1:] == (f"segment {SEG}: {SEG} bytes dropped, after the end of the log",
                                f"segment {2 * SEG}: {SEG} bytes dropped, after the end of the log")
    gap = {0: segment(one, pad_to_end=True), 2 * SEG: whole, 3 * SEG: whole}
    scan = scan_log(sorted(gap), gap.__getitem__, SEG)
    assert (scan.end_offset, scan.record_count) == (SEG, 1)
    assert scan.dropped == (f"segment {2 * SEG}: {SEG} bytes dropped, not contiguous (expected segment {SEG})",
                            f"segment {3 * SEG}: {SEG} bytes dropped, after the end of the log")
