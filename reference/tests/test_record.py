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
