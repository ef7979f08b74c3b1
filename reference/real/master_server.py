"""The real master: MasterCore and Admission driven by one event loop
(reference/real/loop.py) over real files, fdatasync and TCP sockets.

One thread owns both state machines and performs their effects in the order
they were emitted: page-cache writes (every WriteData of a batch in one
pwritev, answered at once with write_done or write_failed), responses and
DATA frames into per-connection buffers (one send per connection per turn),
closes.  Two worker threads do the blocking work and hand the result back
as a call on the loop: the flush thread (fdatasync; GroupCommitService and
FlushRealTimeService issue one at a time) and the reader (a segment read
back for a slave that lags).  Every decision is the cores': this module only
moves bytes, keeps the producers' routes (which connection asked what), and
closes connections that are idle, over the limit, malformed, or that the
core refused, each with one log line.
"""

from __future__ import annotations

import itertools
import selectors
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable

from reference import effects as fx
from reference.admission import Admission
from reference.commitlog import CommitLog
from reference.frames import Ack, Data, EpochQuery, EpochReply, Handshake, Put, Read, ReadReply, Refuse, encode_response
from reference.master import DISCARD, MasterCore
from reference.failover.broker import HeldLog
from reference.real.disk import FileOps, SegmentStore, ShortWrite, take_held
from reference.real.guard import FrameGuard
from reference.real.loop import (Conn, ConnServer, Loop, RoleLoop, Worker, call_and_wait, listen, now_ms,
                                 reserve_descriptors)
from reference.real.options import MasterOptions
from reference.real.timeline import Timeline
from reference.real.uring import FsyncRing, RingUnavailable
from reference.status import PutStatus
from spec.config import ConfigError

PRODUCER, SLAVE = "producer", "slave"
ACCEPTS_PER_TURN = 64
MAX_TURN_ROUNDS = 8              # tick + perform rounds per turn while the core has work due now
PRODUCER_OUT_BYTES = 16 << 20    # responses a producer has not read yet
IDLE_CHECK_MS = 1000
MAX_UNWRITTEN_MARKS = 4096       # --timeline: sampled puts waiting for their write to be marked
PUTS_PER_TURN = 16
HA_MAX_FRAME_BYTES = 4096        # a slave sends HANDSHAKE and ACK frames, tens of bytes


class MasterRuntime(ConnServer):
    def __init__(self, opts: MasterOptions, log: Callable[[str], None] = print, ops: FileOps | None = None,
                 held: HeldLog | None = None, loop: RoleLoop | None = None) -> None:
        """``held``: the log a node's previous role left in memory (BrokerCore.take_held), taken
        as it is instead of recovering the files again.  ``loop``: a node's process loop, which
        this role shares (BrokerRuntime runs its turns); else it runs its own."""
        cfg = self.cfg = opts.config
        self.opts = opts
        self.log = log
        self.max_frame_bytes = max(cfg.max_message_size + 64, 1024)
        self.max_connections, self.idle_timeout_ms = opts.max_connections, opts.idle_timeout_ms
        self.peer_secret = opts.peer_secret
        self.guard = FrameGuard(opts.frame_deadline_ms, opts.partial_frame_budget_bytes,
                                max(self.max_frame_bytes, HA_MAX_FRAME_BYTES))
        reserve_descriptors(opts.max_connections)
        self.store = SegmentStore(opts.directory / "commitlog", cfg.mapped_file_size_commit_log, ops)
        self.store.fail_fsync_after = opts.inject_fsync_eio_after
        self.store.fail_write_after = opts.inject_write_fault_after
        self.store.fail_write_kind = opts.inject_write_fault
        self.recovery = take_held(self.store, held) if held is not None else \
            self.store.recover(keep_torn=cfg.recovery_keeps_torn)
        commitlog = CommitLog.recovered(cfg.mapped_file_size_commit_log, cfg.transient_store_pool_enable,
                                        self.recovery)
        self.core = MasterCore(cfg, opts.replicas, now_ms(), log=commitlog)
        self.core.spec_steps = DISCARD
        if opts.sync_state_set is not None:
            self.core.change_sync_state_set(opts.replicas, frozenset(opts.sync_state_set))
        self.trace_out = None
        if opts.trace is not None:
            self._start_trace(opts.trace)
        self.admission = Admission(cfg)
        self.loop = loop if loop is not None else Loop()
        try:
            self.client_sock = listen(opts.host, opts.port)
        except OSError:
            self.store.close()       # a node retries on a port still held: leak no descriptors
            raise
        try:
            self.ha_sock = listen(opts.host, opts.ha_port)
        except OSError:
            self.client_sock.close()
            self.store.close()
            raise
        self.port = self.client_sock.getsockname()[1]
        self.ha_port = self.ha_sock.getsockname()[1]
        self.loop.selector.register(self.client_sock, selectors.EVENT_READ, PRODUCER)
        self.loop.selector.register(self.ha_sock, selectors.EVENT_READ, SLAVE)
        self.conns: dict[int, Conn] = {}
        self._conn_ids = itertools.count(1)
        self._req_ids = itertools.count(1)
        self.routes: dict[int, tuple[Conn, int]] = {}     # request id -> (producer connection, its id)
        self._dirty: set[Conn] = set()
        self.flusher = Worker(self.loop, "flush")
        self.reader = Worker(self.loop, "segment-reader")
        # fdatasync through io_uring where the kernel allows (reference/real/uring.py: no GIL hand-off
        # between the fsync's end and the loop learning it); the flush thread otherwise, and always
        # under a test's FileOps, which must see every fdatasync
        self.fsync_ring: FsyncRing | None = None
        if opts.flush_engine == "auto" and type(self.store.ops) is FileOps:
            try:
                self.fsync_ring = FsyncRing(self.loop)
            except RingUnavailable as err:
                self.log(f"io_uring unavailable ({err}): fdatasync runs on the flush thread")
        self.stats: Counter = Counter()
        self.statuses: Counter = Counter()          # answers by PutStatus value
        self._core_due_ms = 0
        self._clean_due_ms: int | None = None
        # Puts started per turn: a wave of requests is written, shipped and answered in slices, so
        # the first of them need not wait for the whole wave to be processed (the rest follow at
        # once: the next turn does not wait for sockets).
        self.puts_per_turn = PUTS_PER_TURN
        self._more_puts = False
        self.loop.call_at(now_ms() + IDLE_CHECK_MS, self._check_idle)
        self._shut = False
        # --timeline: the puts not yet written; per connection, the answers and DATA queued and not yet
        # sent, each with the connection's byte count at which it will have left
        self.timeline = Timeline(opts.timeline) if opts.timeline is not None else None
        self._unwritten_puts: list[int] = []
        self._unsent_answers: dict[int, list[tuple[int, int]]] = {}
        self._unsent_data: dict[int, list[tuple[int, int]]] = {}

    def _start_trace(self, path) -> None:
        """--trace: the core wrapped so that a trace hook sees every one of its events
        (reference/tracehook.py); slave connections are named by the slave's address."""
        from reference.refinement import spec_config
        from reference.tracehook import MasterTraceHook, TracedMaster

        if self.recovery.end_offset:
            raise ConfigError(f"--trace {path}: the store in {self.opts.directory} already holds "
                              f"{self.recovery.end_offset} bytes; a trace starts where the spec does, "
                              "at an empty store")
        self.core.spec_steps = []
        self.trace_out = open(path, "w", buffering=1)      # whole lines: a killed master leaves a prefix
        hook = MasterTraceHook(self.trace_out, self.core, spec_config(self.cfg, self.opts.replicas),
                               conn_id=lambda cid: self.conns[cid].peer if cid in self.conns else str(cid))
        self.core = TracedMaster(self.core, hook, now_ms)

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        """Serve until ``stop`` (from a signal handler or another thread)."""
        try:
            while not self.loop.stopping:
                self.turn()
        finally:
            self._shutdown()

    def turn(self) -> None:
        """One wake-up of the loop and what follows it (BrokerRuntime calls it while master)."""
        due = [self._core_due_ms] + ([self._clean_due_ms] if self._clean_due_ms is not None else [])
        wait = 0 if self._more_puts else max(0, min(due) - now_ms())
        self.loop.run_once(wait, self._on_event)
        if self._shut:
            return                   # a role change closed this role during the wake-up: nothing more of it
        self._turn()

    def close_role(self) -> None:
        """A node's role change, on the loop thread: every connection and port closed, the
        workers stopped; the process's loop goes on."""
        self._shutdown()

    def stop(self) -> None:
        self.loop.stop()

    def call(self, fn: Callable, timeout_s: float = 10.0):
        """Run ``fn()`` on the loop thread and return its result (another thread's way to
        read or change the cores: the node that supervises this runtime)."""
        return call_and_wait(self.loop, fn, timeout_s)

    def _turn(self) -> None:
        """After the sockets and completions of one wake-up: admit, run the services
        that are due, perform every effect in order, then one send per connection."""
        now = now_ms()
        if self._clean_due_ms is not None and now >= self._clean_due_ms:
            self.admission.clean(now)
        for _ in range(self.puts_per_turn):
            if (q := self.admission.next_runnable()) is None:
                break
            if self.timeline is not None and self.timeline.samples(q.req_id):
                self.timeline.mark("put", q.req_id)
                if len(self._unwritten_puts) >= MAX_UNWRITTEN_MARKS:    # a read-only store writes none
                    self._unwritten_puts.clear()
                self._unwritten_puts.append(q.req_id)
            self.core.put(q.req_id, q.key, q.body, now)
            self.admission.appended(q.req_id)
            if self.fsync_ring is not None and self.fsync_ring.ready():
                self.fsync_ring.reap()      # its PUT_OKs leave with this turn, not the next
                now = max(now, now_ms())    # (the core heard of the fsync at a later now: time never goes back)
        self._more_puts = bool(self.admission.queue) and len(self.admission.holding) < self.admission.slots
        self._perform(now)
        for _ in range(MAX_TURN_ROUNDS):
            if self.core.next_wakeup_ms(now) > now:
                break
            self.core.tick(now)
            self._perform(now)
        self._core_due_ms = self.core.next_wakeup_ms(now)
        self._clean_due_ms = self.admission.next_clean_ms(now)
        # The invariants the simulator asserts after every step hold here too, between two
        # wake-ups: what runs is what is checked (O(1), and the HA connections' bounds).
        self.core.check_invariants()
        dirty, self._dirty = self._dirty, set()
        for conn in dirty:
            self._flush(conn)

    def _on_event(self, key: selectors.SelectorKey, mask: int) -> None:
        if isinstance(key.data, str):
            self._accept(key.fileobj, key.data)
            return
        conn: Conn = key.data
        if mask & selectors.EVENT_WRITE:
            self._flush(conn)
        if mask & selectors.EVENT_READ and not conn.closed:
            now = now_ms()
            frames, problem = self._receive(conn, now)
            if conn.kind == PRODUCER:
                self._producer_frames(conn, frames, problem, now)
            else:
                self._slave_frames(conn, frames, problem, now)

    # ------------------------------------------------------------------ connections

    def _accept(self, listener, kind: str) -> None:
        for sock, addr in self._accepted(listener, kind, ACCEPTS_PER_TURN):
            out_bytes = PRODUCER_OUT_BYTES if kind == PRODUCER else self.cfg.ha_send_window_bytes * 2 + (1 << 20)
            conn = Conn(next(self._conn_ids), sock, kind,
                        self.max_frame_bytes if kind == PRODUCER else HA_MAX_FRAME_BYTES, out_bytes, now_ms(),
                        peer=addr, auth=self._server_auth("ha") if kind == SLAVE else None,
                        auth_port=kind == SLAVE)
            self.conns[conn.id] = conn
            self.loop.selector.register(sock, selectors.EVENT_READ, conn)
            if kind == SLAVE:     # it must greet within the housekeeping interval (the core's timer)
                self.core.replica_connection_opened(conn.id, conn.last_active_ms)

    def _close(self, conn: Conn, reason: str, tell_core: bool = True) -> None:
        """Close a connection and log why (once)."""
        if not conn.detach(self.loop.selector, reason):
            return
        self._dirty.discard(conn)
        self.guard.forget(conn.id)
        self._unsent_answers.pop(conn.id, None)
        self._unsent_data.pop(conn.id, None)
        self.stats[f"closed_{conn.kind}"] += 1
        self.log(f"{conn.kind} connection {conn.id} from {conn.peer} closed: {reason}")
        if conn.kind == SLAVE and tell_core:
            self.core.replica_disconnected(conn.id)
        self.conns.pop(conn.id, None)      # after the core heard (a trace names the connection by it)

    def _flush(self, conn: Conn) -> None:
        if (problem := conn.drain(self.loop.selector)) is not None:
            self._close(conn, problem)
        elif self.timeline is not None:
            self._mark_sent(conn)

    def _mark_sent(self, conn: Conn) -> None:
        """--timeline: the answers and DATA of this connection that its sends took so far."""
        gone = conn.sent_bytes
        answers = self._unsent_answers.get(conn.id)
        if answers and answers[0][1] <= gone:
            n = next((i for i, (_, at) in enumerate(answers) if at > gone), len(answers))
            self.timeline.mark_all("sent", [req for req, _ in answers[:n]])
            del answers[:n]
        data = self._unsent_data.get(conn.id)
        if data and data[0][1] <= gone:
            n = next((i for i, (_, at) in enumerate(data) if at > gone), len(data))
            self.timeline.mark("data_sent", offset=data[n - 1][0])      # the furthest of them
            del data[:n]

    def _check_idle(self) -> None:
        now = now_ms()
        self._housekeep(now)
        self.loop.call_at(now + min(IDLE_CHECK_MS, self.idle_timeout_ms, self.guard.frame_deadline_ms),
                          self._check_idle)

    # ------------------------------------------------------------------ input

    def _producer_frames(self, conn: Conn, frames: list, problem: str | None, now: int) -> None:
        for frame in frames:
            if isinstance(frame, Read):
                self._read(conn, frame)
                continue
            if not isinstance(frame, Put):
                problem = f"a producer sent a {type(frame).__name__} frame"
                break
            req_id = next(self._req_ids)
            self.routes[req_id] = (conn, frame.req_id)
            self.admission.arrive(req_id, frame.key, frame.body, now)
            if self.timeline is not None:
                self.timeline.mark("arrive", req_id)
        if problem is not None:
            self._close(conn, problem)

    def _read(self, conn: Conn, frame: Read) -> None:
        """A consumer's pull: bytes from one segment, never at or above confirmOffset."""
        seg = self.cfg.mapped_file_size_commit_log
        confirm = self.core.readable_end()
        end = min(frame.offset + frame.max_bytes, confirm)
        data = b""
        if frame.offset < end:
            start = frame.offset - frame.offset % seg
            end = min(end, start + seg)
            try:
                data = self.store.read(start, frame.offset - start, end - frame.offset)
            except OSError as err:
                self.log(f"read of [{frame.offset}, {end}) failed: {err}")
        assert frame.offset + len(data) <= confirm or not data, (frame.offset, len(data), confirm)
        self.stats["reads"] += 1
        if conn.queue(ReadReply(frame.req_id, confirm, frame.offset, data)):
            self._dirty.add(conn)
        else:
            self._close(conn, "the consumer does not read its replies")

    def _slave_frames(self, conn: Conn, frames: list, problem: str | None, now: int) -> None:
        core = self.core
        for frame in frames:
            if conn.closed:
                return
            if isinstance(frame, EpochQuery):       # a following slave: our epochs, then its HANDSHAKE
                core.replica_epoch_query(conn.id, now)
            elif isinstance(frame, Handshake):
                core.replica_handshake(conn.id, frame.name, frame.offset, frame.chain, now, frame.records)
                if core.name_of(conn.id) == frame.name:
                    self.log(f"slave {frame.name} connected at offset {frame.offset} (connection {conn.id})")
            elif isinstance(frame, Ack):
                if self.timeline is not None:
                    self.timeline.mark("ack", offset=frame.offset)
                core.replica_ack(conn.id, frame.offset, now, frame.records)
            else:
                core.replica_bad_input(conn.id, f"a slave sent a {type(frame).__name__} frame")
            self._perform(now)
        self._send_answers()
        if problem is not None and not conn.closed:
            if conn.auth_failed:                              # told why, so it stops retrying fast
                conn.queue(Refuse(problem))
                conn.flush()
                self._close(conn, problem)
            elif problem.startswith("malformed"):
                core.replica_bad_input(conn.id, problem)     # the core closes it (and forgets it)
                self._perform(now)
            else:
                self._close(conn, problem)

    # ------------------------------------------------------------------ effects

    def _perform(self, now: int) -> None:
        """Every effect of the admission and the core, in the order they were emitted."""
        for _ in range(1 << 20):
            effects = self.admission.take_effects()
            effects += self.core.take_effects()
            if not effects:
                return
            i = 0
            last_write = None
            while i < len(effects):
                e = effects[i]
                if isinstance(e, fx.WriteData):
                    j = i + 1
                    while (j < len(effects) and isinstance(effects[j], fx.WriteData)
                           and effects[j].start == e.start and effects[j].offset == effects[j - 1].end):
                        j += 1
                    written = self._write(effects[i:j], now)
                    if self._unwritten_puts:        # --timeline: the puts this batch of effects writes
                        self.timeline.mark_all("written", self._unwritten_puts)
                        self._unwritten_puts = []
                    if written:
                        if last_write is not None and last_write.start != e.start and last_write.end == e.offset:
                            # one append or commit that ends one segment (its blank) and goes on in the next
                            self.stats["writes_across_segment_roll"] += 1
                        last_write = effects[j - 1]
                    else:
                        last_write = None       # cancelled: no write crossed anything
                    i = j
                    continue
                self._perform_one(e, now)
                i += 1
        raise AssertionError("effects did not settle")

    def _perform_one(self, e, now: int) -> None:
        if isinstance(e, fx.Respond):
            self._respond(e)
        elif isinstance(e, fx.SendData):
            if self.opts.ha_lag_ms and self.opts.ha_lag_to is not None \
                    and self.core.name_of(e.conn) == self.opts.ha_lag_to:
                # --inject-ha-lag-ms: a slow link; the same delay for each keeps their order
                self.stats["ha_lagged_sends"] += 1
                # (from this moment, to the fraction of a ms: `bench ack` takes it as the round trip)
                self.loop.call_at(time.monotonic_ns() / 1e6 + self.opts.ha_lag_ms,
                                  lambda e=e: self._send_data(e, flush=True))
            else:
                self._send_data(e)
        elif isinstance(e, fx.SendEpochs):
            conn = self.conns.get(e.conn)
            if conn is not None and not conn.closed:
                if conn.queue(EpochReply(e.log_end_offset, e.confirm_offset, e.entries)):
                    self._dirty.add(conn)
                else:
                    self._close(conn, "the slave does not read what it is sent")
        elif isinstance(e, fx.Fsync):
            seg = self.cfg.mapped_file_size_commit_log
            if e.upto > e.start + seg or e.upto % seg == 0:
                # a flush across a segment roll: one fsync of two files (the padding and the record
                # after it), or the first pass of a round that continues in the next segment
                self.stats["fsyncs_across_segment_roll"] += 1
            if self.timeline is not None:
                self.timeline.mark("fsync_submit", offset=e.upto)
            try:
                if self.fsync_ring is not None:
                    try:
                        self.store.fsync_on_ring(self.fsync_ring, e.start, e.upto,
                                                 lambda upto, e=e: self._fsync_done(e, True),
                                                 lambda err, e=e: self._fsync_failed(e, err))
                        if self.timeline is not None:      # in the kernel's hands from here
                            self.timeline.mark("fsync_start", offset=e.upto)
                        return
                    except RingUnavailable as err:          # it ran none of it, and closed
                        self.log(f"io_uring failed ({err}): fdatasync moves to the flush thread")
                        self.stats["io_uring_failures"] += 1
                        self.fsync_ring = None
                job = self.store.fsync_job(e.start, e.upto)
            except OSError as err:
                self._fsync_failed(e, err)
                return
            if self.timeline is not None:
                job = _timed(job, self.timeline, e.upto)
            self.flusher.submit(job, lambda upto, e=e: self._fsync_done(e), lambda err, e=e: self._fsync_failed(e, err))
        elif isinstance(e, fx.CreateSegment):
            try:
                self.store.create(e.start)
            except OSError as err:      # the write into it will fail and say so
                self.log(f"creating segment {e.start} failed: {err}")
        elif isinstance(e, fx.ReadSegment):
            try:
                job = self.store.read_segment_job(e.start)
            except OSError as err:
                self.core.segment_read_failed(e.start, f"segment {e.start} could not be read back: {err}", now)
                return
            self.reader.submit(job, lambda data, s=e.start: self._segment_read(s, data),
                               lambda err, s=e.start: self.core.segment_read_failed(
                                   s, f"segment {s} could not be read back: {err}", now_ms()))
        elif isinstance(e, fx.CloseReplica):
            conn = self.conns.get(e.conn)
            if conn is not None:
                conn.queue(Refuse(e.reason))
                conn.flush()
                self._close(conn, e.reason, tell_core=False)
        else:
            raise AssertionError(f"unexpected effect {e!r}")

    def _send_data(self, e: fx.SendData, flush: bool = False) -> None:
        conn = self.conns.get(e.conn)
        if conn is not None and not conn.closed:
            if not conn.queue(Data(e.offset, e.data, e.epoch, e.epoch_start, e.confirm_offset)):
                self._close(conn, "the slave does not read what it is sent")
                return
            if self.timeline is not None:
                end = e.offset + len(e.data)
                self.timeline.mark("data_queued", offset=end)
                self._unsent_data.setdefault(conn.id, []).append((end, conn.sent_bytes + len(conn.out)))
            if flush:
                self._flush(conn)
            else:
                self._dirty.add(conn)

    def _write(self, run: list[fx.WriteData], now: int) -> bool:
        """One pwritev for a run of contiguous WriteData; the core hears about each, in order.
        False: the run was cancelled (issued behind a write that failed), nothing was written."""
        first = run[0]
        if self.core.write_cancelled(first.start, first.position, len(first.data)):
            # issued before a write that failed: its bytes must not reach the page cache
            self.stats["writes_cancelled"] += len(run)
            for e in run:
                self.core.write_failed(e.start, e.position, len(e.data), 0, now)
            return False
        try:
            self.store.write(first.start, first.position, b"".join(e.data for e in run) if len(run) > 1
                             else first.data)
            written = None
        except OSError as err:
            written = err.written if isinstance(err, ShortWrite) else 0
            self.stats["write_failures"] += 1
            self.log(f"write of {sum(len(e.data) for e in run)} bytes at {first.offset} failed after {written} "
                     f"bytes ({err}); the store stops accepting writes")
        self.stats["pwrites"] += 1
        if written is None:
            self.core.writes_done([(e.start, e.position, len(e.data)) for e in run], now)
            return True
        for e in run:
            if written >= len(e.data):
                self.core.write_done(e.start, e.position, len(e.data), now)
                written -= len(e.data)
            else:
                self.core.write_failed(e.start, e.position, len(e.data), written, now)
                written = 0
        return True

    def _respond(self, e: fx.Respond) -> None:
        self.statuses[e.status] += 1
        self.admission.answered(e.req_id)
        route = self.routes.pop(e.req_id, None) if e.final else self.routes.get(e.req_id)
        if route is None:
            return
        conn, client_req_id = route
        if conn.closed:
            return
        if conn.queue_bytes(encode_response(client_req_id, e.status, e.next_offset)):
            self._dirty.add(conn)
            if (self.timeline is not None and e.final and e.status == PutStatus.PUT_OK
                    and self.timeline.samples(e.req_id)):
                self.timeline.mark("answer", e.req_id, e.next_offset)
                self._unsent_answers.setdefault(conn.id, []).append((e.req_id, conn.sent_bytes + len(conn.out)))
        else:
            self._close(conn, "the producer does not read its responses")

    def _fsync_done(self, e: fx.Fsync, on_ring: bool = False) -> None:
        self.stats["fsyncs"] += 1
        if self.timeline is not None:
            if on_ring:      # the kernel ran it; the loop's reaping is the first moment anyone knows
                self.timeline.mark("fsync_return", offset=e.upto)
            self.timeline.mark("fsync_done", offset=e.upto)
        if on_ring:
            self.stats["fsyncs_io_uring"] += 1
        now = now_ms()
        self.core.fsync_done(e.start, e.upto, now)
        self._perform(now)
        self._send_answers()

    def _send_answers(self) -> None:
        """The answers an ACK or an fsync released leave now, not after the rest of the turn's puts
        are admitted and written (issue 39's timeline: that wait was a quarter of a DECOUPLED
        request's time beyond the round trip)."""
        for conn in [c for c in self._dirty if c.kind == PRODUCER]:
            self._dirty.discard(conn)
            self._flush(conn)

    def _fsync_failed(self, e: fx.Fsync, err: OSError) -> None:
        self.log(f"fsync failed ({err}): the store turns read-only")
        self.core.fsync_failed(e.start, e.upto, now_ms())

    def _segment_read(self, start: int, data: bytes) -> None:
        self.stats["segment_reads"] += 1
        self.core.segment_read(start, data, now_ms())

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        if self._shut:
            return
        self._shut = True
        for conn in list(self.conns.values()):
            self._close(conn, "master stopping", tell_core=False)
        for sock in (self.client_sock, self.ha_sock):
            try:
                self.loop.selector.unregister(sock)     # a shared selector outlives this role
            except (KeyError, ValueError, OSError):
                pass
            try:
                sock.close()
            except OSError:
                pass
        self.flusher.stop()
        self.reader.stop()
        if self.fsync_ring is not None:
            self.fsync_ring.close()
        self.store.close()
        self.loop.close()
        if self.timeline is not None:
            try:
                self.timeline.write()
            except OSError as err:
                self.log(f"--timeline {self.timeline.path}: not written ({err})")
        if self.trace_out is not None:
            unhealed = self.core.close()
            if unhealed is not None:
                self.log(f"trace {self.opts.trace} ends as a prefix (no \"complete\" trailer): {unhealed}")
            self.trace_out.close()

    def stats_line(self) -> str:
        stats = self.stats + Counter({PutStatus(k).name: v for k, v in self.statuses.items()})
        return "stats " + " ".join(f"{k}={v}" for k, v in sorted(stats.items()))


def _timed(job: Callable, timeline: Timeline, upto: int) -> Callable:
    """A worker's fsync job that marks when its fdatasync returned, on the worker's thread."""
    def run():
        timeline.mark("fsync_start", offset=upto)
        result = job()
        timeline.mark("fsync_return", offset=upto)
        return result
    return run


def serve_master(opts: MasterOptions) -> int:
    """`ackorder broker master`: run until SIGTERM or SIGINT, then print the stats line."""
    runtime = MasterRuntime(opts, log=lambda msg: print(msg, flush=True))
    r = runtime.recovery
    print(f"recovered {r.record_count} records, log ends at {r.end_offset}"
          + "".join(f"; dropped: {d}" for d in r.dropped), flush=True)
    print(f"listening host={opts.host} port={runtime.port} ha_port={runtime.ha_port}", flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: runtime.stop())
    runtime.run()
    # The last line: what a benchmark needs to know (fsyncs per message).
    sys.stdout.write(runtime.stats_line() + "\n")
    sys.stdout.flush()
    return 0
