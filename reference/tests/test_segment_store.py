"""The real store's file operations, one by one (reference/real/disk.py), on real files with a
recording layer: which files it creates, sizes, fdatasyncs and deletes, and when it fsyncs the
directory.  kill -9 keeps the page cache and so cannot see most of this; the power-loss runs can,
but only for what a master's load happens to do (issue 36: 2 of 8 sampled mutants of this module
were killed).  Every figure here is written out, not imported, so a changed bound fails a test."""

from __future__ import annotations

import errno
import os

import pytest

from reference.real.disk import FileOps, SegmentStore, ShortWrite, take_held
from reference.record import CHAIN_START, Checkpoint, encode

SIZE = 4096


class Recording(FileOps):
    """The real operations, each recorded as (kind, file name or descriptor)."""

    def __init__(self) -> None:
        self.ops: list[tuple] = []
        self.open_fds: set[int] = set()

    def open(self, path):
        fd = super().open(path)
        self.open_fds.add(fd)
        self.ops.append(("open", path.name))
        return fd

    def ftruncate(self, path, fd, size):
        self.ops.append(("ftruncate", path.name, size))
        super().ftruncate(path, fd, size)

    def pwrite(self, path, fd, data, position):
        self.ops.append(("pwrite", path.name, position, len(data)))
        return super().pwrite(path, fd, data, position)

    def fdatasync(self, path, fd):
        self.ops.append(("fdatasync", path.name))
        super().fdatasync(path, fd)

    def unlink(self, path):
        self.ops.append(("unlink", path.name))
        super().unlink(path)

    def fsync_dir(self, directory):
        self.ops.append(("fsync_dir",))
        super().fsync_dir(directory)

    def close(self, fd):
        self.open_fds.discard(fd)
        self.ops.append(("close", fd))
        super().close(fd)

    def dup(self, fd):
        new = super().dup(fd)
        self.open_fds.add(new)
        return new

    def kinds(self, *kinds):
        return [op for op in self.ops if op[0] in kinds]


def name(start: int) -> str:
    return f"{start:020d}"


@pytest.fixture
def rec():
    return Recording()


def test_a_new_segment_is_preallocated_and_its_name_made_durable_an_old_one_is_not(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    store.create(0)
    assert rec.ops == [("open", name(0)), ("ftruncate", name(0), SIZE), ("fsync_dir",)]
    assert os.path.getsize(tmp_path / name(0)) == SIZE
    store.close()
    (tmp_path / name(SIZE)).write_bytes(b"x" * (SIZE - 1))       # a file one byte short
    rec.ops.clear()
    again = SegmentStore(tmp_path, SIZE, rec)
    again.create(0)                                                # whole and named: nothing to do
    again.create(SIZE)                                             # named, short: preallocated only
    assert rec.ops == [("open", name(0)), ("open", name(SIZE)), ("ftruncate", name(SIZE), SIZE)]
    again.close()


def test_at_most_sixteen_descriptors_stay_open_the_oldest_closed_first(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    for k in range(16):
        store.create(k * SIZE)
    assert sorted(store._fds) == [k * SIZE for k in range(16)] and not rec.kinds("close")
    store.create(16 * SIZE)
    assert sorted(store._fds) == [k * SIZE for k in range(1, 17)] and len(rec.kinds("close")) == 1
    store.write(0, 0, b"back")                                    # reopened, and another closed
    assert 0 in store._fds and SIZE not in store._fds and len(store._fds) == 16
    assert store.read(0, 0, 4) == b"back"
    store.close()
    assert not rec.open_fds and not store._fds


def test_a_write_lands_where_it_is_told_and_a_short_one_says_how_far_it_got(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    store.write(SIZE, SIZE - 3, b"end")
    assert store.read(SIZE, SIZE - 4, 4) == b"\0end"
    with pytest.raises(AssertionError):
        store.write(SIZE, SIZE - 2, b"end")                       # past the segment: a caller's bug

    class Short(Recording):
        def pwrite(self, path, fd, data, position):
            return super().pwrite(path, fd, data[:2], position)
    short = SegmentStore(tmp_path / "short", SIZE, Short())
    with pytest.raises(ShortWrite) as e:
        short.write(0, 0, b"abcde")
    assert e.value.written == 2 and e.value.errno == errno.EIO and "2 of 5 bytes" in str(e.value)
    store.close()
    short.close()


@pytest.mark.parametrize("kind, err, lands", [("eio", errno.EIO, b""), ("enospc", errno.ENOSPC, b""),
                                              ("short", errno.EIO, b"abc")])
def test_injected_write_faults_start_after_the_set_number_of_writes(tmp_path, kind, err, lands):
    store = SegmentStore(tmp_path, SIZE, Recording())
    store.fail_write_after, store.fail_write_kind = 2, kind
    store.write(0, 0, b"1")
    store.write(0, 1, b"2")
    with pytest.raises(OSError) as e:
        store.write(0, 2, b"abcdef")
    assert e.value.errno == err
    assert isinstance(e.value, ShortWrite) == (kind == "short")
    assert store.read(0, 0, 8) == (b"12" + lands).ljust(8, b"\0")
    if kind == "short":
        assert e.value.written == 3
        with pytest.raises(OSError) as one:                       # one byte cannot be split: EIO
            store.write(0, 8, b"z")
        assert not isinstance(one.value, ShortWrite) and store.read(0, 8, 1) == b"\0"
    store.close()


def test_reading_a_segment_that_was_never_made_creates_nothing(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    assert store.read(5 * SIZE, 10, 7) == bytes(7)
    assert rec.ops == [] and store.segments() == []
    store.write(0, 0, b"ab")
    assert store.read(0, 0, 3) == b"ab\0" and store.read(0, SIZE - 2, 2) == bytes(2)
    store.close()


def test_segments_are_only_the_twenty_digit_names(tmp_path):
    store = SegmentStore(tmp_path, SIZE)
    for other in ("0" * 19, "0" * 21, "0" * 19 + "x", "+" + "0" * 19, "readme", "0" * 19 + "١"):
        (tmp_path / other).write_bytes(b"")
    (tmp_path / name(SIZE)).write_bytes(b"")
    (tmp_path / name(0)).write_bytes(b"")
    assert store.segments() == [0, SIZE]
    store.close()


def test_an_fsync_covers_every_segment_below_its_end_and_no_other(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    for k in range(3):
        store.create(k * SIZE)
    rec.ops.clear()
    for start, upto, synced in ((0, SIZE, [0]), (0, SIZE + 1, [0, SIZE]), (SIZE, 3 * SIZE, [SIZE, 2 * SIZE]),
                                (2 * SIZE, 2 * SIZE, [])):
        assert store.fsync_job(start, upto)() == upto
        assert rec.kinds("fdatasync") == [("fdatasync", name(s)) for s in synced], (start, upto)
        rec.ops.clear()
    assert rec.open_fds == set(store._fds.values()), "a job leaked a descriptor"
    store.close()


def test_injected_fsync_faults_start_after_the_set_number_and_close_their_descriptors(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    store.create(0)
    store.fail_fsync_after = 1
    store.fsync(0, 1)
    job = store.fsync_job(0, 1)
    with pytest.raises(OSError) as e:
        job()
    assert e.value.errno == errno.EIO and rec.kinds("fdatasync") == [("fdatasync", name(0))]
    assert rec.open_fds == set(store._fds.values())
    with pytest.raises(OSError):
        store._fdatasync(0)                                       # the recovery's count is the same one
    store.close()


def test_a_segment_read_job_returns_the_whole_page_cache_copy(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    store.write(0, 5, b"xyz")
    data = store.read_segment_job(0)()
    assert len(data) == SIZE and data[5:8] == b"xyz" and data.count(0) == SIZE - 3
    assert rec.open_fds == set(store._fds.values())
    store.close()


def test_zeroing_a_tail_zeroes_its_segment_from_the_cut_deletes_the_later_ones_and_says_so(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    for k in range(3):
        store.write(k * SIZE, 0, b"\xff" * SIZE)
    rec.ops.clear()
    store.zero_tail(SIZE, 100)
    assert rec.ops[:2] == [("pwrite", name(SIZE), 100, SIZE - 100), ("fdatasync", name(SIZE))]
    assert ("unlink", name(2 * SIZE)) in rec.ops and rec.ops[-1] == ("fsync_dir",)
    assert store.segments() == [0, SIZE] and 2 * SIZE not in store._fds
    assert store.read(SIZE, 0, SIZE) == b"\xff" * 100 + bytes(SIZE - 100)
    rec.ops.clear()
    store.zero_tail(SIZE, SIZE)                                   # a cut at the segment's end: nothing to zero
    assert rec.ops == []                                          # and nothing later to delete
    store.zero_tail(5 * SIZE, 0)                                  # a segment that is not there
    assert rec.ops == [] and store.segments() == [0, SIZE]
    store.zero_tail(0, 0)
    assert rec.kinds("unlink") == [("unlink", name(SIZE))] and store.segments() == [0]
    assert store.read(0, 0, SIZE) == bytes(SIZE)
    store.close()


def test_recovery_starts_from_the_first_segment_and_fdatasyncs_what_it_keeps(tmp_path, rec):
    one, two = encode(1, b"a" * 40), encode(2, b"b" * 40)
    store = SegmentStore(tmp_path, SIZE, rec)
    store.write(0, 0, one + two)
    store.create(SIZE)                                             # made ahead, empty
    store.close()
    rec.ops.clear()
    heard = []
    again = SegmentStore(tmp_path, SIZE, rec)
    scan = again.recover(on_resume=heard.append)
    assert heard == [Checkpoint(0, 0, CHAIN_START)]
    assert (scan.end_offset, scan.record_count) == (len(one + two), 2)
    assert again.segments() == [0] and ("unlink", name(SIZE)) in rec.ops
    assert rec.kinds("fdatasync").count(("fdatasync", name(0))) == 2   # the zeroed tail, then the kept log
    again.close()

    for odd in (lambda p: p.mkdir(), os.mkfifo):                 # a FIFO would block the scan's read
        odd(tmp_path / name(2 * SIZE))
        third = SegmentStore(tmp_path, SIZE)
        with pytest.raises(IsADirectoryError, match=f"{name(2 * SIZE)} is not a regular file"):
            third.recover()
        third.close()
        os.rmdir(tmp_path / name(2 * SIZE)) if (tmp_path / name(2 * SIZE)).is_dir() else os.unlink(tmp_path / name(2 * SIZE))


def test_recovery_of_a_log_ending_at_a_segment_boundary_syncs_every_segment_below_it(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    body = b"q" * (SIZE - 20 - 20)
    whole = encode(1, body)
    assert len(whole) == SIZE - 20
    store.write(0, 0, whole + bytes(20))
    store.close()
    rec.ops.clear()
    again = SegmentStore(tmp_path, SIZE, rec)
    end = again.recover().end_offset
    synced = {op[1] for op in rec.kinds("fdatasync")}
    assert end == len(whole) and synced == {name(0)}
    again.close()


def test_a_closed_store_touches_no_segment_it_had_not_open(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    store.create(0)
    store.close()
    assert store.closed and not rec.open_fds
    with pytest.raises(OSError) as e:
        store.write(SIZE, 0, b"late")
    assert e.value.errno == errno.EBADF and not (tmp_path / name(SIZE)).exists()


def test_taking_a_held_log_zeroes_beyond_it_only_when_told_and_syncs_what_it_keeps(tmp_path, rec):
    from types import SimpleNamespace

    one = encode(1, b"a" * 40)
    for zero_beyond in (True, False):
        d = tmp_path / str(zero_beyond)
        store = SegmentStore(d, SIZE, rec)
        store.write(0, 0, one + b"\xee" * 10)                     # a partial record past the held end
        store.create(SIZE)
        rec.ops.clear()
        scan = SimpleNamespace(end_offset=len(one), tail_start=0)
        assert take_held(store, SimpleNamespace(scan=scan, zero_beyond=zero_beyond)) is scan
        assert store.read(0, len(one), 10) == (bytes(10) if zero_beyond else b"\xee" * 10)
        assert store.segments() == ([0] if zero_beyond else [0, SIZE])
        assert [op[1] for op in rec.kinds("fdatasync")] == ([name(0), name(0)] if zero_beyond else [name(0)])
        store.close()


def test_files_are_made_0644_in_a_directory_made_with_its_parents(tmp_path):
    deep = tmp_path / "a" / "b" / "commitlog"
    store = SegmentStore(deep, SIZE)
    store.create(0)
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(deep / name(0)).st_mode & 0o777 == 0o644 & ~umask
    store.close()


def test_a_segment_file_longer_than_a_segment_is_left_as_it_is(tmp_path, rec):
    """Preallocation only grows a file: bytes past the segment size are not the store's to cut."""
    (tmp_path / name(0)).write_bytes(b"\x01" * (SIZE + 10))
    store = SegmentStore(tmp_path, SIZE, rec)
    store.create(0)
    assert not rec.kinds("ftruncate") and os.path.getsize(tmp_path / name(0)) == SIZE + 10
    store.close()


def test_a_segment_on_disk_is_read_before_anything_opened_it(tmp_path):
    (tmp_path / name(SIZE)).write_bytes(b"kept" + bytes(SIZE - 4))
    store = SegmentStore(tmp_path, SIZE)
    assert store.read(SIZE, 0, 4) == b"kept"
    store.close()


def test_a_failed_disk_stays_failed_and_the_counts_are_per_operation(tmp_path):
    store = SegmentStore(tmp_path / "w", SIZE)
    store.fail_write_after = 2
    store.write(0, 0, b"a")
    store.write(0, 1, b"b")
    for k in range(3):                                            # every write from the third on fails
        with pytest.raises(OSError):
            store.write(0, 2 + k, b"c")
    store.close()
    store = SegmentStore(tmp_path / "f", SIZE)
    store.create(0)
    store.fail_fsync_after = 2
    store.fsync(0, 1)
    store.fsync(0, 1)
    for _ in range(2):
        with pytest.raises(OSError):
            store.fsync(0, 1)
    store.close()
    for after in (0, 1, 2):                                       # the recovery's fdatasync, counted alike
        store = SegmentStore(tmp_path / f"r{after}", SIZE)
        store.create(0)
        store.fail_fsync_after = after
        for _ in range(after):
            store._fdatasync(0)
        for _ in range(2):
            with pytest.raises(OSError, match="injected"):
                store._fdatasync(0)
        store.close()


@pytest.mark.parametrize("length, written", [(2, 1), (3, 1), (0, None)])
def test_an_injected_short_write_copies_half_and_a_write_too_small_to_split_fails_whole(tmp_path, length, written):
    store = SegmentStore(tmp_path, SIZE)
    store.fail_write_after, store.fail_write_kind = 0, "short"
    with pytest.raises(OSError) as e:
        store.write(0, 0, b"xyz"[:length])
    assert (e.value.written if isinstance(e.value, ShortWrite) else None) == written
    store.close()


def test_zeroing_deletes_later_segments_whether_or_not_they_were_open(tmp_path, rec):
    for k in range(3):
        (tmp_path / name(k * SIZE)).write_bytes(b"\x05" * SIZE)
    store = SegmentStore(tmp_path, SIZE, rec)
    store.create(2 * SIZE)                                        # one later segment open, one not
    store.zero_tail(0, 10)
    assert store.segments() == [0] and not store._fds.keys() - {0}
    assert rec.open_fds == set(store._fds.values()), "a deleted segment's descriptor stayed open"
    store.close()


def test_a_log_that_ends_at_a_segment_boundary_syncs_nothing_at_or_past_it(tmp_path, rec):
    """Segment 0 full (records, then the blank to its end), segment SIZE made ahead and empty:
    the log ends at SIZE; recovery and a held log's hand-over fdatasync segment 0 as the log."""
    from reference.record import blank

    one = encode(1, b"a" * 40)
    store = SegmentStore(tmp_path, SIZE, rec)
    store.write(0, 0, one + blank(SIZE - len(one)))
    store.create(SIZE)
    store.close()
    rec.ops.clear()
    again = SegmentStore(tmp_path, SIZE, rec)
    scan = again.recover()
    assert scan.end_offset == SIZE
    # the empty segment at the end is zeroed (and that made durable), then the log below it
    assert rec.kinds("fdatasync") == [("fdatasync", name(SIZE)), ("fdatasync", name(0))]
    rec.ops.clear()
    from types import SimpleNamespace
    take_held(again, SimpleNamespace(scan=SimpleNamespace(end_offset=SIZE, tail_start=SIZE), zero_beyond=False))
    assert {op[1] for op in rec.kinds("fdatasync")} == {name(0)}
    again.close()


def test_a_held_log_in_a_later_segment_is_zeroed_from_its_own_end(tmp_path):
    from types import SimpleNamespace

    store = SegmentStore(tmp_path, SIZE)
    store.write(SIZE, 0, b"\x07" * 100)
    end = SIZE + 60
    take_held(store, SimpleNamespace(scan=SimpleNamespace(end_offset=end, tail_start=SIZE), zero_beyond=True))
    assert store.read(SIZE, 0, 100) == b"\x07" * 60 + bytes(40)
    store.close()


def test_a_failed_directory_fsync_is_retried_before_any_fdatasync_vouches_for_the_file(tmp_path):
    """Found by review (issue 36): the descriptor was kept before the directory fsync, so after
    one that failed, writes and fsyncs went on and the new file's name was never made durable."""

    class DirFails(Recording):
        failures = 1

        def fsync_dir(self, directory):
            if self.failures:
                self.failures -= 1
                self.ops.append(("fsync_dir failed",))
                raise OSError(errno.EIO, "injected: directory fsync")
            super().fsync_dir(directory)

    rec = DirFails()
    store = SegmentStore(tmp_path, SIZE, rec)
    with pytest.raises(OSError, match="directory fsync"):
        store.create(0)
    store.write(0, 0, b"acked")
    rec.ops.clear()
    store.fsync(0, 5)
    assert rec.kinds("fsync_dir", "fdatasync") == [("fsync_dir",), ("fdatasync", name(0))]
    rec.ops.clear()
    store.fsync(0, 5)                                             # durable now: no directory fsync again
    assert rec.kinds("fsync_dir", "fdatasync") == [("fdatasync", name(0))]
    store.close()

    rec = DirFails()
    store = SegmentStore(tmp_path / "r", SIZE, rec)
    with pytest.raises(OSError):
        store.create(0)
    rec.failures = 1
    with pytest.raises(OSError, match="directory fsync"):        # the job fails before any fdatasync
        store.fsync(0, 5)
    assert not rec.kinds("fdatasync")
    rec.ops.clear()
    store._fdatasync(0)                                           # recovery's, on the loop's thread
    assert rec.kinds("fsync_dir", "fdatasync") == [("fsync_dir",), ("fdatasync", name(0))]
    store.close()


def test_a_segment_that_cannot_be_preallocated_is_not_kept_open(tmp_path):
    class NoSpace(Recording):
        def ftruncate(self, path, fd, size):
            raise OSError(errno.ENOSPC, "injected: ftruncate")

    rec = NoSpace()
    store = SegmentStore(tmp_path, SIZE, rec)
    for _ in range(3):
        with pytest.raises(OSError, match="ftruncate"):
            store.write(0, 0, b"x")
    assert not rec.open_fds and not store._fds
    store.close()


def test_an_fsync_job_that_cannot_open_a_segment_leaks_no_descriptor(tmp_path, rec):
    store = SegmentStore(tmp_path, SIZE, rec)
    store.create(0)
    (tmp_path / name(SIZE)).mkdir()                               # the second segment cannot be opened
    with pytest.raises(OSError):
        store.fsync_job(0, SIZE + 1)
    assert rec.open_fds == set(store._fds.values())
    store.close()
