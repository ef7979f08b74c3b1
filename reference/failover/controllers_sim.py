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

    def delete(self, key: bytes) -> None:
        if self.kv.pop(key, None) is not None:
            self.revision += 1

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
        self.lease_alive = dict.fromkeys(CONTROLLERS, True)  # etcd still holds its lease
        self.stalled = dict.fromkeys(CONTROLLERS, False)     # its keep-alives go unanswered (lease alive)
        self.up = dict.fromkeys(BROKERS, True)
        self.silent = dict.fromkeys(BROKERS, False)           # inv_silent: down, and not heard since
        self.elected = {1: 1}                                  # inv_elected: epoch -> master
        self.pending: list[tuple] = []        # (controller, its Owned, the commit, its first token) to etcd
        # per shard core (its Owned, by id; kept alive in cores_seen): the record each of its
        # decisions started from (token -> record), its last decided record, the last token sent
        self.before: dict[int, dict[int, object]] = {}
        self.last_decided: dict[int, object] = {}
        self.sent_up_to: dict[int, int] = {}
        self.cores_seen: list = []
        self.deposed_live: dict[int, list[tuple[int, str]]] = {}   # core -> (token, why) of such elections
        self.counts: Counter = Counter()
        self.rid = 0
        # the group's first registrations, decided by the first controller to take the shard
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
        """EtcdShards.take and ClusterController._taken: put the shard key if absent, read the shard."""
        token = self.etcd.put_if_absent(sh.shard_key(0), sh.owner_value(c, "127.0.0.1:1"), c)
        if token is None:
            return
        kvs = [(k, v) for k, v in self.etcd.kv.items() if k.startswith(sh.shard_prefix(0)) and k.endswith(b"/m")]
        records = [(scan(v.value).records[0], v.mod_revision) for _, v in kvs]
        for b in BROKERS:                 # TakeShard: inv_silent := ~up
            self.silent[b] = not self.up[b]
        o = self.tables[c].adopt(0, token, records, self.now_ms)
        self.cores_seen.append(o)
        self.before[id(o)], self.sent_up_to[id(o)] = {}, 0
        self.last_decided[id(o)] = records[0][0] if records else None
        self.counts["take"] += 1
        # the runtime's next loop turn ticks the new core at once (ControllerCore starts its scan due)
        o.core.tick(self.now_ms)
        self._stage(c)

    def _lose(self, c: str, give_back: bool = False) -> None:
        """ClusterController._lose: the shard dropped, its held replies failed; on a conflict its key
        given back (EtcdShards.give_back: delete it if it is still the one we created)."""
        t = self.tables[c]
        o = t.drop(0)
        if o is None:
            return
        o.core.metadata_failed(o.core.issued_token, "shard lost", self.now_ms)
        o.core.take_effects()
        kv = self.etcd.kv.get(sh.shard_key(0))
        if give_back and kv is not None and kv.create_revision == o.token:
            self.etcd.delete(sh.shard_key(0))

    def _decided(self, c: str, o, token: int, r) -> None:
        """One decision of a shard core, checked as the spec's step when it is decided: from the
        record it decided on, an ElectMaster (a new master the core counts alive, E4; replacing
        only a silent master) or an AlterSyncStateSet (every member counted alive, E3), or a
        registration (outside the register the spec models)."""
        prev = self.last_decided[id(o)]
        self.before[id(o)][token] = prev
        self.last_decided[id(o)] = r
        if prev is None:
            return                                  # the group's first registration: the spec's Init
        g = o.core.groups[GROUP]
        alive = lambda b: o.core.alive(g, b, self.now_ms)      # noqa: E731
        same = (prev.master_id, prev.master_epoch, prev.sync_state_set, prev.sss_epoch) == \
            (r.master_id, r.master_epoch, r.sync_state_set, r.sss_epoch)
        elect = r.master_epoch == prev.master_epoch + 1 and (
            (r.master_id == NO_MASTER and r.sync_state_set == prev.sync_state_set and r.sss_epoch == prev.sss_epoch)
            or (r.master_id in prev.sync_state_set and r.sync_state_set == (r.master_id,)
                and r.sss_epoch == prev.sss_epoch + 1 and alive(r.master_id)))
        alter = (r.master_id == prev.master_id != NO_MASTER and r.master_epoch == prev.master_epoch
                 and r.sss_epoch == prev.sss_epoch + 1 and prev.master_id in r.sync_state_set
                 and all(alive(b) for b in r.sync_state_set))
        if not (same or elect or alter):
            raise ControllersViolation("StoreRefinesFailover", f"{c} decided {prev} -> {r}: no ElectMaster or "
                                                               "AlterSyncStateSet step")
        if elect:
            self.counts["election"] += 1
            if prev.master_id != NO_MASTER and not self.silent[prev.master_id]:
                self.deposed_live.setdefault(id(o), []).append(
                    (token, f"epoch {r.master_epoch} replaced master {prev.master_id}, which kept heartbeating"))
        elif alter:
            self.counts["alter"] += 1

    def _stage(self, c: str) -> None:
        """ClusterController._perform and _sync: the core's records staged, the next commit sent
        (one in flight per shard; it reaches etcd when ``commit_reaches_etcd`` picks it)."""
        t = self.tables[c]
        o = t.owned.get(0)
        if o is None:
            return
        for e in o.core.take_effects():
            if isinstance(e, PersistMetadata):
                self._decided(c, o, e.token, e.record)
                t.stage(0, e.token, e.record)
        first = self.sent_up_to[id(o)] + 1
        commit = t.next_commit(0, {}, encode, lambda known: b"{}")
        if commit is not None:
            assert len(self.pending) < MAX_PENDING_COMMITS, "one commit in flight per controller"
            self.sent_up_to[id(o)] = commit.up_to
            self.pending.append((c, o, commit, first))

    def _deliver(self, i: int, answer: str = "heard") -> None:
        """etcd applies the commit (or refuses it) and its controller hears the answer ("heard"), or
        the answer is lost (a member died mid-request) and EtcdShards either gives up ("lost": no
        answer) or sends the same transaction again ("retried": its compares now judge it); then the
        controller acts as ClusterController._committed does."""
        assert answer in ("heard", "lost", "retried"), answer
        c, o, commit, first = self.pending.pop(i)
        stored = self._record()
        ok = self.etcd.commit(commit)
        if ok:
            self._check_write(o, commit, first, stored)
            self.counts["written"] += 1
        else:
            self.counts["refused"] += 1
        if answer == "retried":
            stored = self._record()
            ok = self.etcd.commit(commit)
            if ok:                              # applied again (no compare stopped it): the same values
                self._check_write(o, commit, first, stored)
        if answer == "lost":
            answer = ("error", "no answer")
        elif ok:
            answer = ("ok", self.etcd.revision)
        else:
            kv = self.etcd.kv.get(sh.shard_key(0))
            parsed = sh.parse_owner(kv.value) if kv else None
            answer = ("failed", (parsed[0], kv.create_revision) if parsed else None,
                      {p.key: (self.etcd.kv[p.key].value, self.etcd.kv[p.key].mod_revision)
                       for p in commit.puts if p.key in self.etcd.kv})
        action, up_to = self.tables[c].settle(commit, answer)
        self.counts[action if not (action == sh.DURABLE and answer[0] == "failed") else "ours after a retry"] += 1
        if action == sh.STALE:
            return
        if action in (sh.LOSE, sh.GIVE_BACK):
            self._lose(c, action == sh.GIVE_BACK)
            return
        if up_to > o.core.durable_token:
            o.core.metadata_durable(up_to, self.now_ms)
        o.core.take_effects()
        self._stage(c)

    def _check_write(self, o, commit, first: int, stored) -> None:
        """A write etcd applied continues the chain of decisions it carries from the record etcd
        held (the refinement: those decisions were taken on it), and names one master per epoch."""
        if stored is None or self._record() == stored:
            return                  # the group's first record, or the same values again (a retried write)
        if self.before[id(o)].get(first, stored) != stored:
            raise ControllersViolation("StoreRefinesFailover", f"a write decided on {self.before[id(o)][first]} "
                                                               f"replaced {stored}")
        if why := next((w for tok, w in self.deposed_live.get(id(o), []) if first <= tok <= commit.up_to), None):
            raise ControllersViolation("ElectOnlyASilentMaster", why)
        r = self._record()
        if r.master_epoch > stored.master_epoch and r.master_id != NO_MASTER:
            if self.elected.setdefault(r.master_epoch, r.master_id) != r.master_id:
                raise ControllersViolation("OneMasterPerEpoch", f"epoch {r.master_epoch}: masters "
                                                                f"{self.elected[r.master_epoch]} and {r.master_id}")

    # ------------------------------------------------------------------ the spec's actions

    def survey(self, c: str) -> None:
        """ClusterController._surveyed: the members and the shard key read, ShardTable.plan, and
        what it says done: TakeShard, a key given back, a shard lost."""
        if not self.lease_alive[c]:
            return
        members = {m: "127.0.0.1:1" for m in CONTROLLERS if self.lease_alive[m]}
        kv = self.etcd.kv.get(sh.shard_key(0))
        owners = {0: (sh.parse_owner(kv.value)[0], kv.create_revision)} if kv else {}
        take, give, lost = self.tables[c].plan(sh.Survey(members, owners))
        for _ in lost:
            self._lose(c)
        for _ in give:
            self._lose(c)
            if kv is not None and kv.create_revision == owners[0][1]:
                self.etcd.delete(sh.shard_key(0))
                self.counts["given back"] += 1
        for _ in take:
            self._take(c)

    def lease_expires(self, c: str) -> None:
        """The owner's keep-alives stop reaching etcd (a pause, a partition); it is not told."""
        self.etcd.revoke(c)
        self.lease_alive[c] = False
        self.counts["expire"] += 1

    def keepalive_stalls(self, c: str) -> None:
        """Its keep-alives go unanswered for a while, though etcd keeps the lease (a slow member)."""
        self.stalled[c] = True

    def keepalive_resumes(self, c: str) -> None:
        self.stalled[c] = False

    def rejoin(self, c: str) -> None:
        """A controller that noticed its lease gone (lease_fresh) drops its shards and gets a new one."""
        if not self.lease_alive[c] and not self.tables[c].lease_fresh((self.now_ms - self.lease_ok_ms[c]) / 1000,
                                                                      LEASE_TTL_S):
            self._lose(c)
            self.lease_alive[c], self.stalled[c] = True, False
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
        self._stage(owner)
        self.silent[b] = False

    def broker_crash(self, b: int) -> None:
        if self.up[b]:
            self.up[b] = False
            self.silent[b] = True
            self.counts["crash"] += 1

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
            if self.lease_alive[c] and not self.stalled[c]:
                self.lease_ok_ms[c] = self.now_ms
            elif 0 in t.owned and not t.lease_fresh((self.now_ms - self.lease_ok_ms[c]) / 1000, LEASE_TTL_S):
                self._lose(c)              # ClusterController._lease_fresh: stop acting
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

    def commit_reaches_etcd(self, i: int, answer: str = "heard") -> None:
        self._deliver(i, answer)

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
    for drawn in range(1, steps + 1):
        kind = rng.choices(KINDS, weights=WEIGHTS)[0]
        c, b = rng.choice(CONTROLLERS), rng.choice(BROKERS)
        answer = rng.choices(("heard", "lost", "retried"), weights=(8, 1, 1))[0]
        before = dict(w.counts)
        try:
            if kind == "deliver":
                if not w.pending:
                    continue
                w.commit_reaches_etcd(rng.randrange(len(w.pending)), answer)
            elif kind == "time":
                w.time_passes(rng.choice(STEP_MS))
            elif kind in ("heartbeat", "broker_crash", "broker_restart"):
                getattr(w, kind)(b)
            elif kind == "alter_sync_state_set":
                w.alter_sync_state_set(c, b)
            else:
                getattr(w, kind)(c)
            w.one_master_per_epoch()
        except ControllersViolation as v:
            labels.append(_label(kind, c, b, answer, before, w.counts))
            return ControllersRun(seed, drawn, tuple(labels), v.prop, str(v), dict(w.counts))
        labels.append(_label(kind, c, b, answer, before, w.counts))
    return ControllersRun(seed, steps, tuple(labels), None, "", dict(w.counts))


KINDS = ("survey", "lease_expires", "keepalive_stalls", "keepalive_resumes", "rejoin", "heartbeat", "broker_crash",
         "broker_restart", "time", "alter_sync_state_set", "deliver")
WEIGHTS = (3, 1, 1, 1, 2, 3, 1, 2, 6, 3, 5)


def _label(kind: str, c: str, b: int, answer: str, before: dict, after: Counter) -> str:
    """The step as the spec names it; a tick or a commit says what it decided or wrote."""
    if kind == "time":
        decided = [k for k in ("election", "alter") if after.get(k, 0) > before.get(k, 0)]
        return "Tick" + (f"[{','.join('ElectMaster' if k == 'election' else 'AlterSyncStateSet' for k in decided)}]"
                         if decided else "")
    if kind == "deliver":
        return {"heard": "Commit", "lost": "CommitAnswerLost", "retried": "CommitRetried"}[answer]
    return {"survey": f"Survey({c})", "lease_expires": f"LeaseExpires({c})", "keepalive_stalls": f"KeepAliveStalls({c})",
            "keepalive_resumes": f"KeepAliveResumes({c})", "rejoin": f"Rejoin({c})", "heartbeat": f"Heartbeat({b})",
            "broker_crash": f"BrokerCrash({b})", "broker_restart": f"BrokerRestart({b})",
            "alter_sync_state_set": f"AlterSyncStateSet({c},{b})"}[kind]
