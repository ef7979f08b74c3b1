"""fdatasync without a thread of ours (issue 39): io_uring hands each fsync to the kernel's own
workers and posts its completion to an eventfd that the loop's selector watches.

Why not the worker thread: the thread must be woken for each job and, returning from fdatasync,
take the GIL back from a busy loop before it can hand the result over.  bench goals' timeline at 64
producers (SYNC_FLUSH) measured that wake-up at about 0.3 ms a request and the hand-back at 0.07 ms;
through the ring they are a submission (0.02 ms) and nothing.  The fsync itself, until the loop
learns it ended, stays about twice the disk's idle fdatasync under that load on two cores: the kernel
worker waits for a core, and the loop reaps it between two puts.

The liburing package (the C library's Python binding, maintained, a manylinux wheel) is used
rather than raw syscalls through ctypes: its ring set-up and its SQ/CQ accounting are what
getting io_uring right takes.  Where io_uring is missing (an old kernel, a seccomp profile,
``kernel.io_uring_disabled``) ``FsyncRing`` raises ``RingUnavailable`` and the runtime keeps
its thread; a ring that fails a submission closes and says so the same way.  Nothing here decides
anything: a job is the fds the store named, done or failed.
"""

from __future__ import annotations

import errno
import select
import time
import os
from collections.abc import Callable

try:
    import liburing
except ImportError:         # not installed: the thread it is
    liburing = None

RING_ENTRIES = 64            # submission queue slots; a job is one fsync per segment it spans
MAX_JOBS = 1024              # the cores keep one fsync in flight; this bounds a runtime's misuse
CLOSE_WAIT_S = 10.0          # how long a closing role waits for the fsyncs in flight


class RingUnavailable(OSError):
    """io_uring cannot be used here (why, in the message)."""


class _Job:
    __slots__ = ("fds", "remaining", "error", "done", "failed")

    def __init__(self, fds: list[int], done: Callable[[], None], failed: Callable[[OSError], None]) -> None:
        self.fds = fds
        self.remaining = len(fds)
        self.error: OSError | None = None
        self.done = done
        self.failed = failed


class FsyncRing:
    """One ring per runtime role, on its loop's thread only."""

    def __init__(self, loop) -> None:
        if liburing is None:
            raise RingUnavailable(errno.ENOSYS, "the liburing package is not installed")
        self.loop = loop
        self.ring = liburing.Ring()
        self._cqe = liburing.Cqe()
        try:
            rc = liburing.io_uring_queue_init(RING_ENTRIES, self.ring, 0)
        except OSError as err:      # the binding raises what the syscall returned
            raise RingUnavailable(err.errno or errno.ENOSYS, f"io_uring_setup: {err}") from None
        if rc < 0:
            raise RingUnavailable(-rc, f"io_uring_setup: {os.strerror(-rc)}")
        self.efd = -1
        try:
            self.efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            rc = liburing.io_uring_register_eventfd(self.ring, self.efd)
            if rc < 0:
                raise OSError(-rc, os.strerror(-rc))
        except OSError as err:
            if self.efd >= 0:
                os.close(self.efd)
            liburing.io_uring_queue_exit(self.ring)
            raise RingUnavailable(err.errno or errno.EIO, f"io_uring_register_eventfd: {err}") from None
        self._jobs: dict[int, _Job] = {}
        self._next_id = 1
        self.closed = False
        loop.add_reader(self.efd, self._reap, "fsync-ring")

    def submit(self, fds: list[int], datasync: list[bool], done: Callable[[], None],
               failed: Callable[[OSError], None]) -> None:
        """fsync every fd (fdatasync where ``datasync``), all at once; ``done()`` once every one
        succeeded, else ``failed(the first error)``; the fds are closed when they all finished.

        RingUnavailable: the ring could not take the job (a failed or short submission, no room).
        Nothing of the job runs then: the ring is closed here, so that no entry it queued can be
        sent later against descriptors it no longer owns, and the fds stay the caller's."""
        assert fds and len(fds) == len(datasync) and not self.closed
        assert len(fds) <= RING_ENTRIES and len(self._jobs) < MAX_JOBS, (len(fds), len(self._jobs))
        for fd, data_only in zip(fds, datasync):
            sqe = liburing.io_uring_get_sqe(self.ring)
            if sqe is None:
                self._broken(errno.EBUSY, "the submission queue is full")
            liburing.io_uring_prep_fsync(sqe, fd, liburing.IORING_FSYNC_DATASYNC if data_only else 0)
            sqe.user_data = job_id = self._next_id
        try:
            rc = liburing.io_uring_submit(self.ring)
        except OSError as err:
            rc = -(err.errno or errno.EIO)
        if rc != len(fds):
            if rc > 0:       # the kernel took some: the close waits for them before the caller closes the fds
                taken = _Job([], lambda: None, lambda err: None)
                taken.remaining = rc
                self._jobs[job_id] = taken
                self._next_id += 1
            self._broken(-rc if rc < 0 else errno.EAGAIN,
                         f"io_uring_submit: {os.strerror(-rc) if rc < 0 else f'{rc} of {len(fds)} submitted'}")
        self._jobs[job_id] = _Job(fds, done, failed)
        self._next_id += 1

    def _broken(self, code: int, why: str) -> None:
        self.close(answer_later=True)
        raise RingUnavailable(code, why)

    def ready(self) -> bool:
        """A completion waits (a read of the ring's shared memory, no system call): a busy loop
        asks between two puts rather than learn it at its next select."""
        return not self.closed and liburing.io_uring_cq_ready(self.ring) > 0

    def reap(self) -> None:
        self._reap()

    def _reap(self, answer: str = "now") -> None:
        """The eventfd is readable: every completion so far, each answered once its job is whole
        ("now"; at a close: "later", on the loop's next turn, when a failed submission closes the ring
        under a runtime that goes on; "never", when the role itself closes)."""
        if self.closed:
            return
        try:
            os.eventfd_read(self.efd)
        except BlockingIOError:
            pass
        for _ in range(RING_ENTRIES * 4):
            if not self._peek():
                return
            cqe = self._cqe[0]
            job_id = cqe.user_data
            try:
                res = cqe.res
            except OSError as err:          # the binding raises a negative result rather than return it
                res = -(err.errno or errno.EIO)
            liburing.io_uring_cqe_seen(self.ring, cqe)
            job = self._jobs.get(job_id)
            if job is None and answer != "now":
                continue                        # (closing after a short submission: what it could not count)
            assert job is not None, job_id     # a job (or what the kernel took of one) leaves with its last
            if res < 0 and job.error is None:
                job.error = OSError(-res, f"fdatasync: {os.strerror(-res)}")
            job.remaining -= 1
            if job.remaining == 0:
                del self._jobs[job_id]
                self._close_fds(job)
                if answer == "never":
                    continue
                call, arg = (job.failed, (job.error,)) if job.error is not None else (job.done, ())
                if answer == "later":
                    self.loop.call_soon(call, *arg)
                    continue
                call(*arg)
                if self.closed:                 # the answer closed the role
                    return
        if answer == "now":
            self.loop.call_soon(self._reap)     # more than a pass's worth: the rest on the next turn

    def _peek(self) -> bool:
        """A completion waits in ``self._cqe`` (the binding raises EAGAIN for an empty queue)."""
        try:
            return liburing.io_uring_peek_cqe(self.ring, self._cqe) == 0
        except BlockingIOError:
            return False

    @staticmethod
    def _close_fds(job: _Job) -> None:
        for fd in job.fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self, answer_later: bool = False) -> None:
        """Stop watching, once the jobs in flight have finished (tearing the ring down would
        cancel an fsync the kernel has not started, a directory's among them: the next role of a
        node takes the log as flushed).  They are not answered when the role is closing; they are, on
        the loop's next turn, when a failed submission closes the ring (``answer_later``)."""
        if self.closed:
            return
        deadline = time.monotonic() + CLOSE_WAIT_S
        in_flight = len(self._jobs)
        while self._jobs and time.monotonic() < deadline:
            select.select([self.efd], [], [], 0.05)
            self._reap("later" if answer_later else "never")
        self.finished_at_close = in_flight - len(self._jobs)
        self.closed = True
        self.loop.remove_reader(self.efd)
        liburing.io_uring_queue_exit(self.ring)
        for job in self._jobs.values():         # (past the wait: the kernel holds its own references)
            self._close_fds(job)
        self._jobs.clear()
        os.close(self.efd)
