"""`ackorder controller --etcd H:P,...`: one of several controllers over one
etcd (issue 37, seed 002; the design is docs/controllers.md).

Any controller serves any broker.  The groups are hashed into shards
(reference/failover/shards.py); each shard has one owner at a time, the
controller holding its etcd key under its lease, and the owner runs a
ControllerCore for the shard's groups — the same core, rules and bounds as
the single controller.  A request for a group of a shard owned here goes to
that core; one for another owner's shard is forwarded to it (heartbeats,
registrations, AlterSyncStateSet, ElectMaster); GetReplicaInfo of a shard
owned elsewhere is answered from etcd directly, a linearizable read served
by this controller's own member (etcd's ReadIndex), so reads spread over
every controller and every member.

The cores' records leave as fenced transactions, one in flight per shard
and many shards at once (reference/real/etcd_shards.py); a reply waits for
the commit that covers its decision, as with the file store.  A shard whose
compare fails is lost or re-read (ShardTable.judge): its held replies fail
(CONTROLLER_METADATA_NOT_DURABLE: not decided here) and the broker asks
again.  etcd without a majority: every shard is lost in turn, the
controller keeps its connections and takes shards again once a majority is
back — it never exits for that.  Only a lease it cannot get at start is
exit 3; a shard count other than the one etcd records, or a controller id
another live controller holds, is exit 2.

The lease: a controller stops acting for its shards once 2/3 of the TTL
has passed since the last keep-alive etcd answered (counted from when that
attempt was sent), checked on a timer and before every request for a
local shard, so an owner cut off from etcd answers CONTROLLER_NOT_LEADER
(and its brokers move on) before etcd can hand the shard to another.

One event loop owns the connections and the cores (reference/real/loop.py);
the etcd thread performs I/O and hands results back through call_soon.
"""

from __future__ import annotations

import itertools
import json
import selectors
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable

import attrs

from reference.failover import effects as fx
from reference.failover import shards as sh
from reference.failover import wire
from reference.failover.controller import DISCARD, ControllerConfig
from reference.failover.effects import ReplicaInfo, Reply
from reference.failover.metadata import encode, scan
from reference.frames import frame_bytes
from reference.real.controller_server import CLIENT, HOUSEKEEPING_MS, MAX_CONNECTIONS, ControllerConns, dispatch
from reference.real.etcd_shards import ClusterMismatch, EtcdShards
from reference.real.guard import FRAME_DEADLINE_MS_DEFAULT, PARTIAL_FRAME_BUDGET_BYTES_DEFAULT, FrameGuard
from reference.real.loop import Conn, Loop, listen, now_ms, reserve_descriptors
from reference.real.metadata_store import ETCD_TIMEOUT_MS_DEFAULT
from reference.real.options import connections_flag, positive_flag, require_secret
from spec.config import ConfigError

MAX_IN_FLIGHT_IO = 1 << 14        # forwards and etcd reads waiting at once; more are answered CONTROLLER_BUSY
MAX_ADDRESSES_JSON_BYTES = 1 << 14
KNOWN_CODES = frozenset(v for k, v in vars(fx).items() if k.isupper() and isinstance(v, str))


@attrs.frozen
class ClusterOptions:
    etcd_endpoints: tuple[tuple[str, int], ...]
    controller_id: str
    config: ControllerConfig = ControllerConfig()
    host: str = "127.0.0.1"
    port: int = 9878
    advertise: str | None = None            # HOST:PORT the other controllers forward to (default host:bound port)
    shards: int = sh.SHARDS_DEFAULT
    lease_ttl_s: int = sh.LEASE_TTL_S_DEFAULT
    etcd_timeout_ms: int = ETCD_TIMEOUT_MS_DEFAULT
    bugs: frozenset[str] = frozenset()      # SHARD_BUG_NAMES
    max_connections: int = attrs.field(default=MAX_CONNECTIONS, validator=connections_flag)
    idle_timeout_ms: int = attrs.field(default=120_000, validator=positive_flag)
    frame_deadline_ms: int = attrs.field(default=FRAME_DEADLINE_MS_DEFAULT, validator=positive_flag)
    partial_frame_budget_bytes: int = attrs.field(default=PARTIAL_FRAME_BUDGET_BYTES_DEFAULT, validator=positive_flag)
    peer_secret: bytes | None = attrs.field(default=None, repr=False)


def encode_addresses(known: dict[int, str]) -> bytes:
    return json.dumps({str(b): a for b, a in sorted(known.items())}, separators=(",", ":")).encode()


def decode_addresses(value: bytes, where: str) -> dict[int, str]:
    """A group's addresses key; ValueError naming ``where`` if it is not what encode_addresses writes."""
    try:
        obj = json.loads(value) if len(value) <= MAX_ADDRESSES_JSON_BYTES else None
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict) or not all(isinstance(k, str) and k.isascii() and k.isdigit() and isinstance(v, str)
                                            and len(v.encode(errors="replace")) <= wire.MAX_ADDRESS_BYTES
                                            for k, v in obj.items()):
        raise ValueError(f"{where}: not a JSON object of broker id -> address")
    return {int(k): v for k, v in obj.items()}


def decode_record(key: bytes, value: bytes):
    s = scan(value, f"etcd key {key.decode(errors='replace')}")
    if s.problem is not None or len(s.records) != 1:
        raise ValueError(s.problem or f"etcd key {key.decode(errors='replace')}: holds {len(s.records)} records, not 1")
    return s.records[0]


class ClusterController(ControllerConns):
    def __init__(self, opts: ClusterOptions, log: Callable[[str], None] = print) -> None:
        self.opts, self.log = opts, log
        self.max_connections, self.idle_timeout_ms = opts.max_connections, opts.idle_timeout_ms
        self.peer_secret = opts.peer_secret
        require_secret(opts.host, opts.peer_secret, "controller")
        self.guard = FrameGuard(opts.frame_deadline_ms, opts.partial_frame_budget_bytes, wire.MAX_FRAME_BYTES)
        reserve_descriptors(opts.max_connections)
        self.loop = Loop()
        self.sock = listen(opts.host, opts.port)
        self.port = self.sock.getsockname()[1]
        self.address = opts.advertise or sh.join_address(opts.host, self.port)
        # a heartbeat finds a new owner within one survey of the others plus a broker's move between
        # controllers; a lease TTL covers both (its survey is a third of it)
        self.table = sh.ShardTable(opts.controller_id, opts.shards, opts.config, opts.bugs,
                                   routing_lag_ms=opts.lease_ttl_s * 1000)
        self.etcd = EtcdShards(list(opts.etcd_endpoints), opts.controller_id, self.address, opts.lease_ttl_s,
                               opts.etcd_timeout_ms, opts.peer_secret, opts.shards)
        try:
            self.etcd.wait(self.etcd.join(), lease=True)
        except ClusterMismatch as err:
            self.etcd.close()
            self.sock.close()
            self.loop.close()
            raise ConfigError(str(err)) from None
        except BaseException:
            self.etcd.close()
            self.sock.close()
            self.loop.close()
            raise
        self.loop.selector.register(self.sock, selectors.EVENT_READ, CLIENT)
        self.conns: dict[int, Conn] = {}
        self._conn_ids = itertools.count(1)
        self._req_ids = itertools.count(1)
        self.routes: dict[int, tuple[Conn, int]] = {}
        self.addresses: dict[str, dict[int, str]] = {}
        self._dirty: set[Conn] = set()
        self.in_flight_io = 0
        self.surveying = False
        self.stats: Counter = Counter()
        self.survey_ms = max(100, opts.lease_ttl_s * 1000 // 3)
        self.loop.call_at(now_ms(), self._survey)
        self.loop.call_at(now_ms() + 100, self._check_lease)
        self.loop.call_at(now_ms() + HOUSEKEEPING_MS, self._check_idle)

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        try:
            while not self.loop.stopping:
                self.loop.run_once(max(0, self._next_wakeup_ms() - now_ms()), self._on_event)
                self._turn()
        finally:
            self._shutdown()

    def stop(self) -> None:
        self.loop.stop()

    def _next_wakeup_ms(self) -> int:
        return min((o.core.next_wakeup_ms() for o in self.table.owned.values()), default=now_ms() + 1000)

    def _turn(self) -> None:
        now = now_ms()
        for s, o in list(self.table.owned.items()):
            if o.core.next_wakeup_ms() <= now:
                o.core.tick(now)
            self._perform(s)
        for s in list(self.table.owned):
            self._sync(s)
        dirty, self._dirty = self._dirty, set()
        for conn in dirty:
            self._flush(conn)

    def _io(self, coro, done: Callable, failed: Callable, lease: bool = False) -> None:
        self.in_flight_io += 1

        def finish(fn):
            def run(arg) -> None:
                self.in_flight_io -= 1
                fn(arg)
            return run
        self.etcd.submit(coro, finish(done), finish(failed), self.loop.call_soon, lease)

    # ------------------------------------------------------------------ shards

    def _lease_fresh(self) -> bool:
        """False (and every shard dropped) once etcd may have expired our lease without our knowing:
        2/3 of the TTL since the last keep-alive it answered was sent."""
        if not self.table.owned:
            return True
        since_s = time.monotonic() - self.etcd.lease_ok_s
        if self.table.lease_fresh(since_s, self.opts.lease_ttl_s):
            return True
        for s in list(self.table.owned):
            self._lose(s, f"no keep-alive answered for {since_s:.1f} s of the {self.opts.lease_ttl_s} s lease")
        return False

    def _check_lease(self) -> None:
        self._lease_fresh()
        self.loop.call_at(now_ms() + 100, self._check_lease)

    def _survey(self) -> None:
        if self.surveying:
            return
        self.surveying = True

        async def keep_and_survey():
            if not await self.etcd.keep_alive():
                await self.etcd.join()
                return None
            return await self.etcd.survey()
        self._io(keep_and_survey(), self._surveyed, self._survey_failed, lease=True)

    def _survey_failed(self, err: OSError) -> None:
        self.surveying = False
        self.stats["survey_failed"] += 1
        self.log(f"survey failed: {err}")
        self.loop.call_at(now_ms() + self.survey_ms, self._survey)

    def _surveyed(self, survey: sh.Survey | None) -> None:
        self.surveying = False
        self.loop.call_at(now_ms() + self.survey_ms, self._survey)
        if survey is None:
            for s in list(self.table.owned):
                self._lose(s, "the lease expired; a new one is granted")
            return
        take, give, lost = self.table.plan(survey)
        for s in lost:
            self._lose(s, "its key is gone or another's (the lease expired?)")
        for s in give:
            token = survey.owners[s][1]
            self._lose(s, f"given back to the preferred controller {sh.preferred(s, survey.members)}")
            self._io(self.etcd.give_back(s, token), lambda _: None, self._log_io_failure)
        for s in take:
            self.table.taking.add(s)
            self._io(self.etcd.take(s), lambda got, s=s: self._taken(s, got),
                     lambda err, s=s: (self.table.taking.discard(s), self._log_io_failure(err)))

    def _log_io_failure(self, err: OSError) -> None:
        self.stats["io_failed"] += 1
        self.log(str(err))

    def _taken(self, shard: int, got) -> None:
        self.table.taking.discard(shard)
        if got is None:
            return
        token, kvs = got
        if shard in self.table.owned:        # a second take of a shard held meanwhile: not ours to keep twice
            self._io(self.etcd.give_back(shard, token), lambda _: None, self._log_io_failure)
            return
        records, addresses = [], {}
        try:
            for key, value, rev in kvs:
                if key.endswith(b"/m"):
                    r = decode_record(key, value)
                    if sh.meta_key(shard, r.group) != key:
                        raise ValueError(f"etcd key {key.decode(errors='replace')} holds the record of group "
                                         f"{r.group!r}, which is stored under another key")
                    records.append((r, rev))
                elif key.endswith(b"/a"):
                    addresses[sh.group_of(key)] = decode_addresses(value, f"etcd key {key.decode(errors='replace')}")
            o = self.table.adopt(shard, token, records, now_ms())
        except (ValueError, ConfigError) as err:
            self.stats["shard_refused"] += 1
            self.log(f"shard {shard}: not taken, its metadata is malformed: {err}")
            self._io(self.etcd.give_back(shard, token), lambda _: None, self._log_io_failure)
            return
        o.core.steps = DISCARD
        for g, known in addresses.items():
            self.addresses.setdefault(g, {}).update(known)
        self.stats["shards_taken"] += 1
        self.log(f"took shard {shard} (token {token}): {len(records)} broker groups")

    def _lose(self, shard: int, reason: str) -> sh.Owned | None:
        o = self.table.drop(shard)
        if o is None:
            return None
        self.stats["shards_lost"] += 1
        self.log(f"shard {shard} lost: {reason}")
        o.core.metadata_failed(o.core.issued_token, f"shard {shard} lost: {reason}", now_ms())
        for e in o.core.take_effects():
            if isinstance(e, Reply):
                self._reply(e)
        return o

    # ------------------------------------------------------------------ requests

    def _request(self, conn: Conn, req, now: int) -> None:
        if not isinstance(req, wire.Request):
            conn.queue_bytes(wire.encode_error(f"a client sent a {type(req).__name__} frame"))
            self._close(conn, "a client sent a frame that is not a REQUEST")
            return
        rid = next(self._req_ids)
        self.routes[rid] = (conn, req.id)
        self.stats[req.op] += 1
        where, shard, owner = self.table.route(req.group)
        if where == "local" and not self._lease_fresh():
            where, shard, owner = self.table.route(req.group)
        if where == "local":
            self._local(rid, shard, req, now)
        elif req.op == "info":
            self._read_info(rid, shard, req.group)
        elif where == "forward" and not req.fields["forwarded"]:
            self._forward(rid, owner, req)
        else:
            self._reply(Reply(rid, fx.CONTROLLER_NOT_LEADER, f"shard {shard} of group {req.group!r} has no live owner"
                              if where == "none" else f"shard {shard} is not owned here (forwarded twice?)"))

    def _local(self, rid: int, shard: int, req: wire.Request, now: int) -> None:
        o, f = self.table.owned[shard], req.fields
        if f["address"] and req.op in ("register", "heartbeat"):
            self._remember_address(o, req.group, f["broker_id"], f["address"])
        dispatch(o.core, rid, req, now)
        self._perform(shard)

    def _busy(self, rid: int) -> bool:
        if self.in_flight_io < MAX_IN_FLIGHT_IO:
            return False
        self._reply(Reply(rid, fx.CONTROLLER_BUSY, f"{MAX_IN_FLIGHT_IO} forwards and reads wait already"))
        return True

    def _forward(self, rid: int, owner: str, req: wire.Request) -> None:
        if self._busy(rid):
            return
        fields = {k: v for k, v in req.fields.items() if k != "forwarded" and v != ""}
        self.stats["forwarded"] += 1
        self._io(self.etcd.forward(owner, req.op, req.group, fields), lambda body: self._relay(rid, body),
                 lambda err: self._reply(Reply(rid, fx.CONTROLLER_NOT_LEADER, f"the owner {owner} did not answer: "
                                                                            f"{err}")))

    def _relay(self, rid: int, body) -> None:
        route = self.routes.pop(rid, None)
        if route is None:
            return
        if not isinstance(body, dict):
            self.routes[rid] = route
            self._reply(Reply(rid, fx.CONTROLLER_NOT_LEADER, "the owner answered something that is not a reply"))
            return
        conn, client_id = route
        code = body.get("code")
        self.stats[f"reply_{code}" if code in KNOWN_CODES else "reply_unknown_code"] += 1
        if conn.closed:
            return
        out = dict(body, id=client_id)
        if conn.queue_bytes(frame_bytes(wire.ControllerFrame.REPLY, json.dumps(out, separators=(",", ":")).encode())):
            self._dirty.add(conn)
        else:
            self._close(conn, "the client does not read its replies")
        self._flush_dirty()

    def _read_info(self, rid: int, shard: int, group: str) -> None:
        """GetReplicaInfo of a shard owned elsewhere: from etcd, linearizable, via our own member."""
        if self._busy(rid):
            return
        self.stats["etcd_reads"] += 1
        self._io(self.etcd.read_group(shard, group), lambda kvs: self._info_read(rid, group, kvs),
                 lambda err: self._reply(Reply(rid, fx.CONTROLLER_NOT_LEADER, f"etcd read failed: {err}")))

    def _info_read(self, rid: int, group: str, kvs: list[tuple[bytes, bytes]]) -> None:
        record, addresses = None, {}
        try:
            for key, value in kvs:
                if key.endswith(b"/m"):
                    record = decode_record(key, value)
                    if record.group != group:
                        raise ValueError(f"etcd key {key.decode(errors='replace')} holds group {record.group!r}")
                elif key.endswith(b"/a"):
                    addresses = decode_addresses(value, f"etcd key {key.decode(errors='replace')}")
        except ValueError as err:
            self.log(f"GetReplicaInfo of {group!r}: {err}")
            self._reply(Reply(rid, fx.CONTROLLER_METADATA_NOT_DURABLE, f"malformed metadata in etcd: {err}"))
            return
        if record is None:
            self._reply(Reply(rid, fx.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker group {group!r} is registered"))
            return
        # liveness is the shard owner's (heartbeats go there): a follower read names nobody alive
        info = ReplicaInfo(group, record.master_id, record.master_epoch, record.sync_state_set, record.sss_epoch, ())
        self._reply(Reply(rid, fx.SUCCESS, info=info), addresses)
        self._flush_dirty()

    def _remember_address(self, o: sh.Owned, group: str, broker_id: int, address: str) -> None:
        cfg = self.opts.config
        known = self.addresses.get(group)
        if known is None:
            if len(self.addresses) >= cfg.max_groups * self.opts.shards:
                return
            known = self.addresses[group] = {}
        if known.get(broker_id) != address and (broker_id in known or len(known) < cfg.max_brokers_per_group):
            known[broker_id] = address
            o.addresses_dirty.add(group)

    # ------------------------------------------------------------------ effects and commits

    def _perform(self, shard: int) -> None:
        o = self.table.owned.get(shard)
        if o is None:
            return
        for e in o.core.take_effects():
            if isinstance(e, Reply):
                self._reply(e)
            else:
                assert isinstance(e, fx.PersistMetadata), e
                self.table.stage(shard, e.token, e.record)
                self.stats["records"] += 1

    def _sync(self, shard: int) -> None:
        o = self.table.owned.get(shard)
        if o is None:
            return
        # addresses of groups the core does not hold (a refused registration) are not written
        o.addresses_dirty &= o.core.groups.keys()
        commit = self.table.next_commit(shard, self.addresses, encode, encode_addresses)
        if commit is None:
            return
        self.stats["commits"] += 1
        self._io(self.etcd.commit(commit), lambda got: self._committed(commit, got),
                 lambda err: self._commit_failed(commit, err))

    def _commit_failed(self, commit: sh.Commit, err: OSError) -> None:
        self._committed(commit, ("error", str(err)))

    def _committed(self, commit: sh.Commit, got) -> None:
        """The commit's answer, as ShardTable.settle reads it."""
        action, up_to = self.table.settle(commit, got)
        if action != sh.DURABLE:
            self.stats[f"commit_{action.replace(' ', '_')}"] += 1
        if action == sh.STALE:
            return
        if action in (sh.LOSE, sh.GIVE_BACK):
            why = {"error": lambda: f"its commit got no answer: {got[1]}",
                   "failed": lambda: "its compare failed: " + ("the shard key is another's" if action == sh.LOSE else
                                                               "a key was written by another controller; taken "
                                                               "again from a fresh read")}[got[0]]()
            o = self._lose(commit.shard, why)
            if action == sh.GIVE_BACK and o is not None:
                self._io(self.etcd.give_back(commit.shard, o.token), lambda _: None, self._log_io_failure)
            return
        o = self.table.owned[commit.shard]
        if up_to > o.core.durable_token:
            o.core.metadata_durable(up_to, now_ms())
        self._perform(commit.shard)
        self._sync(commit.shard)
        self._flush_dirty()

    def _reply(self, e: Reply, addresses: dict[int, str] | None = None) -> None:
        self.stats[f"reply_{e.code}"] += 1
        route = self.routes.pop(e.req_id, None)
        if route is None:
            return
        conn, client_id = route
        if conn.closed:
            return
        if addresses is None and e.info is not None:
            addresses = self.addresses.get(e.info.group)
        if conn.queue_bytes(wire.encode_reply(client_id, e, addresses)):
            self._dirty.add(conn)
        else:
            self._close(conn, "the client does not read its replies")

    # ------------------------------------------------------------------ shutdown

    def _shutdown(self) -> None:
        for s in list(self.table.owned):
            self._lose(s, "controller stopping")
        for conn in list(self.conns.values()):
            self._flush(conn)
            self._close(conn, "controller stopping")
        try:
            self.sock.close()
        except OSError:
            pass
        self.etcd.close()
        self.loop.close()

    def stats_line(self) -> str:
        return ("stats " + " ".join(f"{k}={v}" for k, v in sorted(self.stats.items())) + " "
                + self.etcd.stats())


def serve_cluster_controller(opts: ClusterOptions) -> int:
    """`ackorder controller --etcd ...`: serve until SIGTERM or SIGINT (0); exit 3 if no lease at start."""
    runtime = ClusterController(opts, log=lambda msg: print(msg, flush=True))
    print(f"listening host={opts.host} port={runtime.port} controller={opts.controller_id} "
          f"advertise={runtime.address} shards={opts.shards} lease_ttl_s={opts.lease_ttl_s} "
          f"controller_broker_heartbeat_timeout_ms={opts.config.controller_broker_heartbeat_timeout_ms}", flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: runtime.stop())
    runtime.run()
    sys.stdout.write(runtime.stats_line() + "\n")
    sys.stdout.flush()
    return 0
