"""The commit log and its index by hand (reference/commitlog.py): the cuts a failed write and a
divergent slave make, the window a master keeps in memory, a segment read back, and how far one
flush reaches.  Found missing by `ackorder mutate` (issue 36): no check ever cut a log whose
index had forgotten its first segments, or cut one inside a later segment, and `CommitLog.truncate`
was reached by no generator at all until the simulator put several puts in one loop turn."""

from __future__ import annotations

import pytest

from reference.commitlog import CommitLog, LogIndex
from reference.record import CHAIN_START, Checkpoint, scan_log, scan_segment

SEG = 256


def filled(records: int, body: int = 100, ghost: bool = False, committed: int | None = None) -> CommitLog:
    """A log of ``records`` records of ``body`` bytes (120 bytes each: two a segment, then a
    16-byte blank), confirmed in the page cache up to ``committed`` (default: everything)."""
    log = CommitLog(SEG, transient_pool=False, ghost=ghost)
    for key in range(1, records + 1):
        log.append(key, bytes([key]) * body)
    log.confirm(log.wrote if committed is None else committed)
    return log


def test_a_cut_inside_a_later_segment_keeps_every_segment_whole_and_zero_past_it():
    log = filled(5, committed=376)                   # records end at 120, 240 | 376, 496 | 632
    assert list(log.index.ends) == [120, 240, 376, 496, 632] and sorted(log.segments) == [0, 256, 512]
    seg0 = bytes(log.segments[0])
    log.truncate(376)
    assert sorted(log.segments) == [0, 256]
    assert all(len(s) == SEG for s in log.segments.values())
    assert bytes(log.segments[0]) == seg0
    assert bytes(log.segments[256][120:]) == bytes(SEG - 120) and log.segments[256][:120].strip(b"\0")
    assert (log.wrote, log.issued, log.committed) == (376, 376, 376)
    assert log.index.count == 3 and log.index.last_chain == log.index.chain_at(376)
    with pytest.raises(AssertionError):
        log.truncate(120)                            # below what the page cache holds: never cut


def test_a_cut_at_a_segment_start_drops_that_segment():
    log = filled(5, committed=256)                   # the page cache reached the roll only
    log.truncate(256)
    assert sorted(log.segments) == [0] and log.wrote == 256 and log.index.count == 2


def test_a_cut_right_after_everything_flushed():
    """A write fails with every committed byte already fsync'd: the cut is at the flushed offset."""
    log = filled(5, committed=376)
    log.flushed = 376
    log.truncate(376)
    assert (log.flushed, log.committed, log.wrote, log.index.count) == (376, 376, 376, 3)


def test_the_ghost_is_cut_with_the_index():
    log = filled(5, ghost=True, committed=496)
    log.truncate(496)
    assert list(log.ghost.ends) == list(log.index.ends) == [120, 240, 376, 496]
    assert log.ghost.last_chain == log.index.last_chain


def test_an_index_that_forgot_its_first_segments_cuts_at_the_right_record():
    log = filled(6)
    log.flushed = log.committed
    log.forget_below(512)
    idx = log.index
    assert (idx.base, idx.base_records, list(idx.ends)) == (512, 4, [632, 752])
    chain = idx.chain_at(632)
    idx.truncate(632)
    assert idx.count == 5 and list(idx.ends) == [632] and idx.last_chain == chain
    assert idx.records_upto(700) == 5


def test_a_forgotten_window_answers_from_its_base_and_refuses_below_it():
    log = filled(6)
    whole = [log.index.chain_at(e) for e in log.index.ends]
    log.flushed = log.committed
    log.forget_below(256)
    idx = log.index
    assert idx.chain_at(256) is not None and [idx.chain_at(e) for e in idx.ends] == whole[2:]
    assert idx.count == 6 and idx.records_upto(256) == 2
    assert sorted(log.segments) == [256, 512], "the bytes of a forgotten segment stayed in memory"
    log.forget_below(256)                            # the same base again: nothing changes
    assert idx.base == 256 and len(idx.ends) == 4
    with pytest.raises(AssertionError):
        log.forget_below(768)                        # past the flushed segment


def test_a_segment_read_back_is_indexed_as_the_log_indexed_it():
    log = filled(5)
    for start, records in ((0, 0), (256, 2)):
        cp = Checkpoint(start, records, log.index.chain_at(start) if start else CHAIN_START)
        back = LogIndex.of_segment(SEG, cp, bytes(log.segments[start]))
        ends = [e for e in log.index.ends if start < e <= start + SEG]
        assert list(back.ends) == ends
        assert [back.chain_at(e) for e in ends] == [log.index.chain_at(e) for e in ends]
        # both segments end with a blank: the next segment's start is a boundary of the read-back index
        assert back.chain_at(start + SEG) == log.index.chain_at(start + SEG)
    last = LogIndex.of_segment(SEG, Checkpoint(512, 4, log.index.chain_at(512)), bytes(log.segments[512]))
    assert 768 not in last.checkpoints and list(last.ends) == [632]


def test_a_recovered_log_has_the_chain_the_log_had():
    log = filled(5)
    data = {s: bytes(b) for s, b in log.segments.items()}
    scan = scan_log(sorted(data), data.__getitem__, SEG)
    again = CommitLog.recovered(SEG, False, scan)
    assert again.index.last_chain == log.index.last_chain and again.index.count == 5
    assert [again.index.chain_at(e) for e in (512, 632)] == [log.index.chain_at(e) for e in (512, 632)]
    assert scan_segment(data[512], 512).records[0].end == 632


def test_one_flush_reaches_past_the_padding_to_the_next_record():
    """Flushed up to the end of a segment's last record, the next record after the padding: the
    flush reaches that record's segment at once (never a flush of padding alone)."""
    log = CommitLog(SEG, transient_pool=False)
    log.append(1, b"a" * 100)
    log.append(2, b"b" * 100)
    log.confirm(log.wrote)
    log.flushed = 240
    log.append(3, b"c" * 100)                        # the blank [240, 256), the record [256, 376)
    log.confirm(log.wrote)
    assert log.flush_target() == 376
    log.flushed = 376
    assert log.flush_target() == 376                 # everything flushed: the committed end


def test_a_record_fits_a_segment_with_room_left_for_the_smallest_blank():
    from reference.record import record_size

    log = CommitLog(SEG, transient_pool=False)
    largest = SEG - 8 - record_size(0)               # END_FILE_MIN_BLANK_LENGTH is 8 bytes
    assert record_size(largest) + 8 == SEG
    assert log.fits(largest) and not log.fits(largest + 1)


def test_a_log_needs_segments_of_more_than_64_bytes():
    CommitLog(65, transient_pool=False)
    for size in (64, 63):
        with pytest.raises(AssertionError):
            CommitLog(size, transient_pool=False)


def test_a_chain_is_known_only_at_a_boundary():
    log = filled(3)                                  # ends 120, 240 | 376
    idx = log.index
    assert idx.chain_at(120) is not None and idx.chain_at(256) is not None
    assert [idx.chain_at(o) for o in (1, 119, 121, 241, 300)] == [None] * 5


def test_a_log_recovered_at_a_segment_boundary_creates_its_next_segment_when_it_grows():
    from reference.effects import CreateSegment

    log = filled(2)                                  # 120, 240, then the blank: the log may end at 256
    log.append(3, b"c" * 100)                        # (rolls: the blank is written with it)
    data = {0: bytes(log.segments[0])}
    scan = scan_log([0], data.__getitem__, SEG)
    assert (scan.end_offset, scan.tail_start) == (256, 256)
    again = CommitLog.recovered(SEG, False, scan)
    assert not again.segments                        # nothing of segment 256 exists yet
    _, effects = again.append(4, b"d" * 10)
    assert CreateSegment(256) in effects
