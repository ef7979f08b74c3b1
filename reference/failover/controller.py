"""The controller of RocketMQ 5 (RIP-44), as a sans-IO state machine serving
many broker groups.

Events are method calls with the time as an argument (``register_broker``,
``broker_heartbeat``, ``alter_sync_state_set``, ``elect_master``,
``get_replica_info``, ``tick``, ``metadata_durable``, ``metadata_failed``);
effects pile up in ``effects`` (reference/failover/effects.py) for the
runtime to perform in order.

Per group it keeps what ReplicasInfoManager and SyncStateInfo keep
(masterId, masterEpoch, syncStateSet, syncStateSetEpoch, the registered
brokers) and what BrokerHeartbeatManager keeps (each broker's last
heartbeat, reported epoch, max offset and election priority).  The rules
are the failover spec's controller actions, same names
(tla/AckOrderFailover.tla, spec/failover/actions.py):

* ``alter_sync_state_set`` — AlterSyncStateSet: a compare-and-set on
  (masterId, masterEpoch, sssEpoch); the new set must hold the master and
  only registered, live brokers (E3); sssEpoch + 1 (E2).
* ``elect_master`` and ``tick`` — ElectMaster: only when the master is not
  alive (or the group has none); a live SSS member by DefaultElectPolicy
  (reported epoch, then max offset, then election priority, then broker
  id); masterEpoch + 1, SSS := {new master}, sssEpoch + 1 (E2, E4); with
  no candidate the master is cleared and the epoch still bumps.

The controller's own "no ack before its data": every change is a
PersistMetadata effect, and no reply that could reveal it (nor any reply
decided after it) is released before ``metadata_durable`` covers it.
Two designs (seed 002, COMDEV-522): ``serial`` handles one metadata
request at a time and waits for its record to be durable before the next
(RocketMQ's single-threaded task queue in front of DLedger); ``pipelined``
decides requests as they come and lets the store group-commit the records
(one fsync releases every reply it covers).  Heartbeats never touch the
metadata and are answered at once in both.

Bug switches (the controller-side ones of spec/failover/config.py):
BugUncleanElection, BugElectKeepsEpoch, BugAlterWithoutFencing,
BugElectOnlyOnMasterDeath.

``steps`` is ghost state: every decision on the metadata (taken or
refused) with the group before and after, for the refinement check of
reference/tests/test_controller_core.py; a runtime sets it to ``DISCARD``.
"""

from __future__ import annotations

from collections import deque

import attrs

from reference.failover import effects as fx
from reference.failover.effects import NO_MASTER, MetadataRecord, PersistMetadata, ReplicaInfo, Reply
from spec.config import ConfigError
from spec.failover.config import FAILOVER_BUG_NAMES

CONTROLLER_BUG_NAMES = ("BugUncleanElection", "BugElectKeepsEpoch", "BugAlterWithoutFencing",
                        "BugElectOnlyOnMasterDeath")
assert set(CONTROLLER_BUG_NAMES) <= set(FAILOVER_BUG_NAMES)
DESIGNS = ("serial", "pipelined")
# BrokerConfig.controllerHeartBeatTimeoutMills (the broker sends it with each heartbeat;
# BrokerHeartbeatManager expires a broker after it).
CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS_DEFAULT = 10_000
ELECTION_PRIORITY_DEFAULT = 2**31 - 1      # BrokerConfig.brokerElectionPriority (lower is preferred)
MAX_BROKER_ID = 2**62
MAX_GROUP_NAME_BYTES = 255
MAX_EPOCH = (1 << 32) - 1       # the metadata record's u32 (reference/failover/metadata.py)
MAX_PENDING_DEFAULT = 1 << 16
MAX_GROUPS_DEFAULT = 4096
MAX_BROKERS_PER_GROUP_DEFAULT = 16


def _positive(instance, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{attribute.name} = {value!r}: must be a positive integer")


def _design(instance, attribute, value) -> None:
    if value not in DESIGNS:
        raise ConfigError(f"design = {value!r}: must be one of {', '.join(DESIGNS)}")


def _bugs(instance, attribute, value) -> None:
    if unknown := sorted(set(value) - set(CONTROLLER_BUG_NAMES)):
        raise ConfigError(f"unknown controller bug switch {', '.join(unknown)}; known: "
                          f"{', '.join(CONTROLLER_BUG_NAMES)}")


@attrs.frozen
class ControllerConfig:
    controller_broker_heartbeat_timeout_ms: int = attrs.field(
        default=CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS_DEFAULT, validator=_positive)
    design: str = attrs.field(default="pipelined", validator=_design)
    max_groups: int = attrs.field(default=MAX_GROUPS_DEFAULT, validator=_positive)
    max_brokers_per_group: int = attrs.field(default=MAX_BROKERS_PER_GROUP_DEFAULT, validator=_positive)
    max_pending: int = attrs.field(default=MAX_PENDING_DEFAULT, validator=_positive)   # held replies + queued requests
    bugs: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset, validator=_bugs)

    def bug(self, name: str) -> bool:
        assert name in CONTROLLER_BUG_NAMES, name
        return name in self.bugs

    @property
    def serial(self) -> bool:
        return self.design == "serial"


@attrs.define(slots=True)
class BrokerLive:
    """BrokerLiveInfo: what the last heartbeat said that an election reads (DefaultElectPolicy:
    epoch, max offset, priority; RocketMQ keeps the confirmOffset too, which no rule here reads).
    Before the first heartbeat: an empty log."""
    broker_id: int
    last_heartbeat_ms: int
    epoch: int = 0
    max_offset: int = 0
    election_priority: int = ELECTION_PRIORITY_DEFAULT


@attrs.define(slots=True)
class Group:
    """One broker group's metadata (SyncStateInfo + BrokerReplicaInfo) and liveness."""
    name: str
    brokers: dict[int, BrokerLive] = attrs.Factory(dict)
    master_id: int = NO_MASTER
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sss_epoch: int = 0

    def record(self) -> MetadataRecord:
        return MetadataRecord(self.name, tuple(sorted(self.brokers)), self.master_id, self.master_epoch,
                              tuple(sorted(self.sync_state_set)), self.sss_epoch)


@attrs.frozen
class ControllerStep:
    """Ghost: one decision on a group's metadata.  ``action`` is the spec's name
    (ElectMaster, AlterSyncStateSet) or FirstMaster (a group's first registration,
    which makes the spec's Init); ``accepted`` False: refused, nothing changed."""
    action: str
    group: str
    now_ms: int
    pre: MetadataRecord
    post: MetadataRecord
    accepted: bool
    req_id: int | None = None
    token: int | None = None
    request: tuple = ()          # AlterSyncStateSet: (master_id, master_epoch, sss_epoch, new set)
    heartbeats: tuple = ()       # (broker id, last heartbeat ms) of the group when it was decided


class DiscardSteps(list):
    def append(self, item) -> None:
        pass


DISCARD = DiscardSteps()


@attrs.frozen
class _Task:
    """A request on the metadata waiting its turn (the serial design's queue)."""
    kind: str
    req_id: int | None
    group: str
    args: tuple = ()


class ControllerCore:
    def __init__(self, config: ControllerConfig, now_ms: int, recovered: list[MetadataRecord] = ()) -> None:
        self.cfg = config
        self.effects: list = []
        self.steps: list[ControllerStep] = []
        self.groups: dict[str, Group] = {}
        self.now_ms = now_ms
        self.issued_token = 0          # last PersistMetadata token
        self.durable_token = 0         # every record up to here is durable
        self.failed: str | None = None
        self.held: deque[tuple[int, Reply]] = deque()      # (token it waits for, reply), tokens non-decreasing
        self.backlog: deque[_Task] = deque()               # serial design: requests waiting their turn
        self._queued_elections: set[str] = set()
        self._suspects: set[str] = set()                   # masterless groups to look at on the next tick
        self._next_scan_ms = now_ms
        self._handlers = {"tick-elect": self._tick_elect, "register": self._register, "alter": self._alter,
                          "elect": self._elect_request, "info": self._info_request}   # by _Task.kind
        for r in recovered:
            self._restore(r, now_ms)

    def _restore(self, r: MetadataRecord, now_ms: int) -> None:
        """A group as its last durable record says.  Every registered broker counts as
        having heartbeated now: one timeout of grace, so a controller restart does not
        depose masters that are fine."""
        if len(self.groups) >= self.cfg.max_groups and r.group not in self.groups:
            raise ConfigError(f"the metadata holds more than max_groups = {self.cfg.max_groups} broker groups "
                              f"(group {r.group!r} is one more)")
        if len(r.brokers) > self.cfg.max_brokers_per_group:
            raise ConfigError(f"the metadata gives group {r.group!r} {len(r.brokers)} brokers, more than "
                              f"max_brokers_per_group = {self.cfg.max_brokers_per_group}")
        if not (1 <= r.master_epoch < MAX_EPOCH and 1 <= r.sss_epoch < MAX_EPOCH):
            # a group is stored only from its first registration on, which makes its first master;
            # and the next election must still fit the record
            raise ConfigError(f"the metadata gives group {r.group!r} masterEpoch {r.master_epoch} and "
                              f"syncStateSetEpoch {r.sss_epoch}: a stored group has had its first master "
                              f"(both 1..{MAX_EPOCH - 1})")
        if not 1 <= len(r.group.encode()) <= MAX_GROUP_NAME_BYTES:
            raise ConfigError(f"the metadata names a group {r.group[:40]!r}... of {len(r.group.encode())} bytes: "
                              f"a registration names 1..{MAX_GROUP_NAME_BYTES}")
        named = (*r.brokers, *r.sync_state_set, *((r.master_id,) if r.master_id != NO_MASTER else ()))
        if bad := sorted({b for b in named if not 1 <= b <= MAX_BROKER_ID}):
            raise ConfigError(f"the metadata gives group {r.group!r} broker ids {bad[:3]}: ids are 1..{MAX_BROKER_ID} "
                              f"(masterId {NO_MASTER}: no master)")
        g = self.groups.setdefault(r.group, Group(r.group))
        g.brokers = {b: g.brokers.get(b) or BrokerLive(b, now_ms) for b in r.brokers}
        g.master_id, g.master_epoch = r.master_id, r.master_epoch
        g.sync_state_set, g.sss_epoch = frozenset(r.sync_state_set), r.sss_epoch
        # (a masterless group is looked at by the first tick, which scans every group: _next_scan_ms)

    def take_effects(self) -> list:
        out, self.effects = self.effects, []
        return out

    # ------------------------------------------------------------------ liveness

    def alive(self, g: Group, broker_id: int, now_ms: int) -> bool:
        """BrokerHeartbeatManager.isBrokerActive: registered, and heard from within the timeout."""
        b = g.brokers.get(broker_id)
        return b is not None and now_ms - b.last_heartbeat_ms <= self.cfg.controller_broker_heartbeat_timeout_ms

    def _candidates(self, g: Group, now_ms: int) -> list[int]:
        """Who ElectMaster may pick, best first (DefaultElectPolicy.elect)."""
        pool = [b for b in g.sync_state_set if self.alive(g, b, now_ms)]
        if not pool and self.cfg.bug("BugUncleanElection"):
            pool = [b for b in g.brokers if self.alive(g, b, now_ms)]   # enableElectUncleanMaster
        live = g.brokers
        return sorted(pool, key=lambda b: (-live[b].epoch, -live[b].max_offset, live[b].election_priority, b))

    def _election_enabled(self, g: Group, now_ms: int) -> bool:
        """ElectMaster's enabling condition: the master is not alive, or there is none
        and someone could be elected (never, under BugElectOnlyOnMasterDeath)."""
        # every group has its first master from the registration that made it, or from its record
        assert g.master_epoch >= 1, g
        if g.master_id != NO_MASTER:
            return not self.alive(g, g.master_id, now_ms)
        return not self.cfg.bug("BugElectOnlyOnMasterDeath") and bool(self._candidates(g, now_ms))

    # ------------------------------------------------------------------ events

    def _advance(self, now_ms: int) -> None:
        assert now_ms >= self.now_ms, f"time went back from {self.now_ms} to {now_ms}"
        self.now_ms = now_ms

    def register_broker(self, req_id: int, group: str, broker_id: int, now_ms: int,
                        election_priority: int = ELECTION_PRIORITY_DEFAULT) -> None:
        """RegisterBrokerToController (+ the first ElectMaster of a new group, whose requester wins)."""
        self._admit(_Task("register", req_id, group, (broker_id, election_priority)), now_ms)

    def alter_sync_state_set(self, req_id: int, group: str, master_id: int, master_epoch: int, sss_epoch: int,
                             new_sync_state_set, now_ms: int) -> None:
        """AlterSyncStateSet from the master ``master_id`` that believes (master_epoch, sss_epoch)."""
        self._admit(_Task("alter", req_id, group, (master_id, master_epoch, sss_epoch,
                                                   frozenset(new_sync_state_set))), now_ms)

    def elect_master(self, req_id: int, group: str, now_ms: int) -> None:
        """ElectMaster asked for (an admin, or a broker that found no master)."""
        self._admit(_Task("elect", req_id, group), now_ms)

    def get_replica_info(self, req_id: int, group: str, now_ms: int) -> None:
        """GetReplicaInfo: answered once everything decided before it is durable."""
        self._admit(_Task("info", req_id, group), now_ms)

    def broker_heartbeat(self, req_id: int, group: str, broker_id: int, now_ms: int, epoch: int = 0,
                         max_offset: int = 0, election_priority: int = ELECTION_PRIORITY_DEFAULT) -> None:
        """BrokerHeartbeat: liveness only, never metadata; answered at once."""
        self._advance(now_ms)
        g = self.groups.get(group)
        b = g.brokers.get(broker_id) if g is not None else None
        if b is None:
            self.effects.append(Reply(req_id, fx.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                                      f"broker {broker_id} of group {group!r} is not registered"))
            return
        b.last_heartbeat_ms = now_ms
        b.epoch, b.max_offset, b.election_priority = epoch, max_offset, election_priority
        if g.master_id == NO_MASTER:
            self._suspects.add(group)
        self.effects.append(Reply(req_id, fx.SUCCESS))

    def tick(self, now_ms: int) -> None:
        """The inactive-broker scan (DefaultBrokerHeartbeatManager, ControllerManager.onBrokerInactive):
        every group whose master is not alive, or that has none, gets ElectMaster."""
        self._advance(now_ms)
        if self.failed is not None:
            return
        due = list(self._suspects)
        self._suspects.clear()
        if now_ms >= self._next_scan_ms:
            due = self.groups.keys()
            self._next_scan_ms = self._scan_horizon(now_ms)
        for name in list(due):
            g = self.groups.get(name)
            if g is not None and self._election_enabled(g, now_ms):
                if self.cfg.serial:
                    if name not in self._queued_elections:
                        assert len(self._queued_elections) <= len(self.groups)
                        self._queued_elections.add(name)
                        self.backlog.append(_Task("tick-elect", None, name))
                else:
                    self._elect(g, now_ms, None)
        self._pump(now_ms)

    def _scan_horizon(self, now_ms: int) -> int:
        """When the next live broker's heartbeat expires (heartbeats only push it later)."""
        timeout = self.cfg.controller_broker_heartbeat_timeout_ms
        ends = [b.last_heartbeat_ms + timeout + 1 for g in self.groups.values() for b in g.brokers.values()
                if b.last_heartbeat_ms + timeout >= now_ms]
        return min(ends, default=now_ms + timeout)

    def next_wakeup_ms(self) -> int:
        return self.now_ms if self._suspects else self._next_scan_ms

    def metadata_durable(self, token: int, now_ms: int) -> None:
        """The store made every record up to ``token`` durable."""
        self._advance(now_ms)
        assert self.durable_token <= token <= self.issued_token, (self.durable_token, token, self.issued_token)
        self.durable_token = token
        while self.held and self.held[0][0] <= token:
            self.effects.append(self.held.popleft()[1])
        self._pump(now_ms)

    def metadata_failed(self, token: int, reason: str, now_ms: int) -> None:
        """The store could not make a record durable: what was decided since may be lost, so
        every held reply is an error and the controller refuses everything from now on."""
        self._advance(now_ms)
        self.failed = f"metadata record {token} not durable: {reason}"
        for _, reply in self.held:
            self.effects.append(Reply(reply.req_id, fx.CONTROLLER_METADATA_NOT_DURABLE, self.failed))
        self.held.clear()
        for task in self.backlog:
            if task.req_id is not None:
                self.effects.append(Reply(task.req_id, fx.CONTROLLER_METADATA_NOT_DURABLE, self.failed))
        self.backlog.clear()

    # ------------------------------------------------------------------ admission

    def _busy(self) -> bool:
        return self.cfg.serial and self.durable_token < self.issued_token

    def _admit(self, task: _Task, now_ms: int) -> None:
        self._advance(now_ms)
        if self.failed is not None:
            self.effects.append(Reply(task.req_id, fx.CONTROLLER_METADATA_NOT_DURABLE, self.failed))
            return
        if len(self.held) + len(self.backlog) >= self.cfg.max_pending:
            self.effects.append(Reply(task.req_id, fx.CONTROLLER_BUSY,
                                      f"{self.cfg.max_pending} requests are waiting already"))
            return
        if self._busy() or self.backlog:
            self.backlog.append(task)
            return
        self._run(task, now_ms)

    def _pump(self, now_ms: int) -> None:
        """Serial design: the queued requests, in order, until one changes the metadata."""
        while self.backlog and not self._busy() and self.failed is None:
            self._run(self.backlog.popleft(), now_ms)

    def _run(self, task: _Task, now_ms: int) -> None:
        self._handlers[task.kind](task, now_ms)

    def _group(self, task: _Task) -> Group | None:
        """The group a request names, or None, answered CONTROLLER_BROKER_METADATA_NOT_EXIST."""
        g = self.groups.get(task.group)
        if g is None:
            self._reply(Reply(task.req_id, fx.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                              f"no broker group {task.group!r} is registered"))
        return g

    def _tick_elect(self, task: _Task, now_ms: int) -> None:
        """The serial design's queued election of the scan: decided when its turn comes."""
        self._queued_elections.discard(task.group)
        g = self.groups.get(task.group)
        if g is not None and self._election_enabled(g, now_ms):
            self._elect(g, now_ms, None)

    def _info_request(self, task: _Task, now_ms: int) -> None:
        if (g := self._group(task)) is not None:
            self._reply(Reply(task.req_id, fx.SUCCESS, info=self._info(g, now_ms)))

    # ------------------------------------------------------------------ the rules

    def _register(self, task: _Task, now_ms: int) -> None:
        broker_id, priority = task.args
        g = self.groups.get(task.group)
        if g is None:
            if len(self.groups) >= self.cfg.max_groups:
                self._reply(Reply(task.req_id, fx.CONTROLLER_LIMIT_REACHED,
                                  f"{self.cfg.max_groups} broker groups are registered (max_groups)"))
                return
            g = self.groups[task.group] = Group(task.group)
        pre = g.record()
        b = g.brokers.get(broker_id)
        if b is None:
            if len(g.brokers) >= self.cfg.max_brokers_per_group:
                self._reply(Reply(task.req_id, fx.CONTROLLER_LIMIT_REACHED,
                                  f"group {g.name!r} has {len(g.brokers)} brokers (max_brokers_per_group)"))
                return
            b = g.brokers[broker_id] = BrokerLive(broker_id, now_ms, election_priority=priority)
        b.last_heartbeat_ms = now_ms
        first = g.master_epoch == 0
        if first:
            # RIM.electMaster on a group that never had a master: the first registrant
            # (the spec's Init: InitialMaster, epoch 1, SSS {it}, sssEpoch 1)
            g.master_id, g.master_epoch, g.sync_state_set, g.sss_epoch = broker_id, 1, frozenset({broker_id}), 1
        elif g.master_id == NO_MASTER:
            self._suspects.add(g.name)
        if g.record() != pre:
            token = self._persist(g)
            if first:
                self.steps.append(ControllerStep("FirstMaster", g.name, now_ms, pre, g.record(), True,
                                                 task.req_id, token, heartbeats=self._heartbeats(g)))
        self._reply(Reply(task.req_id, fx.SUCCESS, info=self._info(g, now_ms)))

    def _alter(self, task: _Task, now_ms: int) -> None:
        """ReplicasInfoManager.alterSyncStateSet (RIM L110-191); the spec's AlterAccepted."""
        if (g := self._group(task)) is None:
            return
        master_id, master_epoch, sss_epoch, new = task.args
        pre = g.record()
        code, reason = fx.SUCCESS, ""
        unfenced = self.cfg.bug("BugAlterWithoutFencing")
        # The equal-set refusal (alterSyncStateSet's first check) cannot fire behind a compare-and-set that holds: a
        # master proposes its committed set plus or minus one.  Without the compare-and-set a
        # stale proposal may equal the current set; the spec's variant then accepts it (a new
        # sssEpoch for the same set), and so does this one.
        if new == g.sync_state_set and not unfenced:
            code, reason = fx.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "the new SyncStateSet is the current one"
        elif not unfenced and master_id != g.master_id:
            code, reason = fx.CONTROLLER_INVALID_MASTER, f"broker {master_id} is not the master ({g.master_id})"
        elif not unfenced and master_epoch != g.master_epoch:
            code, reason = fx.CONTROLLER_FENCED_MASTER_EPOCH, \
                f"masterEpoch {master_epoch} is not the current {g.master_epoch}"
        elif not unfenced and sss_epoch != g.sss_epoch:
            code, reason = fx.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, \
                f"syncStateSetEpoch {sss_epoch} is not the current {g.sss_epoch}"
        elif master_id not in new:
            code, reason = fx.CONTROLLER_INVALID_REPLICAS, f"the new set {sorted(new)} lacks the master {master_id}"
        else:
            dead = sorted(b for b in new if not self.alive(g, b, now_ms))
            if dead:
                code, reason = fx.CONTROLLER_INVALID_REPLICAS, f"brokers {dead} are not registered and alive"
        token = None
        accepted = code == fx.SUCCESS
        if accepted:
            g.sync_state_set, g.sss_epoch = new, g.sss_epoch + 1
            if not unfenced:
                assert g.master_id in g.sync_state_set, "an SSS always holds its master"
            token = self._persist(g)
        self.steps.append(ControllerStep("AlterSyncStateSet", g.name, now_ms, pre, g.record(), accepted,
                                         task.req_id, token, (master_id, master_epoch, sss_epoch, new),
                                         self._heartbeats(g)))
        self._reply(Reply(task.req_id, code, reason, self._info(g, now_ms)))

    def _elect(self, g: Group, now_ms: int, req_id: int | None) -> bool:
        """ReplicasInfoManager.electMaster (RIM L193-276), DefaultElectPolicy (DEP L72-119).  True: changed."""
        pre = g.record()
        epoch = g.master_epoch if self.cfg.bug("BugElectKeepsEpoch") else g.master_epoch + 1
        candidates = self._candidates(g, now_ms)
        if candidates:
            new = candidates[0]
            g.master_id, g.master_epoch, g.sync_state_set, g.sss_epoch = new, epoch, frozenset({new}), g.sss_epoch + 1
        elif g.master_id != NO_MASTER:
            g.master_id, g.master_epoch = NO_MASTER, epoch
        else:
            return False
        assert g.master_epoch >= pre.master_epoch and g.sss_epoch >= pre.sss_epoch
        token = self._persist(g)
        self.steps.append(ControllerStep("ElectMaster", g.name, now_ms, pre, g.record(), True, req_id, token,
                                         heartbeats=self._heartbeats(g)))
        return True

    def _elect_request(self, task: _Task, now_ms: int) -> None:
        if (g := self._group(task)) is None:
            return
        if not self._election_enabled(g, now_ms):
            if g.master_id != NO_MASTER:
                self._reply(Reply(task.req_id, fx.CONTROLLER_MASTER_STILL_EXIST,
                                  f"master {g.master_id} is alive", self._info(g, now_ms)))
            else:
                self._reply(Reply(task.req_id, fx.CONTROLLER_MASTER_NOT_AVAILABLE,
                                  "no live broker can be elected", self._info(g, now_ms)))
            return
        self._elect(g, now_ms, task.req_id)
        if g.master_id == NO_MASTER:
            self._reply(Reply(task.req_id, fx.CONTROLLER_MASTER_NOT_AVAILABLE,
                              "no live SyncStateSet member: the master is cleared", self._info(g, now_ms)))
        else:
            self._reply(Reply(task.req_id, fx.SUCCESS, info=self._info(g, now_ms)))

    # ------------------------------------------------------------------ output

    def _info(self, g: Group, now_ms: int) -> ReplicaInfo:
        return ReplicaInfo(g.name, g.master_id, g.master_epoch, tuple(sorted(g.sync_state_set)), g.sss_epoch,
                           tuple(sorted(b for b in g.brokers if self.alive(g, b, now_ms))))

    def _heartbeats(self, g: Group) -> tuple:
        if self.steps is DISCARD:
            return ()
        return tuple((b.broker_id, b.last_heartbeat_ms) for b in g.brokers.values())

    def _persist(self, g: Group) -> int:
        self.issued_token += 1
        self.effects.append(PersistMetadata(self.issued_token, g.record()))
        return self.issued_token

    def _reply(self, reply: Reply) -> None:
        """Released once every record decided so far is durable (no ack before its data)."""
        if self.durable_token >= self.issued_token:
            self.effects.append(reply)
        else:
            # An invariant, not a bound on input: every held reply answers a request _admit let
            # in, and _admit keeps held + backlog below max_pending (more are CONTROLLER_BUSY).
            assert len(self.held) < self.cfg.max_pending, (len(self.held), self.cfg.max_pending)
            self.held.append((self.issued_token, reply))
