"""A runtime by hand for ControllerCore, and the refinement check of its
decisions against the failover spec's controller actions
(spec/failover/actions.py: alter_sync_state_set, elect_master).

Each ghost step the core records is mapped to a spec state (controller
variables from the step's ``pre`` record; ``up`` from who was alive; the
requester's view from the AlterSyncStateSet request) and the spec action is
asked what it allows; the core's ``post`` must be one of those successors
(a refused alter: the spec's refusal).  The steps must also account for
every change: each one starts where the previous one of its group ended,
every PersistMetadata carries the step's record, and the group's state now
is its last step's.  Replies are checked against durability: none before
every record decided before its request was submitted is durable.  After a
tick (and the durability it waits for) no group may still have ElectMaster
enabled (the spec's weak fairness on ElectMaster)."""

from __future__ import annotations

import attrs

from reference.failover import effects as fx
from reference.failover.controller import ControllerConfig, ControllerCore, ControllerStep
from reference.failover.effects import NO_MASTER, MetadataRecord
from spec.failover.actions import alter_sync_state_set, elect_master, initial_state
from spec.failover.config import FailoverConfig

BROKER_IDS = (1, 2, 3)
SPEC = FailoverConfig(brokers=tuple(f"b{b}" for b in BROKER_IDS))
# refusals decided without looking at the metadata: they may leave before it is durable
NO_METADATA_CODES = (fx.CONTROLLER_METADATA_NOT_DURABLE, fx.CONTROLLER_BUSY)
CONTROLLER_VARS = ("masterId", "masterEpoch", "syncStateSet", "sssEpoch")


class Violation(AssertionError):
    """The core did something the spec does not allow (or broke the durability rule)."""


def name(b: int) -> str:
    return SPEC.no_broker if b == NO_MASTER else f"b{b}"


def spec_state(rec: MetadataRecord, alive: frozenset[int], alter: tuple | None = None):
    s = initial_state(SPEC)
    up = tuple(b in alive for b in BROKER_IDS)
    s = attrs.evolve(s, masterId=name(rec.master_id), masterEpoch=rec.master_epoch,
                     syncStateSet=frozenset(name(b) for b in rec.sync_state_set), sssEpoch=rec.sss_epoch, up=up)
    if alter is not None:
        m, master_epoch, sss_epoch, new = alter
        k = SPEC.index(name(m))

        def put(t, v):
            return t[:k] + (v,) + t[k + 1:]
        s = attrs.evolve(s, bEpoch=put(s.bEpoch, master_epoch), bSssEpoch=put(s.bSssEpoch, sss_epoch),
                         bRemoteSSS=put(s.bRemoteSSS, frozenset(name(b) for b in new)),
                         alterPending=put(s.alterPending, True))
    return s


def controller_vars(s) -> tuple:
    return tuple(getattr(s, v) for v in CONTROLLER_VARS)


def record_vars(r: MetadataRecord) -> tuple:
    return (name(r.master_id), r.master_epoch, frozenset(name(b) for b in r.sync_state_set), r.sss_epoch)


class Driver:
    """Owns a ControllerCore; performs its effects by hand and checks every step."""

    def __init__(self, config: ControllerConfig, now_ms: int = 0) -> None:
        self.cfg = config
        self.core = ControllerCore(config, now_ms)
        self.now = now_ms
        self.req = 0
        self.issued: list[fx.PersistMetadata] = []
        self.durable = 0
        self.replies: dict[int, fx.Reply] = {}
        self.submitted_at_token: dict[int, int] = {}
        self.step_tokens: dict[int, int] = {}          # req_id -> token of the change it made
        self.checked_steps = 0
        self.last: dict[str, MetadataRecord] = {}       # each group's record after its last step

    # --- events ------------------------------------------------------------------------

    def _next(self) -> int:
        self.req += 1
        self.submitted_at_token[self.req] = self.issued[-1].token if self.issued else 0
        return self.req

    def register(self, group: str, b: int, priority: int = 0) -> int:
        r = self._next()
        self.core.register_broker(r, group, b, self.now, priority)
        self.settle()
        return r

    def heartbeat(self, group: str, b: int, max_offset: int = 0, epoch: int = 0, priority: int = 0) -> int:
        r = self._next()
        self.submitted_at_token[r] = 0         # a heartbeat's reply says nothing about the metadata
        self.core.broker_heartbeat(r, group, b, self.now, epoch=epoch, max_offset=max_offset,
                                   election_priority=priority)
        self.settle()
        return r

    def alter(self, group: str, master: int, master_epoch: int, sss_epoch: int, new) -> int:
        r = self._next()
        self.core.alter_sync_state_set(r, group, master, master_epoch, sss_epoch, frozenset(new), self.now)
        self.settle()
        return r

    def elect(self, group: str) -> int:
        r = self._next()
        self.core.elect_master(r, group, self.now)
        self.settle()
        return r

    def info(self, group: str) -> int:
        r = self._next()
        self.core.get_replica_info(r, group, self.now)
        self.settle()
        return r

    def advance(self, dt_ms: int) -> None:
        self.now += dt_ms

    def tick(self) -> None:
        """Ticks as the runtime gives them: again while the core says it has work due now
        (what a durable record let through in the serial design)."""
        for _ in range(100):
            self.core.tick(self.now)
            self.settle()
            self.make_durable()
            if self.core.next_wakeup_ms() > self.now:
                break
        self.check_quiescent()

    def make_durable(self, upto: int | None = None) -> None:
        """The store finishes: every record (or those up to ``upto``) durable; repeat while the
        serial design issues more."""
        for _ in range(10_000):
            top = self.issued[-1].token if self.issued else 0
            target = top if upto is None else min(upto, top)
            if target <= self.durable:
                return
            self.durable = target
            self.core.metadata_durable(target, self.now)
            self.settle()
            if upto is not None:
                return
        raise Violation("durability never settles")

    # --- effects and checks ---------------------------------------------------------------

    def settle(self) -> None:
        for e in self.core.take_effects():
            if isinstance(e, fx.PersistMetadata):
                if e.token != (self.issued[-1].token if self.issued else 0) + 1:
                    raise Violation(f"token {e.token} out of order")
                self.issued.append(e)
            else:
                assert isinstance(e, fx.Reply), e
                self._check_reply(e)
        self.check_steps()

    def _check_reply(self, e: fx.Reply) -> None:
        if e.req_id in self.replies:
            raise Violation(f"request {e.req_id} answered twice")
        self.replies[e.req_id] = e
        need = max(self.submitted_at_token.get(e.req_id, 0), self.step_tokens.get(e.req_id, 0))
        if self.durable < need and e.code not in NO_METADATA_CODES:
            raise Violation(f"reply to request {e.req_id} ({e.code}) released while record {need} is not "
                            f"durable (durable up to {self.durable})")

    def alive_at(self, step: ControllerStep) -> frozenset[int]:
        """Who was alive when the step was decided: the heartbeat times it saw, and the timeout."""
        timeout = self.cfg.controller_broker_heartbeat_timeout_ms
        return frozenset(b for b, last_ms in step.heartbeats if step.now_ms - last_ms <= timeout)

    def check_steps(self) -> None:
        steps = self.core.steps
        for step in steps[self.checked_steps:]:
            self._check_step(step)
        self.checked_steps = len(steps)
        if unstepped := sorted(set(self.core.groups) - set(self.last)):
            raise Violation(f"groups {unstepped} hold metadata no step made (their first registration's FirstMaster)")
        for group, rec in self.last.items():
            if record_vars(self.core.groups[group].record()) != record_vars(rec):
                raise Violation(f"group {group} changed without a step: {rec} -> {self.core.groups[group].record()}")

    def _check_step(self, step: ControllerStep) -> None:
        before = self.last.get(step.group)
        if before is not None and record_vars(step.pre) != record_vars(before):
            raise Violation(f"step {step} does not start where group {step.group} was: {before}")
        if step.token is not None:
            persisted = self.issued[step.token - 1]
            if persisted.record != step.post:
                raise Violation(f"record {step.token} {persisted.record} is not the step's state {step.post}")
            if step.req_id is not None:
                self.step_tokens[step.req_id] = step.token
        elif record_vars(step.post) != record_vars(step.pre):
            raise Violation(f"step {step} changed the metadata without persisting it")
        self.last[step.group] = step.post
        if step.action == "FirstMaster":
            first = initial_state(attrs.evolve(SPEC, initial_master=name(step.post.master_id)))
            nothing = MetadataRecord(step.group, (), NO_MASTER, 0, (), 0)
            if step.pre != nothing or not step.accepted or record_vars(step.post) != controller_vars(first):
                raise Violation(f"a group's first master is not the spec's Init: {step}")
            return
        alive = self.alive_at(step)
        if step.action == "AlterSyncStateSet":
            new = step.request[3]
            if new == frozenset(step.pre.sync_state_set):
                if step.accepted:
                    raise Violation(f"an alter to the current set was accepted: {step}")
                return
            if step.request[0] not in BROKER_IDS:
                if step.accepted:
                    raise Violation(f"an alter from a broker that cannot be master was accepted: {step}")
                return
            succ = alter_sync_state_set(SPEC, spec_state(step.pre, alive, step.request), name(step.request[0]))
            allowed = [controller_vars(t) for t in succ]
            spec_accepts = bool(succ) and controller_vars(succ[0]) != record_vars(step.pre)
            if step.accepted != spec_accepts:
                raise Violation(f"AlterSyncStateSet {'accepted' if step.accepted else 'refused'} where the spec "
                                f"{'accepts' if spec_accepts else 'refuses'} it: {step} (alive {sorted(alive)})")
            if step.accepted and record_vars(step.post) not in allowed:
                raise Violation(f"AlterSyncStateSet result {step.post} not among the spec's {allowed}")
            return
        assert step.action == "ElectMaster", step
        if not step.accepted:
            raise Violation(f"an ElectMaster step is recorded only when it changed the group: {step}")
        allowed = [controller_vars(t) for t in elect_master(SPEC, spec_state(step.pre, alive))]
        if record_vars(step.post) not in allowed:
            raise Violation(f"ElectMaster {step.pre} -> {step.post} not among the spec's {allowed} "
                            f"(alive {sorted(alive)})")

    def check_quiescent(self) -> None:
        """After a tick and its records: ElectMaster enabled nowhere (weak fairness)."""
        timeout = self.cfg.controller_broker_heartbeat_timeout_ms
        for g in self.core.groups.values():
            alive = frozenset(b for b, live in g.brokers.items() if self.now - live.last_heartbeat_ms <= timeout)
            if elect_master(SPEC, spec_state(g.record(), alive)):
                raise Violation(f"after a tick group {g.name} {g.record()} still has ElectMaster enabled "
                                f"(alive {sorted(alive)})")
