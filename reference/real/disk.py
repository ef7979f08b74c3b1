"""Segment files on a real filesystem: pwrite into the page cache,
fdatasync to make it durable, and the recovery read.

Files are named by their start offset, 20 digits, as RocketMQ names its
commit-log files; each is preallocated to the segment size.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from reference.record import RecoveryReport, recover_log

NAME_DIGITS = 20
WRITE_FAULTS = ("eio", "enospc", "short")


class ShortWrite(OSError):
    """pwrite copied only ``written`` of the bytes (then the disk failed)."""

    def __init__(self, written: int, message: str) -> None:
        super().__init__(errno.EIO, message)
        self.written = written


class SegmentStore:
    def __init__(self, directory: Path, segment_size: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segment_size = segment_size
        self._fds: dict[int, int] = {}
        self.fail_fsync_after: int | None = None    # fault tests: fsyncs after this many raise EIO
        self.fail_write_after: int | None = None    # fault tests: writes after this many fail...
        self.fail_write_kind = "eio"                # ...with EIO, ENOSPC, or a short write
        self._fsyncs_done = 0
        self._writes_done = 0

    def path(self, start: int) -> Path:
        return self.dir / f"{start:0{NAME_DIGITS}d}"

    def _fd(self, start: int) -> int:
        fd = self._fds.get(start)
        if fd is None:
            fd = os.open(self.path(start), os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(fd).st_size < self.segment_size:
                os.ftruncate(fd, self.segment_size)
            self._fds[start] = fd
        return fd

    def create(self, start: int) -> None:
        self._fd(start)

    def write(self, start: int, position: int, data: bytes) -> None:
        """pwrite; raises OSError (ShortWrite when some bytes were copied) on failure."""
        assert position + len(data) <= self.segment_size
        if self.fail_write_after is not None and self._writes_done >= self.fail_write_after:
            self._injected_write_fault(start, position, data)
        self._writes_done += 1
        written = os.pwrite(self._fd(start), data, position)
        if written != len(data):
            raise ShortWrite(written, f"short write to segment {start}: {written} of {len(data)} bytes")

    def _injected_write_fault(self, start: int, position: int, data: bytes) -> None:
        if self.fail_write_kind == "enospc":
            raise OSError(errno.ENOSPC, "injected fault: pwrite failed with ENOSPC")
        if self.fail_write_kind == "short" and len(data) > 1:
            written = os.pwrite(self._fd(start), data[: len(data) // 2], position)
            raise ShortWrite(written, f"injected fault: short write, {written} of {len(data)} bytes")
        raise OSError(errno.EIO, "injected fault: pwrite failed with EIO")

    def read(self, start: int, position: int, length: int) -> bytes:
        if not self.path(start).exists():
            return bytes(length)
        return os.pread(self._fd(start), length, position).ljust(length, b"\0")

    def fsync(self, start: int, upto: int) -> None:
        """fdatasync every segment from ``start`` that holds bytes below ``upto``."""
        if self.fail_fsync_after is not None and self._fsyncs_done >= self.fail_fsync_after:
            raise OSError(errno.EIO, "injected fault: fdatasync failed with EIO")
        self._fsyncs_done += 1
        seg = start
        while seg < upto:
            os.fdatasync(self._fd(seg))
            seg += self.segment_size

    def zero_tail(self, start: int, position: int) -> None:
        """Recovery: zero a segment from ``position`` and delete every later segment."""
        if self.path(start).exists() and position < self.segment_size:
            self.write(start, position, bytes(self.segment_size - position))
            os.fdatasync(self._fd(start))
        for later in [s for s in self.segments() if s > start]:
            fd = self._fds.pop(later, None)
            if fd is not None:
                os.close(fd)
            self.path(later).unlink()
        self._fsync_dir()

    def _fsync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def segments(self) -> list[int]:
        out = []
        for p in self.dir.iterdir():
            if p.name.isdigit() and len(p.name) == NAME_DIGITS:
                out.append(int(p.name))
        return sorted(out)

    def read_all(self) -> dict[int, bytes]:
        out = {}
        for start in self.segments():
            data = self.path(start).read_bytes()
            if len(data) != self.segment_size:
                data = data[: self.segment_size].ljust(self.segment_size, b"\0")
            out[start] = data
        return out

    def recover(self, keep_torn: bool = False) -> tuple[RecoveryReport, dict[int, bytes]]:
        """CRC recovery: scan, truncate at the first bad record (zeroing what
        follows, so it cannot come back), and fsync what is kept."""
        data = self.read_all()
        report = recover_log(data, self.segment_size, keep_torn)
        end = report.end_offset
        self.zero_tail(end - end % self.segment_size, end % self.segment_size)
        for start in self.segments():
            if start < end:
                os.fdatasync(self._fd(start))
        return report, data

    def machine_crash(self, cut: int) -> None:
        raise NotImplementedError("a real disk cannot lose power on demand; use the simulator")

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
