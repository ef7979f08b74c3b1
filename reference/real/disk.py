"""Segment files on a real filesystem: pwrite into the page cache,
fdatasync to make it durable, reading a segment back, and the recovery scan.

Files are named by their start offset, 20 digits, as RocketMQ names its
commit-log files; each is preallocated to the segment size, and the
directory is fsync'd when one is created or removed (a new file's name is
not durable before that).  Every file operation goes through ``FileOps``
(create, pwrite, ftruncate, fdatasync, rename, unlink, the directory fsync),
so a recorder can sit under the store (reference/real/powerloss.py) and the
crash states a power loss may leave can be rebuilt from what it saw.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from reference.record import CHAIN_START, Checkpoint, LogScan, OnRecord, scan_log
from spec.config import ascii_digits

NAME_DIGITS = 20
WRITE_FAULTS = ("eio", "enospc", "short")
MAX_OPEN_SEGMENTS = 16      # descriptors kept open (the newest segments); jobs use their own dup


class ShortWrite(OSError):
    """pwrite copied only ``written`` of the bytes (then the disk failed)."""

    def __init__(self, written: int, message: str) -> None:
        super().__init__(errno.EIO, message)
        self.written = written


class FileOps:
    """The store's file operations on the real filesystem (one method per kind)."""

    def open(self, path: Path) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def ftruncate(self, path: Path, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def pwrite(self, path: Path, fd: int, data, position: int) -> int:
        return os.pwrite(fd, data, position)

    def pread(self, fd: int, length: int, position: int) -> bytes:
        return os.pread(fd, length, position)

    def fdatasync(self, path: Path, fd: int) -> None:
        os.fdatasync(fd)

    def rename(self, src: Path, dst: Path) -> None:
        os.rename(src, dst)

    def unlink(self, path: Path) -> None:
        path.unlink()

    def fsync_dir(self, directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def dup(self, fd: int) -> int:
        return os.dup(fd)


class SegmentStore:
    def __init__(self, directory: Path, segment_size: int, ops: FileOps | None = None) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        if not os.access(self.dir, os.W_OK):
            raise PermissionError(errno.EACCES, f"data directory {self.dir} is not writable")
        self.segment_size = segment_size
        self.ops = ops or FileOps()
        self._fds: dict[int, int] = {}
        self.fail_fsync_after: int | None = None    # fault tests: fsyncs after this many raise EIO
        self.fail_write_after: int | None = None    # fault tests: writes after this many fail...
        self.fail_write_kind = "eio"                # ...with EIO, ENOSPC, or a short write
        self._fsyncs_done = 0
        self._writes_done = 0
        # Segments created whose names no directory fsync has made durable yet (one that failed is
        # retried before any fdatasync that would vouch for the file's bytes).  The flush thread
        # removes what its job's directory fsync covered; set operations are atomic under the GIL.
        self._names_pending: set[int] = set()
        self.closed = False

    def path(self, start: int) -> Path:
        return self.dir / f"{start:0{NAME_DIGITS}d}"

    def _fd(self, start: int) -> int:
        fd = self._fds.get(start)
        if fd is None:
            if self.closed:           # a closed role's late work (a role change): it must not touch the log
                raise OSError(errno.EBADF, f"the store of {self.dir} is closed")
            path = self.path(start)
            existed = path.exists()
            fd = self.ops.open(path)
            try:
                if self.ops.size(fd) < self.segment_size:
                    self.ops.ftruncate(path, fd, self.segment_size)
            except OSError:
                self.ops.close(fd)                # not kept: the next use opens it again
                raise
            self._fds[start] = fd
            if not existed:
                self._names_pending.add(start)
                self._sync_names()                # the new file's name is durable from here
            excess = len(self._fds) - MAX_OPEN_SEGMENTS
            if excess > 0:        # (a negative slice bound would close all but the newest few)
                for old in [s for s in sorted(self._fds) if s != start][:excess]:
                    self.ops.close(self._fds.pop(old))
            assert len(self._fds) <= MAX_OPEN_SEGMENTS
        return fd

    def _sync_names(self) -> None:
        """fsync the directory if a segment's name is not yet durable (on the loop's thread)."""
        if self._names_pending:
            pending = set(self._names_pending)
            self.ops.fsync_dir(self.dir)
            self._names_pending -= pending

    def create(self, start: int) -> None:
        self._fd(start)

    def write(self, start: int, position: int, data) -> None:
        """pwrite; raises OSError (ShortWrite when some bytes were copied) on failure."""
        assert position + len(data) <= self.segment_size
        if self.fail_write_after is not None and self._writes_done >= self.fail_write_after:
            self._injected_write_fault(start, position, data)
        self._writes_done += 1
        written = self.ops.pwrite(self.path(start), self._fd(start), data, position)
        if written != len(data):
            raise ShortWrite(written, f"short write to segment {start}: {written} of {len(data)} bytes")

    def _injected_write_fault(self, start: int, position: int, data) -> None:
        if self.fail_write_kind == "enospc":
            raise OSError(errno.ENOSPC, "injected fault: pwrite failed with ENOSPC")
        if self.fail_write_kind == "short" and len(data) > 1:
            written = self.ops.pwrite(self.path(start), self._fd(start), data[: len(data) // 2], position)
            raise ShortWrite(written, f"injected fault: short write, {written} of {len(data)} bytes")
        raise OSError(errno.EIO, "injected fault: pwrite failed with EIO")

    def read(self, start: int, position: int, length: int) -> bytes:
        if start not in self._fds and not self.path(start).exists():
            return bytes(length)
        return self.ops.pread(self._fd(start), length, position).ljust(length, b"\0")

    def read_segment_job(self, start: int):
        """A job for a worker thread: the whole segment as the page cache holds it (the
        file descriptor is opened here, on the loop's thread)."""
        fd = self.ops.dup(self._fd(start))
        size, ops = self.segment_size, self.ops

        def job() -> bytes:
            try:
                return ops.pread(fd, size, 0).ljust(size, b"\0")
            finally:
                ops.close(fd)
        return job

    def _fsync_plan(self, start: int, upto: int) -> tuple[list[tuple[Path, int]], set[int], bool]:
        """What one flush must make durable: a dup of every segment from ``start`` that holds bytes
        below ``upto`` (resolved on the loop's thread), the segment names not yet durable, and
        whether the injected fault fails it."""
        targets = []
        seg = start
        try:
            while seg < upto:
                targets.append((self.path(seg), self.ops.dup(self._fd(seg))))
                seg += self.segment_size
        except OSError:
            for _, fd in targets:
                self.ops.close(fd)
            raise
        fail = self.fail_fsync_after is not None and self._fsyncs_done >= self.fail_fsync_after
        self._fsyncs_done += 1
        return targets, set(self._names_pending), fail

    def fsync_job(self, start: int, upto: int):
        """A job for the flush thread: fdatasync every segment from ``start`` that holds
        bytes below ``upto`` (descriptors resolved here, on the loop's thread)."""
        targets, names, fail = self._fsync_plan(start, upto)
        ops, directory = self.ops, self.dir

        def job() -> int:
            try:
                if fail:
                    raise OSError(errno.EIO, "injected fault: fdatasync failed with EIO")
                if names:                 # a file whose name is not durable: its bytes are not either
                    ops.fsync_dir(directory)
                    self._names_pending -= names
                for path, fd in targets:
                    ops.fdatasync(path, fd)
            finally:
                for _, fd in targets:
                    ops.close(fd)
            return upto
        return job

    def fsync_on_ring(self, ring, start: int, upto: int, done: Callable[[int], None],
                      failed: Callable[[OSError], None]) -> None:
        """The same flush as ``fsync_job``'s, through an io_uring (reference/real/uring.py): the
        directory (when a name is not durable yet) and every segment synced at once, ``done(upto)``
        once all of them are.  Only for the plain FileOps: a test's ops see every fdatasync."""
        assert type(self.ops) is FileOps
        targets, names, fail = self._fsync_plan(start, upto)
        fds = [fd for _, fd in targets]
        if fail:
            for fd in fds:
                self.ops.close(fd)
            ring.loop.call_soon(failed, OSError(errno.EIO, "injected fault: fdatasync failed with EIO"))
            return
        datasync = [True] * len(fds)
        if names:
            try:
                fds.append(os.open(self.dir, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                for fd in fds:
                    self.ops.close(fd)
                raise
            datasync.append(False)

        def synced() -> None:
            self._names_pending -= names
            done(upto)
        try:
            ring.submit(fds, datasync, synced, failed)
        except OSError:                  # the ring took none of it (and closed): the caller's thread will
            for fd in fds:
                self.ops.close(fd)
            self._fsyncs_done -= 1       # (the same flush, planned again: the injected fault counts it once)
            raise

    def fsync(self, start: int, upto: int) -> None:
        """fdatasync every segment from ``start`` that holds bytes below ``upto``."""
        self.fsync_job(start, upto)()

    def zero_tail(self, start: int, position: int) -> None:
        """Recovery: zero a segment from ``position`` and delete every later segment."""
        if self.path(start).exists() and position < self.segment_size:
            self.write(start, position, bytes(self.segment_size - position))
            self._fdatasync(start)
        later = [s for s in self.segments() if s > start]
        for s in later:
            self._names_pending.discard(s)
            fd = self._fds.pop(s, None)
            if fd is not None:
                self.ops.close(fd)
            self.ops.unlink(self.path(s))
        if later:
            self.ops.fsync_dir(self.dir)

    def segments(self) -> list[int]:
        out = []
        for p in self.dir.iterdir():
            if ascii_digits(p.name) and len(p.name) == NAME_DIGITS:
                out.append(int(p.name))
        return sorted(out)

    def _read_whole(self, start: int) -> bytes:
        fd = self._fd(start)
        return self.ops.pread(fd, self.segment_size, 0).ljust(self.segment_size, b"\0")

    def read_all(self) -> dict[int, bytes]:
        """Every segment in memory (tests and tools only; recovery reads one at a time)."""
        return {start: self._read_whole(start) for start in self.segments()}

    def recover(self, keep_torn: bool = False, on_record: OnRecord | None = None,
                on_resume: Callable[[Checkpoint], None] | None = None) -> LogScan:
        """CRC recovery, one segment in memory at a time: scan, truncate at the first bad
        record (zeroing what follows, so it cannot come back), and fsync what is kept.
        Always from the first segment (``on_resume``, as for the simulated disk, hears so)."""
        if on_resume is not None:
            on_resume(Checkpoint(0, 0, CHAIN_START))
        for start in self.segments():
            if not self.path(start).is_file():
                raise IsADirectoryError(errno.EISDIR, f"{self.path(start)} is not a regular file")
        scan = scan_log(self.segments(), self._read_whole, self.segment_size, keep_torn, on_record)
        end = scan.end_offset
        self.zero_tail(end - end % self.segment_size, end % self.segment_size)
        for start in self.segments():
            if start < end:
                self._fdatasync(start)
        return scan

    def _fdatasync(self, start: int) -> None:
        """An fdatasync on the loop's thread (recovery), counted by the fault injection."""
        if self.fail_fsync_after is not None and self._fsyncs_done >= self.fail_fsync_after:
            raise OSError(errno.EIO, f"fdatasync of {self.path(start)} failed with EIO (injected fault)")
        self._fsyncs_done += 1
        fd = self._fd(start)
        self._sync_names()
        self.ops.fdatasync(self.path(start), fd)

    def close(self) -> None:
        self.closed = True
        for fd in self._fds.values():
            self.ops.close(fd)
        self._fds.clear()


def take_held(store: SegmentStore, held) -> LogScan:
    """A role change within one process (reference/failover/broker.py ``HeldLog``): the log the
    previous role held, taken as it is — no CRC scan — and left as recovery leaves a log.  What
    lies on disk beyond its end (a partial record a slave was receiving, a write that failed, a
    segment made ahead) is zeroed and later segments deleted, and every segment below the end is
    fdatasynced: the next role counts the whole log flushed (a promoted slave's pages may not be:
    its fsync is timer-driven), and a hole left by a power loss must not cut what it acknowledges."""
    scan = held.scan
    end = scan.end_offset
    if held.zero_beyond:
        store.zero_tail(scan.tail_start, end - scan.tail_start)
    for start in store.segments():
        if start < end:
            store._fdatasync(start)
    return scan
