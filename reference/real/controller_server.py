"""The real controller: ControllerCore driven by one event loop
(reference/real/loop.py) over a real metadata store and TCP.

The store (reference/real/metadata_store.py) is a local file with
fdatasync (the default) or etcd (reference/real/etcd_store.py).  The loop
thread owns the core and performs its effects in the order they were
emitted: a PersistMetadata is staged in the store at once (the file: the
page cache), a Reply goes into its connection's buffer.  One worker thread
runs the store's sync (fdatasync, or etcd transactions); when it is idle
and records were staged since the last one, one sync covers all of them
and its completion is ``metadata_durable`` for the last (group commit;
with the serial design there is only ever one).  The inactive-broker scan is ``tick`` at the
time the core asks for.  A malformed frame gets one ERROR frame naming the
problem and its connection is closed; the others go on.  A failed sync
(fsync error; etcd without a majority, or a second controller writing the
same keys) fails every held reply and stops the controller (exit 3): what
it decided since may not be durable.
"""

from __future__ import annotations

import itertools
import selectors
import signal
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import attrs

from reference.failover import effects as fx
from reference.failover import wire
from reference.failover.controller import DISCARD, ControllerConfig, ControllerCore
from reference.real.guard import FRAME_DEADLINE_MS_DEFAULT, PARTIAL_FRAME_BUDGET_BYTES_DEFAULT, FrameGuard
from reference.real.loop import Conn, ConnServer, Loop, Worker, listen, now_ms, reserve_descriptors
from reference.real.metadata_store import (
    ETCD_TIMEOUT_MS_DEFAULT,
    FileStore,
    MetadataStore,
)
from reference.real.options import connections_flag, positive_flag, require_secret
from spec.config import ConfigError

CLIENT = "client"
ACCEPTS_PER_TURN = 256
CLIENT_OUT_BYTES = 4 << 20
MAX_CONNECTIONS = 16_384
HOUSEKEEPING_MS = 1000


@attrs.frozen
class ControllerOptions:
    directory: Path
    config: ControllerConfig = ControllerConfig()
    host: str = "127.0.0.1"
    port: int = 9878                 # RocketMQ's controller port (ControllerConfig / deploy.md)
    max_connections: int = attrs.field(default=MAX_CONNECTIONS, validator=connections_flag)
    idle_timeout_ms: int = attrs.field(default=120_000, validator=positive_flag)   # serverChannelMaxIdleTimeSeconds
    frame_deadline_ms: int = attrs.field(default=FRAME_DEADLINE_MS_DEFAULT, validator=positive_flag)
    partial_frame_budget_bytes: int = attrs.field(default=PARTIAL_FRAME_BUDGET_BYTES_DEFAULT, validator=positive_flag)
    peer_secret: bytes | None = attrs.field(default=None, repr=False)    # clients must prove they hold it
    store: str = "file"              # "file" (directory/controller.meta) or "etcd"
    etcd_endpoints: tuple[tuple[str, int], ...] = ()
    etcd_timeout_ms: int = ETCD_TIMEOUT_MS_DEFAULT
    store_bugs: frozenset[str] = frozenset()
    failover_trace: Path | None = None   # --failover-trace: the decisions, as spec steps (failover/proctrace.py)


def open_store(opts: ControllerOptions) -> MetadataStore:
    if opts.store == "file":
        return FileStore(opts.directory)
    assert opts.store == "etcd" and opts.etcd_endpoints, opts
    from reference.real.etcd_store import EtcdStore
    return EtcdStore(list(opts.etcd_endpoints), opts.etcd_timeout_ms, opts.store_bugs)


def dispatch(core: ControllerCore, rid: int, req: wire.Request, now: int) -> None:
    """A request to the core's event of the same name (the single controller's, or a shard's)."""
    f = req.fields
    if req.op == "heartbeat":
        core.broker_heartbeat(rid, req.group, f["broker_id"], now, f["epoch"], f["max_offset"],
                              f["election_priority"])      # (its confirm_offset: no rule reads it)
    elif req.op == "register":
        core.register_broker(rid, req.group, f["broker_id"], now, f["election_priority"])
    elif req.op == "alter":
        core.alter_sync_state_set(rid, req.group, f["master_id"], f["master_epoch"], f["sss_epoch"],
                                  f["sync_state_set"], now)
    elif req.op == "elect":
        core.elect_master(rid, req.group, now)
    else:
        core.get_replica_info(rid, req.group, now)


class ControllerConns(ConnServer):
    """The client side every controller server shares: accepting, reading frames (a malformed one
    gets one ERROR frame and its connection closed), closing, idle housekeeping, flushing.  A
    subclass sets ``loop``, ``sock``, ``conns``, ``_conn_ids``, ``_dirty``, ``guard``, ``log``,
    ``stats`` and decides in ``_request``."""

    def _on_event(self, key: selectors.SelectorKey, mask: int) -> None:
        if key.data == CLIENT:
            self._accept()
            return
        conn: Conn = key.data
        if mask & selectors.EVENT_WRITE:
            self._flush(conn)
        if mask & selectors.EVENT_READ and not conn.closed:
            now = now_ms()
            frames, problem = self._receive(conn, now)
            for frame in frames:
                self._request(conn, frame, now)
            if problem is not None:
                if problem.startswith("malformed") or conn.auth_failed:
                    conn.queue_bytes(wire.encode_error(problem))
                    conn.flush()
                    self.stats["bad_frames"] += 1
                self._close(conn, problem)

    def _accept(self) -> None:
        for sock, addr in self._accepted(self.sock, CLIENT, ACCEPTS_PER_TURN):
            conn = Conn(next(self._conn_ids), sock, CLIENT, wire.MAX_FRAME_BYTES, CLIENT_OUT_BYTES, now_ms(),
                        decode=wire.decode, peer=addr, auth=self._server_auth("controller"), auth_port=True)
            self.conns[conn.id] = conn
            self.loop.selector.register(sock, selectors.EVENT_READ, conn)

    def _close(self, conn: Conn, reason: str) -> None:
        if not conn.detach(self.loop.selector, reason):
            return
        self._dirty.discard(conn)
        self.guard.forget(conn.id)
        self.conns.pop(conn.id, None)
        if reason != "closed by peer":
            self.log(f"connection {conn.id} from {conn.peer} closed: {reason}")

    def _check_idle(self) -> None:
        now = now_ms()
        self._housekeep(now)
        self.loop.call_at(now + min(HOUSEKEEPING_MS, self.idle_timeout_ms, self.guard.frame_deadline_ms),
                          self._check_idle)

    def _flush(self, conn: Conn) -> None:
        if (problem := conn.drain(self.loop.selector)) is not None:
            self._close(conn, problem)

    def _flush_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for conn in dirty:
            self._flush(conn)

    def _request(self, conn: Conn, req, now: int) -> None:
        raise NotImplementedError


class ControllerRuntime(ControllerConns):
    def __init__(self, opts: ControllerOptions, log: Callable[[str], None] = print) -> None:
        self.opts = opts
        self.log = log
        self.max_connections, self.idle_timeout_ms = opts.max_connections, opts.idle_timeout_ms
        self.peer_secret = opts.peer_secret
        require_secret(opts.host, opts.peer_secret, "controller")
        self.guard = FrameGuard(opts.frame_deadline_ms, opts.partial_frame_budget_bytes, wire.MAX_FRAME_BYTES)
        reserve_descriptors(opts.max_connections)
        self.store = open_store(opts)
        try:
            self.recovery = self.store.recover()
        except BaseException:
            self.store.close()
            raise
        try:
            self.core = ControllerCore(opts.config, now_ms(), list(self.recovery.groups))
        except ConfigError as err:
            self.store.close()
            raise ConfigError(f"{self.store.where}: {err}") from None
        self.core.steps = DISCARD
        self.tracer = None
        if opts.failover_trace is not None:
            from reference.failover.proctrace import ControllerTracer, ProcessTrace
            self.core.steps = []
            self.tracer = ControllerTracer(ProcessTrace(opts.failover_trace, "controller", opts.config.bugs),
                                           opts.config.controller_broker_heartbeat_timeout_ms)
        self.loop = Loop()
        try:
            self.sock = listen(opts.host, opts.port)
        except OSError:
            self.store.close()
            self.loop.close()
            raise
        self.port = self.sock.getsockname()[1]
        self.loop.selector.register(self.sock, selectors.EVENT_READ, CLIENT)
        self.conns: dict[int, Conn] = {}
        self._conn_ids = itertools.count(1)
        self._req_ids = itertools.count(1)
        self.routes: dict[int, tuple[Conn, int]] = {}
        self.addresses: dict[str, dict[int, str]] = {}     # group -> broker id -> HOST:PORT:HA_PORT
        self._dirty: set[Conn] = set()
        self.flusher = Worker(self.loop, "metadata-fsync")
        self.written_token = self.recovery_token = 0
        self.syncing_token: int | None = None
        self.stats: Counter = Counter()
        self.failure: str | None = None
        self.loop.call_at(now_ms() + HOUSEKEEPING_MS, self._check_idle)

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        try:
            while not self.loop.stopping:
                self.loop.run_once(max(0, self.core.next_wakeup_ms() - now_ms()), self._on_event)
                self._turn()
        finally:
            self._shutdown()

    def stop(self) -> None:
        self.loop.stop()

    def _turn(self) -> None:
        now = now_ms()
        if self.core.next_wakeup_ms() <= now:
            self.core.tick(now)
        self._perform()
        self._sync()
        dirty, self._dirty = self._dirty, set()
        for conn in dirty:
            self._flush(conn)

    # ------------------------------------------------------------------ requests

    def _request(self, conn: Conn, req, now: int) -> None:
        if not isinstance(req, wire.Request):
            conn.queue_bytes(wire.encode_error(f"a client sent a {type(req).__name__} frame"))
            self._close(conn, "a client sent a frame that is not a REQUEST")
            return
        rid = next(self._req_ids)
        self.routes[rid] = (conn, req.id)
        self.stats[req.op] += 1
        f = req.fields
        if f["address"] and req.op in ("register", "heartbeat"):
            self._remember_address(req.group, f["broker_id"], f["address"])
        dispatch(self.core, rid, req, now)
        self._perform()

    # ------------------------------------------------------------------ effects

    def _perform(self) -> None:
        if self.tracer is not None:
            self.tracer.drain(self.core)      # stamped before any reply of theirs leaves
        for e in self.core.take_effects():
            if isinstance(e, fx.Reply):
                self._reply(e)
            else:
                assert isinstance(e, fx.PersistMetadata), e
                assert e.token == self.written_token + 1, (e.token, self.written_token)
                try:
                    self.store.stage(e.record)
                except OSError as err:
                    self._store_failed(e.token, err)
                    return
                self.written_token = e.token
                self.stats["records"] += 1

    def _remember_address(self, group: str, broker_id: int, address: str) -> None:
        """Where a broker serves, for GetReplicaInfo's answers (bounded like the core's groups)."""
        cfg = self.core.cfg
        known = self.addresses.get(group)
        if known is None:
            if len(self.addresses) >= cfg.max_groups:
                return
            known = self.addresses[group] = {}
        if broker_id in known or len(known) < cfg.max_brokers_per_group:
            known[broker_id] = address

    def _reply(self, e: fx.Reply) -> None:
        self.stats[f"reply_{e.code}"] += 1
        route = self.routes.pop(e.req_id, None)
        if route is None:
            return
        conn, client_id = route
        if conn.closed:
            return
        addresses = self.addresses.get(e.info.group) if e.info is not None else None
        if conn.queue_bytes(wire.encode_reply(client_id, e, addresses)):
            self._dirty.add(conn)
        else:
            self._close(conn, "the client does not read its replies")

    def _sync(self) -> None:
        """Group commit: one sync at a time, covering every record staged before it."""
        if self.syncing_token is not None or self.written_token <= self.core.durable_token or self.failure:
            return
        token = self.syncing_token = self.written_token
        started_ms = now_ms()
        self.flusher.submit(self.store.sync_job(), lambda _: self._synced(token, started_ms),
                            lambda err: self._store_failed(token, err))

    def _synced(self, token: int, started_ms: int) -> None:
        self.syncing_token = None
        self.stats["fsyncs"] += 1
        self.stats["fsync_wait_ms"] += now_ms() - started_ms
        self.core.metadata_durable(token, now_ms())
        self._perform()
        self._sync()

    def _store_failed(self, token: int, err: OSError) -> None:
        detail = str(err.strerror or err)
        self.failure = detail if self.store.where in detail else f"metadata store {self.store.where}: {detail}"
        self.log(f"{self.failure}; every waiting reply fails and the controller stops")
        self.core.metadata_failed(token, str(err), now_ms())
        self._perform()
        for conn in list(self.conns.values()):
            self._flush(conn)
        self.stop()

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        for conn in list(self.conns.values()):
            self._close(conn, "controller stopping")
        try:
            self.sock.close()
        except OSError:
            pass
        self.flusher.stop()
        self.store.close()
        self.loop.close()
        if self.tracer is not None:
            self.tracer.trace.close()

    def stats_line(self) -> str:
        extra = getattr(self.store, "stats", None)
        return "stats " + " ".join(f"{k}={v}" for k, v in sorted(self.stats.items())) + \
            (" " + extra() if extra else "")


def serve_controller(opts: ControllerOptions) -> int:
    """`ackorder controller`: serve until SIGTERM or SIGINT (0), or until the store fails (3)."""
    runtime = ControllerRuntime(opts, log=lambda msg: print(msg, flush=True))
    print(runtime.recovery.summary, flush=True)
    print(f"listening host={opts.host} port={runtime.port} design={opts.config.design} store={opts.store} "
          f"controller_broker_heartbeat_timeout_ms={opts.config.controller_broker_heartbeat_timeout_ms}",
          flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: runtime.stop())
    runtime.run()
    sys.stdout.write(runtime.stats_line() + "\n")
    sys.stdout.flush()
    return 3 if runtime.failure else 0
