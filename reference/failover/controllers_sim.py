"""Several controllers, simulated: two controllers' sans-IO parts — ``ShardTable``
and the ControllerCore of each shard it owns, the code ``ackorder controller
--etcd`` runs (reference/failover/shards.py) — over an in-memory etcd with
etcd's semantics for what they use (a key's create_revision and
mod_revision, leases that delete their keys, one transaction's compares),
through tla/AckOrderControllers.tla's actions: TakeShard, LeaseExpires (the
owner not told), heartbeats reaching the owner, broker crashes and
restarts, time passing (each core's scan: Expire and ElectMaster), the
master's AlterSyncStateSet, and commits that reach etcd late, in any order
(a paused owner, a slow network).  A controller notices its lease is gone
only through ``ShardTable.lease_fresh``.

Every commit that etcd applies is checked against the spec's properties on
the group key, with the spec's ghosts kept here: StoreRefinesFailover (the
register moves along a path of failover ElectMaster and AlterSyncStateSet
steps: one write carries the shard's last record of each group, so it may
stand for several decisions), OneMasterPerEpoch, ElectOnlyASilentMaster (an
election replaces only a master that went down and was not heard since).
The last is judged when the core decides, as the spec's ElectMaster reads
the controller's view: the write lands later, by which time a crashed
master may have restarted and heartbeated — a fresh process, fenced until
it learns its role.

Two drivers: the Hypothesis machine (stateful_tests/controllers_machine.py)
and ``simulate(seed, steps, bugs)``, a seeded run for `ackorder fuzz --model
controllers` (spark_fuzz/seeds.py)."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

import attrs

from reference.failover import shards as sh
from reference.failover.controller import ControllerConfig
from reference.failover.effects import NO_MASTER, PersistMetadata
from reference.failover.metadata import encode, scan

CONTROLLERS = ("c0", "c1")
BROKERS = (1, 2, 3)
GROUP = "broker-a"
TIMEOUT_MS = 1000
LEASE_TTL_S = 3
MAX_PENDING_COMMITS = 6
STEP_MS = (100, 400, TIMEOUT_MS // 2, TIMEOUT_MS + 1)


class ControllersViolation(AssertionError):
    def __init__(self, prop: str, detail: str) -> None:
        super().__init__(f"{prop}: {detail}")
        self.prop = prop


@attrs.define
class Kv:
    value: bytes
    create_revision: int
    mod_revision: int
    lease: str | None = None


class MemoryEtcd:
    """What the runtime uses of etcd, on one revision counter (etcd's MVCC)."""

    def __init__(self) -> None:
        self.kv: dict[bytes, Kv] = {}
        self.revision = 1

    def put_if_absent(self, key: bytes, value: bytes, lease: str) -> int | None:
        if key in self.kv:
            return None
        self.revision += 1
        self.kv[key] = Kv(value, self.revision, self.revision, lease)
        return self.revision

    def revoke(self, lease: str) -> None:
        doomed = [k for k, v in self.kv.items() if v.lease == lease]
        if doomed:
            self.revision += 1
        for k in doomed:
            del self.kv[k]

    def commit(self, c: sh.Commit) -> bool:
        """EtcdShards.commit's transaction: the shard token, each expected mod_revision; then every put."""
        skey = sh.shard_key(c.shard)
        if c.token and (skey not in self.kv or self.kv[skey].create_revision != c.token):
            return False
        for p in c.puts:
            held = self.kv[p.key].mod_revision if p.key in self.kv else 0
            if p.expect_mod_revision is not None and held != p.expect_mod_revision:
                return False
        self.revision += 1
        for p in c.puts:
            old = self.kv.get(p.key)
            self.kv[p.key] = Kv(p.value, old.create_revision if old else self.revision, self.revision)
        return True


class ControllersWorld:
    def __init__(self, bugs=frozenset()) -> None:
        self.bugs = frozenset(bugs)
        self.etcd = MemoryEtcd()
        cfg = ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT_MS)
        self.tables = {c: sh.ShardTable(c, 1, cfg, self.bugs) for c in CONTROLLERS}
        self.now_ms = 0
        self.lease_ok_ms = dict.fromkeys(CONTROLLERS, 0)     # when each one's last keep-alive was answered
        self.lease_alive = dict.fromkeys(CONTROLLERS, True)
        self.up = dict.fromkeys(BROKERS, True)
        self.silent = dict.fromkeys(BROKERS, False)           # inv_silent: down, and not heard since
        self.elected = {1: 1}                                  # inv_elected: epoch -> master
        self.pending: list[tuple] = []        # (controller, its Owned, the commit) on their way to etcd
        # per shard core (its Owned): its last decided record, and (core token, why) of each election it
        # decided while the master it replaced was still heard
        self.last_decided: dict[int, object] = {}
        self.cores_seen: list = []
        self.deposed_live: dict[int, list[tuple[int, str]]] = {}
        self.rid = 0
        # the group's first registrations, decided by whichever controller takes the shard first
        self._take("c0")
        core = self.tables["c0"].owned[0].core
        for b in BROKERS:
            self.rid += 1
            core.register_broker(self.rid, GROUP, b, self.now_ms)
        self._stage("c0")
        while self.pending:
            self._deliver(0)

    # ------------------------------------------------------------------ helpers

    def _record(self):
        kv = self.etcd.kv.get(sh.meta_key(0, GROUP))
        return scan(kv.value).records[0] if kv else None

    def _take(self, c: str) -> None:
        token = self.etcd.put_if_absent(sh.shard_key(0), sh.owner_value(c, "127.0.0.1:1"), c)
        if token is None:
            return
        kvs = [(k, v) for k, v in self.etcd.kv.items() if k.startswith(sh.shard_prefix(0)) and k.endswith(b"/m")]
        records = [(scan(v.value).records[0], v.mod_revision) for _, v in kvs]
        for b in BROKERS:                 # TakeShard: inv_silent := ~up
            self.silent[b] = not self.up[b]
        o = self.tables[c].adopt(0, token, records, self.now_ms)
        self.cores_seen.append(o)            # kept alive: ids key the ghosts below
        self.last_decided[id(o)] = records[0][0] if records else None
        # the runtime's next loop turn ticks the new core at once (ControllerCore starts its scan due)
        o.core.tick(self.now_ms)
        self._stage(c)

    def _stage(self, c: str) -> None:
        """ClusterController._perform and _sync: the core's records staged, the next commit sent
        (one in flight per shard; it reaches etcd when ``commit_reaches_etcd`` picks it)."""
        t = self.tables[c]
        o = t.owned.get(0)
        if o is None:
            return
        for e in o.core.take_effects():
            if isinstance(e, PersistMetadata):
                before = self.last_decided.get(id(o))
                r = e.record
                if before is not None and r.master_epoch > before.master_epoch and before.master_id != NO_MASTER and \
                        not self.silent[before.master_id]:
                    self.deposed_live.setdefault(id(o), []).append(
                        (e.token, f"epoch {r.master_epoch} replaced master {before.master_id}, which kept heartbeating"))
                self.last_decided[id(o)] = r
                t.stage(0, e.token, e.record)
        commit = t.next_commit(0, {}, encode, lambda known: b"{}")
        if commit is not None:
            assert len(self.pending) < MAX_PENDING_COMMITS, "one commit in flight per controller"
            self.pending.append((c, o, commit))

    def _deliver(self, i: int) -> None:
        """etcd applies the commit (or refuses it); its controller hears back as ClusterController._committed."""
        c, o, commit = self.pending.pop(i)
        before = self._record()
        ok = self.etcd.commit(commit)
        if ok:
            self._check(before, self._record())
            if why := next((w for tok, w in self.deposed_live.get(id(o), []) if tok <= commit.up_to), None):
                raise ControllersViolation("ElectOnlyASilentMaster", why)
        t = self.tables[c]
        if t.owned.get(0) is not o or o.in_flight is not commit:
            return                          # lost meanwhile: its replies failed already
        if ok:
            up_to = t.committed(commit, self.etcd.revision)
        else:
            kv = self.etcd.kv.get(sh.shard_key(0))
            parsed = sh.parse_owner(kv.value) if kv else None
            held = {p.key: (self.etcd.kv[p.key].value, self.etcd.kv[p.key].mod_revision)
                    for p in commit.puts if p.key in self.etcd.kv}
            if t.judge(commit, (parsed[0], kv.create_revision) if parsed else None, held) != "ours":
                t.drop(0)                   # lost, or a conflict: taken afresh later
                return
            up_to = commit.up_to
        if up_to > o.core.durable_token:
            o.core.metadata_durable(up_to, self.now_ms)
        self._stage(c)

    def _check(self, s, t) -> None:
        if s is None or t is None:
            return
        if t.master_epoch > s.master_epoch and t.master_id != NO_MASTER:
            if self.elected.setdefault(t.master_epoch, t.master_id) != t.master_id:
                raise ControllersViolation("OneMasterPerEpoch", f"epoch {t.master_epoch}: masters "
                                                                f"{self.elected[t.master_epoch]} and {t.master_id}")
        # One write carries a shard's last record of each group (group commit): several decisions, so
        # the register moves along a path of the failover controller's steps, not one step.
        same = (s.master_id, s.master_epoch, s.sync_state_set, s.sss_epoch) == \
            (t.master_id, t.master_epoch, t.sync_state_set, t.sss_epoch)
        alters = (t.master_epoch == s.master_epoch and t.master_id == s.master_id != NO_MASTER
                  and t.sss_epoch > s.sss_epoch and s.master_id in t.sync_state_set)
        elections = (t.master_epoch > s.master_epoch and t.sss_epoch >= s.sss_epoch
                     and (t.master_id == NO_MASTER or t.master_id in t.sync_state_set))
        if not (same or alters or elections):
            raise ControllersViolation("StoreRefinesFailover", f"{s} -> {t} is no path of ElectMaster and "
                                                               f"AlterSyncStateSet steps")

    # ------------------------------------------------------------------ the spec's actions

    def take_shard(self, c: str) -> None:
        if 0 not in self.tables[c].owned and self.lease_alive[c]:
            self._take(c)

    def lease_expires(self, c: str) -> None:
        """The owner's keep-alives stop reaching etcd (a pause, a partition); it is not told."""
        self.etcd.revoke(c)
        self.lease_alive[c] = False

    def rejoin(self, c: str) -> None:
        """A controller that noticed its lease gone (lease_fresh) drops its shards and gets a new one."""
        if not self.lease_alive[c] and not self.tables[c].lease_fresh((self.now_ms - self.lease_ok_ms[c]) / 1000,
                                                                      LEASE_TTL_S):
            self.tables[c].drop(0)
            self.lease_alive[c] = True
            self.lease_ok_ms[c] = self.now_ms

    def heartbeat(self, b: int) -> None:
        """A broker's heartbeat reaches the shard's owner in etcd (forwarded by any controller)."""
        if not self.up[b]:
            return
        owner_kv = self.etcd.kv.get(sh.shard_key(0))
        if owner_kv is None:
            return
        owner = sh.parse_owner(owner_kv.value)[0]
        o = self.tables[owner].owned.get(0)
        if o is None:
            return
        self.rid += 1
        o.core.broker_heartbeat(self.rid, GROUP, b, self.now_ms, max_offset=100)
        o.core.take_effects()
        self.silent[b] = False

    def broker_crash(self, b: int) -> None:
        if self.up[b]:
            self.up[b] = False
            self.silent[b] = True

    def broker_restart(self, b: int) -> None:
        self.up[b] = True

    def time_passes(self, ms: int) -> None:
        """Every controller's clock and scan (Expire, ElectMaster); a live owner's keep-alives are
        answered; every running broker's heartbeat of the interval reaches the owner etcd names (the
        spec's Heartbeat: a broker that runs is never expired by the owner that hears it)."""
        self.now_ms += ms
        for b in BROKERS:
            self.heartbeat(b)
        for c, t in self.tables.items():
            if self.lease_alive[c]:
                self.lease_ok_ms[c] = self.now_ms
            elif 0 in t.owned and not t.lease_fresh((self.now_ms - self.lease_ok_ms[c]) / 1000, LEASE_TTL_S):
                t.drop(0)                  # ClusterController._lease_fresh: stop acting
            o = t.owned.get(0)
            if o is not None:
                o.core.tick(self.now_ms)
                self._stage(c)

    def alter_sync_state_set(self, c: str, member: int) -> None:
        """The master's proposal (add or drop ``member``), to whichever controller owns the shard in its view."""
        o = self.tables[c].owned.get(0)
        g = o.core.groups.get(GROUP) if o is not None else None
        if g is None or g.master_id == NO_MASTER or member == g.master_id:
            return
        new = g.sync_state_set - {member} if member in g.sync_state_set else g.sync_state_set | {member}
        self.rid += 1
        o.core.alter_sync_state_set(self.rid, GROUP, g.master_id, g.master_epoch, g.sss_epoch, new, self.now_ms)
        self._stage(c)

    def commit_reaches_etcd(self, i: int) -> None:
        self._deliver(i)


    def one_master_per_epoch(self) -> None:
        r = self._record()
        if r is not None and r.master_id != NO_MASTER and self.elected.get(r.master_epoch, r.master_id) != r.master_id:
            raise ControllersViolation("OneMasterPerEpoch", f"etcd holds master {r.master_id} in epoch {r.master_epoch}")


@attrs.frozen
class ControllersRun:
    seed: int
    steps: int                      # draws made (a replay with this many steps is the same run)
    labels: tuple[str, ...]
    violation: str | None
    detail: str
    counts: dict

    @property
    def trace_hash(self) -> str:
        return hashlib.sha256("\n".join(self.labels).encode()).hexdigest()[:16]


def simulate(seed: int, steps: int = 400, bugs: tuple[str, ...] = ()) -> ControllersRun:
    """One seeded run of ``steps`` actions, drawn as the machine draws its rules; stops at the
    first violation.  The same seed and bugs give the same run (the trace hash says so)."""
    rng = random.Random(seed)
    w = ControllersWorld(frozenset(bugs))
    labels: list[str] = []
    counts: Counter = Counter()
    for drawn in range(1, steps + 1):
        kind = rng.choices(("take", "expire", "rejoin", "heartbeat", "crash", "restart", "time", "alter", "deliver"),
                           weights=(2, 1, 2, 3, 1, 2, 6, 3, 5))[0]
        c, b = rng.choice(CONTROLLERS), rng.choice(BROKERS)
        label = {"take": f"TakeShard({c})", "expire": f"LeaseExpires({c})", "rejoin": f"Rejoin({c})",
                 "heartbeat": f"Heartbeat({b})", "crash": f"BrokerCrash({b})", "restart": f"BrokerRestart({b})",
                 "time": "Tick", "alter": f"AlterSyncStateSet({c},{b})", "deliver": "Commit"}[kind]
        try:
            if kind == "take":
                w.take_shard(c)
            elif kind == "expire":
                w.lease_expires(c)
            elif kind == "rejoin":
                w.rejoin(c)
            elif kind == "heartbeat":
                w.heartbeat(b)
            elif kind == "crash":
                w.broker_crash(b)
            elif kind == "restart":
                w.broker_restart(b)
            elif kind == "time":
                w.time_passes(rng.choice(STEP_MS))
            elif kind == "alter":
                w.alter_sync_state_set(c, b)
            elif w.pending:
                w.commit_reaches_etcd(rng.randrange(len(w.pending)))
            else:
                continue
            w.one_master_per_epoch()
        except ControllersViolation as v:
            labels.append(label)
            return ControllersRun(seed, drawn, tuple(labels), v.prop, str(v), dict(counts))
        labels.append(label)
        counts[kind] += 1
    return ControllersRun(seed, steps, tuple(labels), None, "", dict(counts))
