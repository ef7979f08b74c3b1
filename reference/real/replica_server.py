"""The real slave: ReplicaCore driven by one event loop over its segment files
and one TCP connection to the master's HA port.  It reconnects (with a
handshake) whenever the link drops, reports on a heartbeat timer, and
fdatasyncs its own files on a flush thread (its acks are page-cache acks, as
a RocketMQ slave's are).  Every decision is the core's."""

from __future__ import annotations

import errno
import selectors
import signal
import socket
import time
from collections import deque
from collections.abc import Callable

from pathlib import Path

import attrs

from reference import effects as fx
from reference.failover import broker_effects as bfx
from reference.failover.epochfile import EpochFileCache
from reference.failover.follower import FollowerCore
from reference.frames import Ack, Data, EpochQuery, EpochReply, Handshake, Refuse
from reference.master import DISCARD
from reference.failover.broker import HeldLog
from reference.real.disk import FileOps, SegmentStore, take_held
from reference.real.epochfile import write_epoch_file
from reference.record import scan_log
from reference.real.loop import Conn, Loop, RoleLoop, Worker, now_ms
from reference.real.netroute import route
from reference.real.peerauth import ClientAuth
from reference.real.timeline import Timeline
from reference.real.options import ReplicaOptions
from reference.replica import ReplicaCore
from spec.config import ConfigError

RECONNECT_MS = 200
REFUSED_RETRY_MS = 5000      # after the master refused this slave (a diverged log): retry, slowly
CONNECT_TIMEOUT_MS = 2000
OUT_BYTES = 1 << 20
MAX_LAGGED_ACKS = 4096             # --inject-ack-lag-ms: ACKs held at once; more coalesce
COALESCE_LOG_INTERVAL_MS = 10_000


class SlaveStopped(RuntimeError):
    """The slave's own disk failed: it cannot hold what it would acknowledge."""


@attrs.frozen
class FollowerSetup:
    """A slave under failover (`broker node`): ``make`` turns the recovered ReplicaCore into the
    broker's FollowerCore (BrokerCore.attach_follower: its epochs and confirmOffset), and where
    its epoch file is; the FollowerCore decides, this runtime performs."""
    make: Callable[[ReplicaCore], FollowerCore]
    epoch_path: Path
    epoch_file_checks_order: bool
    written: Callable[[], None] | None = None    # after each turn's effects are performed (an observer's)


class ReplicaRuntime:
    def __init__(self, opts: ReplicaOptions, log: Callable[[str], None] = print, ops: FileOps | None = None,
                 follower: FollowerSetup | None = None, held: HeldLog | None = None,
                 loop: RoleLoop | None = None) -> None:
        """``held``: the log a node's previous role left in memory (BrokerCore.take_held), taken
        as it is instead of recovering the files again.  ``loop``: a node's process loop, which
        this role shares (BrokerRuntime runs its turns); else it runs its own."""
        self.opts = opts
        self.log = log
        self.store = SegmentStore(opts.directory / "commitlog", opts.segment_size, ops)
        self.recovery = take_held(self.store, held) if held is not None else self.store.recover()
        self.core = ReplicaCore.recovered(opts.name, opts.segment_size, self.recovery)
        self.core.spec_steps = DISCARD
        self.setup = follower
        self.follower: FollowerCore | None = None
        if follower is not None:
            if opts.trace is not None:
                raise ConfigError("--trace: a following node writes no write-path trace")
            self.follower = self.core = follower.make(self.core)
        self.trace_out = None
        if opts.trace is not None:
            self._start_trace(opts.trace)
        self.loop = loop if loop is not None else Loop()
        self.flusher = Worker(self.loop, "flush")
        self.conn: Conn | None = None
        self._connecting: socket.socket | None = None
        self._connect_deadline_ms = 0
        self._conn_ids = 0
        self._unsynced_from: int | None = None    # lowest offset written since the last fdatasync
        self._fsync_in_flight = False
        self.failure: str | None = None
        self._refused = False
        # --timeline: when each DATA arrived and each ACK left (reference/real/timeline.py)
        self.timeline = Timeline(opts.timeline) if opts.timeline is not None else None
        self._unsent_acks: list[tuple[int, int]] = []     # (offset, the connection's byte count past it)
        # --inject-ack-lag-ms: ACKs held until their time, oldest first (one timer for the head)
        self._lagged_acks: deque[tuple[float, Ack]] = deque()
        self._ack_timer_set = False
        self._coalesce_logged_ms = -float(COALESCE_LOG_INTERVAL_MS)
        self.acks_coalesced = 0
        now = now_ms()
        self.loop.call_at(now, self._connect)
        self.loop.call_at(now + opts.heartbeat_interval_ms, self._heartbeat)
        self.loop.call_at(now + opts.fsync_interval_ms, self._fsync_tick)

    def _start_trace(self, path) -> None:
        """--trace: the core wrapped so that a trace hook sees every one of its events
        (reference/tracehook.py); the HANDSHAKE note names the connection by this end's address."""
        from reference.tracehook import ReplicaTraceHook, TracedReplica

        if self.recovery.end_offset:
            raise ConfigError(f"--trace {path}: the store in {self.opts.directory} already holds "
                              f"{self.recovery.end_offset} bytes; a trace starts where the spec does, "
                              "at an empty store")
        self.core.spec_steps = []
        self.trace_out = open(path, "w", buffering=1)
        hook = ReplicaTraceHook(self.trace_out, self.core)
        self.core = TracedReplica(self.core, hook, now_ms,
                                  lambda: "%s:%d" % self.conn.sock.getsockname()[:2])

    def run(self) -> None:
        try:
            while not self.loop.stopping:
                self.turn()
        finally:
            self.close_role()
        if self.failure is not None:
            raise SlaveStopped(self.failure)

    def turn(self) -> None:
        """One wake-up of the loop and what follows it (BrokerRuntime calls it while slave)."""
        self.loop.run_once(1000, self._on_event)
        if self.loop.closed:
            return                   # a role change closed this role during the wake-up: nothing more of it
        self._perform()
        if self.conn is not None and not self.conn.closed:
            self._flush()

    def close_role(self) -> None:
        """Stop: the master connection (or an attempt at one) closed, the worker stopped; on a
        node's role change the process's loop goes on."""
        if self.conn is not None:
            self._close("slave stopping", reconnect=False)
        if self._connecting is not None:
            sock, self._connecting = self._connecting, None
            try:
                self.loop.selector.unregister(sock)     # a shared selector outlives this role
            except (KeyError, ValueError):
                pass
            sock.close()
        self.flusher.stop()
        self.store.close()
        self.loop.close()
        if self.timeline is not None:
            try:
                self.timeline.write()
            except OSError as err:
                self.log(f"--timeline {self.timeline.path}: not written ({err})")
            self.timeline = None
        if self.trace_out is not None:
            if self.failure is None:         # a clean stop: nothing of this slave is left to happen
                self.core.close()
            self.trace_out.close()
            self.trace_out = None

    def stop(self) -> None:
        self.loop.stop()

    # ------------------------------------------------------------------ the connection

    def _connect(self) -> None:
        if self.loop.stopping or self.conn is not None or self._connecting is not None:
            return
        host, port = route(self.opts.master)      # a chaos run's link to the master, if it has one
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        except OSError as err:
            self.log(f"cannot resolve the master {host}:{port}: {err}; retrying")
            self.loop.call_at(now_ms() + RECONNECT_MS * 5, self._connect)
            return
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex((host, port))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.loop.call_at(now_ms() + RECONNECT_MS, self._connect)
            return
        self._connecting = sock
        self._connect_deadline_ms = now_ms() + CONNECT_TIMEOUT_MS
        self.loop.selector.register(sock, selectors.EVENT_WRITE, "connecting")
        self.loop.call_at(self._connect_deadline_ms, self._connect_timeout)

    def _connect_timeout(self) -> None:
        if self._connecting is not None and now_ms() >= self._connect_deadline_ms:
            self._abandon_connect()

    def _abandon_connect(self) -> None:
        sock, self._connecting = self._connecting, None
        self.loop.selector.unregister(sock)
        sock.close()
        self.loop.call_at(now_ms() + RECONNECT_MS, self._connect)

    def _connected(self) -> None:
        sock = self._connecting
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            self._abandon_connect()
            return
        self._connecting = None
        self.loop.selector.unregister(sock)
        self._conn_ids += 1
        auth = ClientAuth(self.opts.peer_secret, "ha") if self.opts.peer_secret is not None else None
        self.conn = Conn(self._conn_ids, sock, "master", 1 << 24, OUT_BYTES, now_ms(), auth=auth, auth_port=True)
        self.loop.selector.register(sock, selectors.EVENT_READ, self.conn)
        self.core.connect()
        self._perform()

    def _close(self, reason: str, reconnect: bool = True) -> None:
        self._lagged_acks.clear()
        self._unsent_acks.clear()
        conn, self.conn = self.conn, None
        if conn is None or not conn.close(reason):
            return
        try:
            self.loop.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        self.log(f"master connection {conn.id} ({conn.peer}) closed: {reason}")
        self.core.disconnected()
        if reconnect and not self.loop.stopping:
            self.loop.call_at(now_ms() + (REFUSED_RETRY_MS if self._refused else RECONNECT_MS), self._connect)
        self._refused = False

    def _flush(self) -> None:
        conn = self.conn
        problem = conn.flush()
        if problem is not None:
            self._close(problem)
            return
        acks = self._unsent_acks
        if acks and self.timeline is not None and acks[0][1] <= conn.sent_bytes:     # the ACKs its sends took
            n = next((i for i, (_, at) in enumerate(acks) if at > conn.sent_bytes), len(acks))
            self.timeline.mark("ack_sent", offset=acks[n - 1][0])
            del acks[:n]
        if conn.writing != bool(conn.out):
            conn.writing = bool(conn.out)
            self.loop.selector.modify(conn.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0),
                                      conn)

    def _on_event(self, key: selectors.SelectorKey, mask: int) -> None:
        if key.data == "connecting":
            self._connected()
            return
        conn = key.data
        if conn is not self.conn:
            return
        if mask & selectors.EVENT_WRITE:
            self._flush()
        if mask & selectors.EVENT_READ and self.conn is conn:
            frames, problem = conn.read_frames(now_ms())
            for frame in frames:
                if self.conn is not conn:
                    return
                if isinstance(frame, Data):
                    if self.timeline is not None:
                        self.timeline.mark("data_in", offset=frame.offset + len(frame.data))
                    if self.follower is not None:
                        self.follower.on_data(frame.offset, frame.data, frame.epoch, frame.epoch_start,
                                              frame.confirm_offset)
                    else:
                        self.core.on_data(frame.offset, frame.data)
                elif isinstance(frame, EpochReply) and self.follower is not None:
                    self.follower.epoch_reply(frame.entries, frame.log_end_offset, frame.confirm_offset)
                elif isinstance(frame, Refuse):
                    self.log(f"the master refused this slave: {frame.reason}")
                    self._refused = True
                else:
                    self.core.on_bad_input(f"a master sent a {type(frame).__name__} frame")
                self._perform()
            if problem is not None and self.conn is conn:
                if conn.auth_failed:
                    self._refused = True            # a wrong secret stays wrong: retry slowly
                    self._close(problem)
                elif problem.startswith("malformed"):
                    self.core.on_bad_input(problem)
                    self._perform()
                else:
                    self._close(problem)

    # ------------------------------------------------------------------ timers

    def _hold_ack(self, frame: Ack) -> None:
        """--inject-ack-lag-ms: the ACK leaves ack_lag_ms from now (to the fraction of a ms).  What a
        master feeds is bounded here by coalescing: past MAX_LAGGED_ACKS held, the newest replaces the
        last held (ACKs are cumulative), which leaves no later than the one it replaced."""
        due = time.monotonic_ns() / 1e6 + self.opts.ack_lag_ms
        if len(self._lagged_acks) >= MAX_LAGGED_ACKS:
            self.acks_coalesced += 1
            if due >= self._coalesce_logged_ms + COALESCE_LOG_INTERVAL_MS:     # a flood logs every 10 s, not per ACK
                self._coalesce_logged_ms = due
                self.log(f"--inject-ack-lag-ms: {MAX_LAGGED_ACKS} ACKs held; a newer one replaces the last held "
                         f"({self.acks_coalesced} so far)")
            self._lagged_acks[-1] = (self._lagged_acks[-1][0], frame)
            return
        self._lagged_acks.append((due, frame))
        if not self._ack_timer_set:
            self._ack_timer_set = True
            self.loop.call_at(due, self._send_lagged_acks)

    def _send_lagged_acks(self) -> None:
        self._ack_timer_set = False
        conn = self.conn
        if conn is None or conn.closed:
            self._lagged_acks.clear()        # they answered data of a connection that is gone
            return
        now = time.monotonic_ns() / 1e6
        while self._lagged_acks and self._lagged_acks[0][0] <= now:
            _, frame = self._lagged_acks.popleft()
            if not conn.queue(frame):
                self._close("the master does not read what this slave sends")
                return
            if self.timeline is not None:
                self._unsent_acks.append((frame.offset, conn.sent_bytes + len(conn.out)))
        self._flush()
        if self._lagged_acks and self.conn is conn:
            self._ack_timer_set = True
            self.loop.call_at(self._lagged_acks[0][0], self._send_lagged_acks)

    def _heartbeat(self) -> None:
        self.core.heartbeat()
        self._perform()
        self.loop.call_at(now_ms() + self.opts.heartbeat_interval_ms, self._heartbeat)

    def _fsync_tick(self) -> None:
        if self._unsynced_from is not None and not self._fsync_in_flight:
            start = self._unsynced_from - self._unsynced_from % self.opts.segment_size
            self._unsynced_from = None
            self._fsync_in_flight = True
            self.flusher.submit(self.store.fsync_job(start, self.core.received_end), self._fsync_done,
                                self._fsync_failed)
        self.loop.call_at(now_ms() + self.opts.fsync_interval_ms, self._fsync_tick)

    def _fsync_done(self, upto: int) -> None:
        self._fsync_in_flight = False

    def _fsync_failed(self, err: OSError) -> None:
        self._fsync_in_flight = False
        self._fail(f"fdatasync failed: {err}")

    def _fail(self, why: str) -> None:
        self.failure = why
        self.log(f"the slave stops: {why}")
        self.loop.stop()

    # ------------------------------------------------------------------ effects

    def _perform(self) -> None:
        try:
            self._perform_effects()
            if self.setup is not None and self.setup.written is not None and self.failure is None:
                self.setup.written()        # what it parsed is in its page cache now, before any ACK leaves
        except OSError as err:           # this slave's own disk failed (create, zero a tail)
            self._fail(f"disk operation failed: {err}")
            self._close(f"this slave's disk failed: {err}", reconnect=False)

    def _perform_effects(self) -> None:
        effects = self.core.take_effects()
        i = 0
        while i < len(effects):
            e = effects[i]
            if isinstance(e, fx.WriteData):
                j = i + 1
                while (j < len(effects) and isinstance(effects[j], fx.WriteData)
                       and effects[j].start == e.start and effects[j].position == effects[j - 1].position + len(
                           effects[j - 1].data)):
                    j += 1
                data = b"".join(x.data for x in effects[i:j]) if j > i + 1 else e.data
                try:
                    self.store.write(e.start, e.position, data)
                except OSError as err:
                    self._fail(f"write of {len(data)} bytes at {e.start + e.position} failed: {err}")
                    self._close(f"this slave's disk failed: {err}", reconnect=False)
                    return
                offset = e.start + e.position
                self._unsynced_from = offset if self._unsynced_from is None else min(self._unsynced_from, offset)
                i = j
                continue
            if isinstance(e, fx.CreateSegment):
                self.store.create(e.start)
            elif isinstance(e, fx.ZeroTail):
                self.store.zero_tail(e.start, e.position)
            elif isinstance(e, (fx.SendHandshake, fx.SendAck)):
                if self.conn is not None:
                    frame = (Ack(e.offset, e.records) if isinstance(e, fx.SendAck)
                             else Handshake(e.offset, e.chain, self.opts.name, e.records))
                    if self.timeline is not None and isinstance(e, fx.SendAck):
                        self.timeline.mark("ack_queued", offset=e.offset)
                    if self.opts.ack_lag_ms and isinstance(e, fx.SendAck):
                        self._hold_ack(frame)
                    elif not self.conn.queue(frame):
                        self._close("the master does not read what this slave sends")
                    elif self.timeline is not None and isinstance(e, fx.SendAck):
                        self._unsent_acks.append((e.offset, self.conn.sent_bytes + len(self.conn.out)))
            elif isinstance(e, fx.CloseMaster):
                self._close(e.reason)
            elif isinstance(e, fx.SendEpochQuery):
                if self.conn is not None and not self.conn.queue(EpochQuery()):
                    self._close("the master does not read what this slave sends")
            elif self.follower is not None and self._perform_failover(e):
                pass
            else:
                raise AssertionError(f"unexpected effect {e!r}")
            i += 1


    def _perform_failover(self, e) -> bool:
        """The follower's effects on the log and the epoch file, in order (B14: the cut is
        durable before the epoch file says so, and both before the HANDSHAKE)."""
        seg = self.opts.segment_size
        if isinstance(e, bfx.TruncateLog):
            if e.on_disk:         # zeroed from the point (fdatasync'd), later segments unlinked, dir fsynced
                self.store.zero_tail(e.offset - e.offset % seg, e.offset % seg)
            self._unsynced_from = None if self._unsynced_from is None else min(self._unsynced_from, e.offset)
            self.log(f"truncated the log at {e.offset}" + ("" if e.on_disk else " (in memory only)"))
        elif isinstance(e, bfx.FsyncLog):
            if e.upto > 0 and self.store.segments():
                self.store.fsync((e.upto - 1) - (e.upto - 1) % seg, e.upto)
        elif isinstance(e, bfx.WriteEpochFile):
            write_epoch_file(self.setup.epoch_path, EpochFileCache(e.entries), durable=e.durable,
                             check_order=self.setup.epoch_file_checks_order)
        elif isinstance(e, bfx.HandshakeFailed):
            self.log(f"handshake failed: {e.reason}")
        elif isinstance(e, fx.RescanLog):
            self.follower.rescanned(self._scan_upto(e.upto))
        else:
            return False
        return True

    def _scan_upto(self, upto: int):
        """The log indexed from its files as if they ended at ``upto``: what is on disk beyond
        (a cut in memory only) is not seen, and not touched."""
        seg = self.opts.segment_size
        starts = [s for s in self.store.segments() if s < upto]

        def read(start: int) -> bytes:
            data = self.store.read(start, 0, seg).ljust(seg, b"\0")
            keep = max(0, min(seg, upto - start))
            return data[:keep] + bytes(seg - keep)
        return scan_log(starts, read, seg)


def serve_replica(opts: ReplicaOptions) -> int:
    """`ackorder broker replica`: run until SIGTERM or SIGINT."""
    runtime = ReplicaRuntime(opts, log=lambda m: print(m, flush=True))
    print(f"slave {opts.name}: recovered {runtime.recovery.record_count} records, "
          f"log ends at {runtime.recovery.end_offset}", flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: runtime.stop())
    runtime.run()
    return 0
