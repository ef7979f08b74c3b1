"""One reading of a record (record.read_head): a slave keeps, and acknowledges, exactly the
records its own restart's recovery keeps.  Before, the slave's parser took a record ending in
the last 8 bytes of a segment that recovery drops (design review, 2026-11-28)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reference import record
from reference.replica import ReplicaCore

SEGMENT = 256


@st.composite
def segments(draw):
    """A segment's bytes as a master may have written them, then maybe forged: records (and
    maybe a blank to the end), cut at any point (what was shipped so far), with any bytes
    overwritten (a mangled frame, a lying master)."""
    buf = bytearray()
    while True:
        body = draw(st.binary(max_size=60))
        rec = record.encode(draw(st.integers(0, 2**64 - 1)), body)
        if len(buf) + len(rec) + record.END_FILE_MIN_BLANK_LENGTH > SEGMENT or draw(st.booleans()):
            break
        buf += rec
    if draw(st.booleans()):
        buf += record.blank(SEGMENT - len(buf))
    for _ in range(draw(st.integers(0, 2))):
        if buf:
            at = draw(st.integers(0, len(buf) - 1))
            buf[at:at + 4] = draw(st.binary(min_size=1, max_size=4))[: len(buf) - at]
    tail = SEGMENT - len(buf)
    if tail >= record.HEADER_SIZE + 8 and draw(st.booleans()):
        # a forged record, whole and with its CRC, ending inside the segment's last 8 bytes
        buf += record.encode(1, bytes(tail - record.HEADER_SIZE - draw(st.integers(1, 7))))
    shipped = len(buf) if draw(st.booleans()) else draw(st.integers(0, len(buf)))
    return bytes(buf[:shipped]), draw(st.lists(st.integers(1, 64), max_size=8))


@settings(max_examples=400, deadline=None)
@given(segments())
def test_a_slave_keeps_what_its_own_recovery_keeps(case):
    data, chunks = case
    slave = ReplicaCore("b2", SEGMENT)
    slave.connect()
    pos = 0
    for n in chunks + [len(data)]:
        if pos >= len(data) or not slave.connected:
            break
        slave.on_data(pos, data[pos:pos + n])
        pos = min(len(data), pos + n)
    scan = record.scan_segment(data + bytes(SEGMENT - len(data)), 0)
    waits_inside_a_blank = scan.ends_with_blank and len(data) < SEGMENT
    if waits_inside_a_blank:
        assert slave.parsed_end == scan.records[-1].end if scan.records else slave.parsed_end == 0
    else:
        # what the slave holds as complete is what recovery keeps, never more
        assert slave.parsed_end == scan.valid_end, (slave.parsed_end, scan)
    assert [r for r in scan.records if r.end <= slave.parsed_end] == list(scan.records[:slave.index.count])


def test_a_record_ending_in_the_last_8_bytes_is_refused_by_both_readers():
    body = bytes(SEGMENT - record.HEADER_SIZE - 4)         # ends 4 bytes before the segment's end
    rec = record.encode(7, body)
    assert record.scan_segment(rec + bytes(4), 0).valid_end == 0
    slave = ReplicaCore("b2", SEGMENT)
    slave.connect()
    slave.on_data(0, rec)
    assert slave.parsed_end == 0 and not slave.connected
