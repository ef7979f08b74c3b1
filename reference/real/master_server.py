"""The real master: the sans-IO MasterCore driven by files, fdatasync, TCP
sockets and threads.

Threads, named after RocketMQ's: connection readers put requests in a
bounded send queue; ``send_message_thread_pool_nums`` processor threads take
them (in BLOCKING mode a processor waits until its request is answered, as
before RocketMQ 4.7); one service thread runs the core's timers (commit,
group commit rounds, deadlines, HA transfer); one flush thread performs the
fdatasyncs; each slave connection has a reader and a writer.  One lock
guards the core; every effect is performed under it in the order the core
emitted it (page-cache writes, answered at once with write_done or
write_failed; frames and closes are non-blocking queue operations).
"""

from __future__ import annotations

import itertools
from collections import deque
import queue
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import attrs

from reference import effects as fx
from reference.commitlog import CommitLog
from reference.config import StoreConfig
from reference.frames import Ack, Data, Handshake, Put, Response
from reference.master import MasterCore
from reference.real.disk import SegmentStore, ShortWrite
from reference.real.net import Connection, listen
from reference.status import PutStatus

SEND_QUEUE_CAPACITY = 10_000


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@attrs.define
class Pending:
    conn: Connection
    client_req_id: int
    done: threading.Event | None = None


class MasterServer:
    def __init__(self, directory: Path, config: StoreConfig, replicas: tuple[str, ...],
                 host: str = "127.0.0.1", port: int = 0, ha_port: int = 0, log=print) -> None:
        self.cfg = config
        self.log = log
        self.store = SegmentStore(Path(directory) / "commitlog", config.mapped_file_size_commit_log)
        report, data = self.store.recover(keep_torn=config.bug("BugRecoveryKeepsTorn"))
        self.recovery = report
        commitlog = CommitLog.recovered(config.mapped_file_size_commit_log, config.transient_store_pool_enable,
                                        report, data)
        self.core = MasterCore(config, replicas, now_ms(), log=commitlog)
        self.lock = threading.Lock()
        self.send_queue: queue.Queue = queue.Queue(SEND_QUEUE_CAPACITY)
        self.pending: dict[int, Pending] = {}
        self._ids = itertools.count(1)
        self._wake = threading.Event()
        self._fsyncs: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self.ha_conns: dict[int, Connection] = {}       # by connection id (the core's name for it)
        self._conn_ids = itertools.count(1)
        self.stats: Counter = Counter()
        self.client_sock = listen(host, port)
        self.ha_sock = listen(host, ha_port)
        self.port = self.client_sock.getsockname()[1]
        self.ha_port = self.ha_sock.getsockname()[1]
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        targets = [("client-acceptor", self._accept_clients), ("ha-acceptor", self._accept_slaves),
                   ("service", self._service_loop), ("flush", self._flush_loop)]
        targets += [(f"SendMessageThread_{i}", self._processor_loop) for i in range(self.cfg.send_message_thread_pool_nums)]
        for name, target in targets:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for sock in (self.client_sock, self.ha_sock):
            try:
                sock.close()
            except OSError:
                pass
        for conn in list(self.ha_conns.values()):
            conn.close("master stopping")
        self.store.close()

    # ------------------------------------------------------------ the core

    def _call(self, fn, *args) -> None:
        """Call the core under the lock and perform its effects, in order, under the lock."""
        with self.lock:
            fn(*args)
            pending = deque(self.core.take_effects())
            while pending:
                e = pending.popleft()
                if isinstance(e, fx.WriteData):
                    self._write(e)
                    pending.extend(self.core.take_effects())
                elif isinstance(e, fx.CreateSegment):
                    try:
                        self.store.create(e.start)
                    except OSError as err:      # the write into it will fail and say so
                        self.log(f"creating segment {e.start} failed: {err}")
                elif isinstance(e, fx.Fsync):
                    self._fsyncs.put(e)
                elif isinstance(e, fx.Respond):
                    self._respond(e)
                elif isinstance(e, fx.SendData):
                    conn = self.ha_conns.get(e.conn)
                    if conn is not None:
                        conn.send(Data(e.offset, e.data))
                elif isinstance(e, fx.CloseReplica):
                    conn = self.ha_conns.pop(e.conn, None)
                    if conn is not None:
                        conn.close(e.reason)
                    self.log(f"slave connection {e.conn} closed: {e.reason}")
                else:
                    raise AssertionError(f"unexpected effect {e!r}")

    def _write(self, e: fx.WriteData) -> None:
        """pwrite into the page cache; the core hears at once whether it worked."""
        try:
            self.store.write(e.start, e.position, e.data)
        except OSError as err:
            written = err.written if isinstance(err, ShortWrite) else 0
            self.stats["write_failures"] += 1
            self.log(f"write of {len(e.data)} bytes at {e.offset} failed after {written} bytes ({err}); "
                     f"the store stops accepting writes")
            self.core.write_failed(e.start, e.position, len(e.data), written, now_ms())
            return
        self.core.write_done(e.start, e.position, len(e.data), now_ms())

    def _respond(self, e: fx.Respond) -> None:
        self.stats[PutStatus(e.status).name] += 1
        p = self.pending.pop(e.req_id, None) if not self.cfg.bug("BugDoubleResponse") else self.pending.get(e.req_id)
        if p is None:
            return
        p.conn.send(Response(p.client_req_id, e.status, e.next_offset))
        if p.done is not None:
            p.done.set()

    # ------------------------------------------------------------ producers

    def _accept_clients(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self.client_sock.accept()
            except OSError:
                return
            conn = Connection(sock, self.cfg.max_message_size + 64, "producer")
            threading.Thread(target=self._read_client, args=(conn,), daemon=True).start()

    def _read_client(self, conn: Connection) -> None:
        for frame in conn.frames():
            if not isinstance(frame, Put):
                conn.close(f"a producer sent a {type(frame).__name__} frame")
                break
            internal = next(self._ids)
            self.pending[internal] = Pending(conn, frame.req_id)
            try:
                self.send_queue.put_nowait((internal, frame.key, frame.body, time.monotonic()))
            except queue.Full:
                self._respond(fx.Respond(internal, int(PutStatus.OS_PAGE_CACHE_BUSY), 0))
        if conn.close_reason and conn.close_reason.startswith("malformed"):
            self.log(f"producer connection closed: {conn.close_reason}")

    def _processor_loop(self) -> None:
        """SendMessageProcessor: take a request, put it, and (BLOCKING) wait for its answer."""
        limit_s = self.cfg.wait_time_in_send_queue_ms / 1000
        blocking = self.cfg.ack_mode == "BLOCKING"
        max_wait_s = (max(self.cfg.sync_flush_timeout_ms, self.cfg.slave_timeout_ms) + 5000) / 1000
        while not self._stop.is_set():
            try:
                internal, key, body, enqueued = self.send_queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if time.monotonic() - enqueued > limit_s:     # BrokerFastFailure: TIMEOUT_CLEAN_QUEUE
                self._respond(fx.Respond(internal, int(PutStatus.OS_PAGE_CACHE_BUSY), 0))
                continue
            done = threading.Event() if blocking else None
            p = self.pending.get(internal)
            if p is not None and done is not None:
                p.done = done
            self._call(self.core.put, internal, key, body, now_ms())
            self._wake.set()
            if done is not None and internal in self.pending:
                done.wait(max_wait_s)

    # ------------------------------------------------------------ services

    def _service_loop(self) -> None:
        while not self._stop.is_set():
            now = now_ms()
            self._call(self.core.tick, now)
            with self.lock:
                wait_ms = self.core.next_wakeup_ms(now_ms()) - now_ms()
            self._wake.wait(min(max(wait_ms, 0), 5) / 1000)
            self._wake.clear()

    def _flush_loop(self) -> None:
        while not self._stop.is_set():
            try:
                e = self._fsyncs.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.store.fsync(e.start, e.upto)
                self.stats["fsyncs"] += 1
            except OSError as err:
                self.log(f"fsync failed ({err}): the store turns read-only")
                self._call(self.core.fsync_failed, e.start, e.upto, now_ms())
                continue
            self._call(self.core.fsync_done, e.start, e.upto, now_ms())

    # ------------------------------------------------------------ slaves

    def _accept_slaves(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self.ha_sock.accept()
            except OSError:
                return
            conn = Connection(sock, max(self.cfg.ha_transfer_batch_size, 1024) + 64, "slave")
            threading.Thread(target=self._read_slave, args=(conn,), daemon=True).start()

    def _read_slave(self, conn: Connection) -> None:
        """Move frames from one HA connection to the core; the core decides everything."""
        conn_id = next(self._conn_ids)
        with self.lock:
            self.ha_conns[conn_id] = conn
        self._call(self.core.replica_connection_opened, conn_id, now_ms())
        greeted = False
        for frame in conn.frames():
            if isinstance(frame, Handshake):
                greeted = True
                self._call(self.core.replica_handshake, conn_id, frame.name, frame.offset, frame.chain, now_ms(),
                           frame.records)
                if self.core.name_of(conn_id) == frame.name:
                    self.log(f"slave {frame.name} connected at offset {frame.offset} (connection {conn_id})")
            elif isinstance(frame, Ack) and greeted:
                self._call(self.core.replica_ack, conn_id, frame.offset, now_ms(), frame.records)
            else:
                what = "the first frame of a slave must be HANDSHAKE" if not greeted else "a slave sends ACKs only"
                self._call(self.core.replica_bad_input, conn_id, f"{type(frame).__name__} frame: {what}")
        with self.lock:
            self.ha_conns.pop(conn_id, None)
        self._call(self.core.replica_disconnected, conn_id)
        self.log(f"slave connection {conn_id} ended: {conn.close_reason}")


def serve_master(args) -> int:
    """`ackorder broker master`: run until killed."""
    from reference.config import store_config_from_args

    cfg = store_config_from_args(args)
    replicas = tuple(r for r in args.replicas.split(",") if r) if args.replicas else ()
    server = MasterServer(Path(args.dir), cfg, replicas, args.host, args.port, args.ha_port,
                          log=lambda msg: print(msg, flush=True))
    server.store.fail_fsync_after = args.inject_fsync_eio_after
    server.store.fail_write_after = args.inject_write_fault_after
    server.store.fail_write_kind = args.inject_write_fault
    r = server.recovery
    print(f"recovered {len(r.records)} records, log ends at {r.end_offset}"
          + "".join(f"; dropped: {d}" for d in r.dropped), flush=True)
    server.start()
    print(f"listening host={args.host} port={server.port} ha_port={server.ha_port}", flush=True)

    def stop_on_sigterm(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    # The last line: what a benchmark needs to know (fsyncs per message).
    sys.stdout.write("stats " + " ".join(f"{k}={v}" for k, v in sorted(server.stats.items())) + "\n")
    sys.stdout.flush()
    return 0

