"""The real runtimes' event loop: one thread, one selector (epoll), timers,
framed non-blocking connections, and worker threads for blocking work whose
completions come back to the loop as calls.

No protocol decision is made here: a connection moves bytes and frames, and
knows why it was closed (for the one log line every closed connection gets).
"""

from __future__ import annotations

import errno
import heapq
import itertools
import queue
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable

from reference.frames import FrameDecoder, FrameError, encode

RECV_BYTES = 1 << 20
MAX_CALLS_PER_TURN = 10_000         # completions from workers handled per loop turn
MAX_TIMERS = 1 << 16


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Loop:
    """One thread owns everything registered here; other threads only ``call_soon``."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._calls: deque = deque()
        self._timers: list = []
        self._seq = itertools.count()
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self.stopping = False

    # --- from any thread ---------------------------------------------------------------

    def call_soon(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` on the loop thread (thread-safe).  Every call writes a wake-up byte:
        a flag saying "a byte is pending" races with the loop draining the bytes (a wake-up lost
        that way stalled group commit for the whole select timeout)."""
        self._calls.append((fn, args))
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass                  # the socket is full of wake-up bytes: the loop will wake anyway

    def stop(self) -> None:
        self.stopping = True
        self.call_soon(lambda: None)

    # --- on the loop thread ----------------------------------------------------------------

    def call_at(self, when_ms: int, fn: Callable) -> None:
        assert len(self._timers) < MAX_TIMERS, "timers unbounded"
        heapq.heappush(self._timers, (when_ms, next(self._seq), fn))

    def run_once(self, max_wait_ms: int | None, on_event: Callable) -> None:
        """Wait for sockets (at most until the next timer), hand each ready key to
        ``on_event(key, mask)``, then run the calls from workers and the due timers."""
        timeout_ms = max_wait_ms if max_wait_ms is not None else 1000
        if self._timers:
            timeout_ms = min(timeout_ms, max(0, self._timers[0][0] - now_ms()))
        if self._calls:
            timeout_ms = 0
        for key, mask in self.selector.select(timeout_ms / 1000):
            if key.fileobj is self._wake_r:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
            else:
                on_event(key, mask)
        for _ in range(min(len(self._calls), MAX_CALLS_PER_TURN)):
            fn, args = self._calls.popleft()
            fn(*args)
        now = now_ms()
        while self._timers and self._timers[0][0] <= now:
            _, _, fn = heapq.heappop(self._timers)
            fn()

    def close(self) -> None:
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()


class Conn:
    """A framed, non-blocking TCP connection.  ``read_frames`` returns every whole
    frame one recv brought; ``queue`` appends an encoded frame to the output buffer,
    ``flush`` sends it with one send call (the rest waits for EVENT_WRITE)."""

    def __init__(self, conn_id: int, sock: socket.socket, kind: str, max_frame_bytes: int,
                 max_out_bytes: int, now: int, decode: Callable[[int, bytes], object] | None = None) -> None:
        self.id = conn_id
        self.sock = sock
        self.kind = kind
        self.decoder = FrameDecoder(max_frame_bytes, decode)
        self.out = bytearray()
        self.max_out_bytes = max_out_bytes
        self.last_active_ms = now
        self.closed = False
        self.close_reason: str | None = None
        self.writing = False            # registered for EVENT_WRITE
        try:
            self.peer = "%s:%d" % sock.getpeername()[:2]
        except OSError:
            self.peer = "?"
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def read_frames(self, now: int) -> tuple[list, str | None]:
        """(frames, None), or (frames before the problem, why the connection must close)."""
        try:
            data = self.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return [], None
        except OSError as err:
            return [], f"receive failed: {err.strerror or err}"
        if not data:
            return [], "closed by peer"
        self.last_active_ms = now
        try:
            return self.decoder.feed(data), None
        except FrameError as err:
            return [], f"malformed frame: {err}"

    def queue(self, frame) -> bool:
        """Append a frame; False (and nothing queued) when the peer does not read."""
        return self.queue_bytes(encode(frame))

    def queue_bytes(self, data: bytes) -> bool:
        """Append an encoded frame (see ``queue``)."""
        if self.closed or len(self.out) + len(data) > self.max_out_bytes:
            return False
        self.out += data
        return True

    def flush(self) -> str | None:
        """Send what is buffered (one send); None, or why the connection must close."""
        if not self.out or self.closed:
            return None
        try:
            n = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as err:
            return f"send failed: {err.strerror or err}"
        del self.out[:n]
        return None

    def drain(self, selector: selectors.BaseSelector) -> str | None:
        """``flush``, then watch for EVENT_WRITE exactly while bytes wait; None, or why the
        connection must close."""
        if self.closed:
            return None
        problem = self.flush()
        if problem is not None:
            return problem
        if self.writing != bool(self.out):
            self.writing = bool(self.out)
            selector.modify(self.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out else 0), self)
        return None

    def detach(self, selector: selectors.BaseSelector, reason: str) -> bool:
        """``close`` and forget the socket in ``selector``; True the first time."""
        if not self.close(reason):
            return False
        try:
            selector.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        return True

    def close(self, reason: str) -> bool:
        """Close once; True the first time."""
        if self.closed:
            return False
        self.closed = True
        self.close_reason = reason
        try:
            self.sock.close()
        except OSError:
            pass
        return True


class Worker:
    """A thread for blocking work (fdatasync, reading a segment back): jobs run in
    order, and each result goes back to the loop as ``done(result)`` or
    ``failed(error)`` through ``loop.call_soon``."""

    def __init__(self, loop: Loop, name: str) -> None:
        self.loop = loop
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable, done: Callable, failed: Callable) -> None:
        self._jobs.put((job, done, failed))

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, done, failed = item
            try:
                result = job()
            except OSError as err:
                self.loop.call_soon(failed, err)
                continue
            except Exception as err:      # noqa: BLE001 — never leave the loop waiting for an answer
                self.loop.call_soon(failed, OSError(errno.EIO, f"{type(err).__name__}: {err}"))
                continue
            self.loop.call_soon(done, result)

    def stop(self) -> None:
        self._jobs.put(None)


def listen(host: str, port: int, backlog: int = 512) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as err:
        sock.close()
        raise OSError(err.errno, f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    return sock

