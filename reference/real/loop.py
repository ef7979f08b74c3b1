"""The real runtimes' event loop: one thread, one selector (epoll), timers,
framed non-blocking connections, and worker threads for blocking work whose
completions come back to the loop as calls.

No protocol decision is made here: a connection moves bytes and frames, and
knows why it was closed (for the one log line every closed connection gets).
"""

from __future__ import annotations

import concurrent.futures
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

from reference.frames import FrameDecoder, FrameError, decode_frame, encode
from reference.real.guard import FrameGuard
from reference.real.peerauth import AuthError, AuthFrame, ClientAuth, ServerAuth, auth_aware, unexpected
from spec.config import ConfigError

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
        self.closed = False          # as RoleLoop's: a runtime's turn ends once its loop is closed

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

    def add_reader(self, fd: int, fn: Callable[[], None], name: str) -> None:
        """Call ``fn()`` on the loop thread whenever ``fd`` is readable (an eventfd's completions)."""
        self.selector.register(fd, selectors.EVENT_READ, _Reader(fn, name))

    def remove_reader(self, fd: int) -> None:
        try:
            self.selector.unregister(fd)
        except (KeyError, ValueError, OSError):
            pass

    def call_at(self, when_ms: float, fn: Callable) -> None:
        # An invariant: the runtimes keep a fixed set of timers, plus one per DATA frame delayed by
        # fault injection (--inject-ha-lag-ms), which the HA send window bounds.
        assert len(self._timers) < MAX_TIMERS, "more timers than the runtimes set"
        heapq.heappush(self._timers, (when_ms, next(self._seq), fn))

    def run_once(self, max_wait_ms: int | None, on_event: Callable) -> None:
        """Wait for sockets (at most until the next timer), hand each ready key to
        ``on_event(key, mask)``, then run the calls from workers and the due timers."""
        timeout_ms = max_wait_ms if max_wait_ms is not None else 1000
        if self._timers:     # (a timer may be due at a fraction of a ms: the injected HA and ACK lags are exact)
            timeout_ms = min(timeout_ms, max(0, self._timers[0][0] - time.monotonic_ns() / 1e6))
        if self._calls:
            timeout_ms = 0
        for key, mask in self.selector.select(timeout_ms / 1000):
            if key.fileobj is self._wake_r:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
            elif isinstance(key.data, _Reader):
                key.data.fn()
            else:
                on_event(key, mask)
        for _ in range(min(len(self._calls), MAX_CALLS_PER_TURN)):
            fn, args = self._calls.popleft()
            fn(*args)
        now = time.monotonic_ns() / 1e6       # for a whole-ms timer the same as now_ms() <= t
        while self._timers and self._timers[0][0] <= now:
            _, _, fn = heapq.heappop(self._timers)
            fn()

    def close(self) -> None:
        self.closed = True
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()


class _Reader:
    __slots__ = ("fn", "name")

    def __init__(self, fn: Callable[[], None], name: str) -> None:
        self.fn = fn
        self.name = name

    def __str__(self) -> str:
        return self.name


def submit(loop, fn: Callable[[], object]) -> concurrent.futures.Future:
    """Run ``fn()`` on ``loop``'s thread, between two turns; its result (or error) in the future."""
    fut: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        # a caller that stopped waiting may have cancelled it (asyncio.wait_for over wrap_future): then it
        # is not run, and nothing answers it; answering a cancelled future raises InvalidStateError on the
        # loop thread, which stopped a node's loop for good (issue 38: a pause made a heartbeat's report
        # wait past its timeout)
        if not fut.set_running_or_notify_cancel():
            return
        try:
            result = fn()
        except BaseException as err:        # handed to the caller, re-raised there
            fut.set_exception(err)
            return
        fut.set_result(result)
    loop.call_soon(run)
    return fut


def call_and_wait(loop, fn: Callable[[], object], timeout_s: float) -> object:
    """``submit`` and wait: another thread's way to read or change a core."""
    return submit(loop, fn).result(timeout_s)


class RoleLoop:
    """A role's view of its process's Loop (`broker node`: one loop through every role change):
    the same selector and thread, but the role's timers and calls die with it — a timer a closed
    role set, or a worker's answer to it, finds it closed and does nothing — and closing it
    leaves the process's loop running."""

    def __init__(self, loop: Loop) -> None:
        self._loop = loop
        self.selector = loop.selector
        self.closed = False

    @property
    def stopping(self) -> bool:
        return self._loop.stopping or self.closed

    def _guarded(self, fn: Callable, *args) -> Callable:
        def run() -> None:
            if not self.closed:
                fn(*args)
        return run

    def call_soon(self, fn: Callable, *args) -> None:
        self._loop.call_soon(self._guarded(fn, *args))

    def call_at(self, when_ms: float, fn: Callable) -> None:
        self._loop.call_at(when_ms, self._guarded(fn))

    def run_once(self, max_wait_ms: int | None, on_event: Callable) -> None:
        self._loop.run_once(max_wait_ms, on_event)

    def add_reader(self, fd: int, fn: Callable[[], None], name: str) -> None:
        self._loop.add_reader(fd, self._guarded(fn), name)

    def remove_reader(self, fd: int) -> None:
        self._loop.remove_reader(fd)

    def stop(self) -> None:
        self._loop.stop()

    def close(self) -> None:
        self.closed = True


class Conn:
    """A framed, non-blocking TCP connection.  ``read_frames`` returns every whole
    frame one recv brought; ``queue`` appends an encoded frame to the output buffer,
    ``flush`` sends it with one send call (the rest waits for EVENT_WRITE)."""

    def __init__(self, conn_id: int, sock: socket.socket, kind: str, max_frame_bytes: int,
                 max_out_bytes: int, now: int, decode: Callable[[int, bytes], object] | None = None,
                 peer: tuple | None = None, auth: ServerAuth | ClientAuth | None = None,
                 auth_port: bool = False) -> None:
        self.id = conn_id
        self.sock = sock
        self.kind = kind
        # A port that may authenticate its peers (HA, controller) passes the authentication frames
        # through, so a peer that authenticates and one that does not are each told what is wrong.
        self.auth_port = auth_port or auth is not None
        self.decoder = FrameDecoder(max_frame_bytes, auth_aware(decode or decode_frame) if self.auth_port else decode)
        self.out = bytearray()
        self.sent_bytes = 0          # all it ever sent (a timeline knows when a queued frame left)
        self.auth = auth
        self.auth_failed = False        # the peer failed to authenticate (or would not)
        self._held = bytearray()        # a client's frames queued before it authenticated
        if isinstance(auth, ClientAuth):
            self.out += auth.hello()
        self.max_out_bytes = max_out_bytes
        self.last_active_ms = now
        self.closed = False
        self.close_reason: str | None = None
        self.writing = False            # registered for EVENT_WRITE
        # accept() says who it was even when the peer has already reset the connection
        # (getpeername() then fails: a reset with linger 0 was logged as "from ?")
        if peer is None:
            try:
                peer = sock.getpeername()
            except OSError:
                peer = None
        self.peer = "%s:%d" % peer[:2] if peer else "?"
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def read_frames(self, now: int) -> tuple[list, str | None]:
        """(frames, None), or (frames before the problem, why the connection must close)."""
        try:
            data = self.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return [], None
        except OSError as err:
            return [], f"receive failed: {err.strerror or err}{self._unfinished()}"
        if not data:
            return [], f"closed by peer{self._unfinished()}"
        self.last_active_ms = now
        try:
            frames = self.decoder.feed(data)
        except FrameError as err:
            return [], f"malformed frame: {err}"
        if self.auth_port:
            return self._authenticate(frames)
        return frames, None

    def _authenticate(self, frames: list) -> tuple[list, str | None]:
        """Take the authentication frames off the front (answering them), pass the rest on."""
        auth, passed = self.auth, []
        for frame in frames:
            if auth is not None and not auth.done:
                try:
                    reply = auth.receive(frame)
                except AuthError as err:
                    self.auth_failed = True
                    return passed, str(err)
                if reply:
                    self.out += reply
                if auth.done and self._held:
                    self.out += self._held
                    self._held.clear()
            elif isinstance(frame, AuthFrame):
                self.auth_failed = True
                return passed, unexpected(frame)
            else:
                passed.append(frame)
        return passed, None

    def _unfinished(self) -> str:
        n = self.decoder.buffered
        where = f" inside a frame ({n} bytes of an unfinished frame discarded)" if n else ""
        if self.auth is not None and not self.auth.done:
            where += " before it authenticated"
        return where

    def queue(self, frame) -> bool:
        """Append a frame; False (and nothing queued) when the peer does not read."""
        return self.queue_bytes(encode(frame))

    def queue_bytes(self, data: bytes) -> bool:
        """Append an encoded frame (see ``queue``)."""
        if self.closed or len(self.out) + len(self._held) + len(data) > self.max_out_bytes:
            return False
        if isinstance(self.auth, ClientAuth) and not self.auth.done:
            self._held += data
        else:
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
        self.sent_bytes += n
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


class ConnServer:
    """What every server runtime does with the connections it accepts, the same way: the
    connection limit (where a newcomer takes the place of a peer whose frame is long
    unfinished), the idle timeout, and the FrameGuard's deadline and budget for unfinished
    frames (reference/real/guard.py).  Each bound closes a connection with one log line
    naming the peer and the bound; none stops the process.

    A subclass sets ``loop``, ``log``, ``conns``, ``guard``, ``max_connections`` and
    ``idle_timeout_ms`` (and ``peer_secret`` for a port that authenticates its peers), keeps
    ``_dirty`` (the connections to send to at the end of the turn), and implements
    ``_close(conn, reason)``, which must call ``self.guard.forget(conn.id)``."""

    loop: Loop
    log: Callable[[str], None]
    conns: dict[int, Conn]
    guard: FrameGuard
    max_connections: int
    idle_timeout_ms: int
    peer_secret: bytes | None = None   # the HA or controller port authenticates its peers with it
    _dirty: set[Conn]

    def _server_auth(self, service: str) -> ServerAuth | None:
        return ServerAuth(self.peer_secret, service) if self.peer_secret is not None else None

    def _close(self, conn: Conn, reason: str) -> None:
        raise NotImplementedError

    def _accepted(self, listener: socket.socket, kind: str, per_turn: int):
        """The connections ``listener`` has for us this turn: (socket, address) pairs within the limit."""
        for _ in range(per_turn):
            try:
                sock, addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:          # EMFILE and friends: say so, keep serving
                self.log(f"accept on the {kind} port failed: {err}")
                return
            if len(self.conns) >= self.max_connections:
                victim = self.guard.evictable(now_ms(), self.max_connections)
                if victim is None or victim[0] not in self.conns:
                    self.log(f"{kind} connection from {addr[0]}:{addr[1]} refused: the connection limit "
                             f"({self.max_connections}) is reached")
                    sock.close()
                    continue
                self._close(self.conns[victim[0]], victim[1])
            yield sock, addr

    def _receive(self, conn: Conn, now: int) -> tuple[list, str | None]:
        """``conn.read_frames``, then the FrameGuard's budget: the connections it closes (perhaps
        this one, if its unfinished frame is the oldest) are closed here."""
        frames, problem = conn.read_frames(now)
        if conn.out:                    # an authentication frame answered
            self._dirty.add(conn)
        if problem is None:
            for victim, reason in self.guard.fed(conn.id, conn.decoder.buffered, bool(frames), now):
                if (v := self.conns.get(victim)) is not None:
                    self._close(v, reason)
        return frames, problem

    def _housekeep(self, now: int) -> None:
        """Close the connections idle for longer than the limit, and those whose frame is overdue."""
        limit = self.idle_timeout_ms
        for conn in [c for c in self.conns.values() if now - c.last_active_ms > limit]:
            self._close(conn, f"idle for {now - conn.last_active_ms} ms (the limit is {limit} ms)")
        for victim, reason in self.guard.overdue(now):
            if (conn := self.conns.get(victim)) is not None:
                self._close(conn, reason)


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


DESCRIPTORS_BESIDE_CONNECTIONS = 64    # segment files, listeners, the wake-up pair, workers


def reserve_descriptors(connections: int, flag: str = "--max-connections") -> None:
    """Make sure this process may hold ``connections`` sockets beside its files: raise the soft
    limit on open files as far as the hard limit allows, or refuse the option (an accept that
    fails with EMFILE at the limit would be a bound nobody chose)."""
    import resource

    need = connections + DESCRIPTORS_BESIDE_CONNECTIONS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise ConfigError(f"{flag} {connections}: this process may open only {hard} files (ulimit -Hn), "
                              f"{need} are needed; lower {flag} or raise the limit")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


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

