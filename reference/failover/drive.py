"""Seeded simulation of a broker group under failover: a random schedule of
the spec's actions on a ``FailoverGroup``, the refinement check after every
step and the safety invariants on every state.  Deterministic per seed."""

from __future__ import annotations

import hashlib
import random

import attrs

from reference.failover.group import FailoverGroup
from reference.failover.refine import RefinementError, check_step, violated
from spec.failover.config import FailoverConfig
from spec.failover.properties import stable_master

BROKERS = ("b1", "b2", "b3")


@attrs.frozen
class FailoverBudget:
    """Perturbations one run may use (healing is never bounded)."""
    broker_crashes: int = 3
    power_losses: int = 2
    cut_offs: int = 3
    disconnects: int = 6
    sss_proposals: int = 12
    puts: int = 40


@attrs.frozen
class FailoverRun:
    seed: int
    steps: int
    bugs: tuple[str, ...]
    violation: str | None          # None, "Refinement", or the invariant's name
    detail: str
    labels: tuple[str, ...]        # the run's actions, in order (the last one made the violation)
    counts: dict                   # elections, truncations, SSS changes, crashes, ...

    @property
    def ok(self) -> bool:
        return self.violation is None

    @property
    def trace_hash(self) -> str:
        """What the determinism audit compares: the run's actions, in order."""
        return hashlib.sha256("\n".join(self.labels).encode()).hexdigest()[:16]


def _faults(g: FailoverGroup, rng: random.Random, budget: FailoverBudget) -> list:
    """The environment's perturbations still in budget, as thunks."""
    c, out = g.counters, []
    for b in g.names:
        if c["disconnect"] < budget.disconnects:
            out.append(lambda b=b: g.replica_disconnect(b))
        if c["brokerCrash"] < budget.broker_crashes:
            out.append(lambda b=b: g.broker_crash(b))
        if c["powerLoss"] < budget.power_losses:
            out.append(lambda b=b: g.broker_power_loss(b, rng.randint(0, len(g.brokers[b].log)), rng.random() < 0.5))
        if c["cutOff"] < budget.cut_offs:
            out.append(lambda b=b: g.cut_from_controller(b))
        if c["sssProposal"] < budget.sss_proposals:
            out += [lambda b=b, o=o: g.shrink_sync_state_set(b, o) for o in g.names]
    return out


def _choices(g: FailoverGroup, rng: random.Random, budget: FailoverBudget, fault_rate: float,
             slow: str | None) -> list:
    """What may happen next: mostly the protocol and producers, sometimes a fault
    (spread over the run so that faults meet every phase of the protocol)."""
    roll = rng.random()
    if roll < fault_rate:
        faults = _faults(g, rng, budget)
        if faults:
            return faults
    if roll < fault_rate + 0.25 and len(g.requests) < budget.puts:
        return [lambda b=b: g.put(b) for b in g.names]
    out = fair_actions(g, slow if rng.random() < SLOW_SKIP else None)
    if g.counters["sssProposal"] < budget.sss_proposals:     # the master's housekeeping: isInSyncSlave
        out += [lambda b=b, o=o: g.expand_sync_state_set(b, o) for b in g.names for o in g.names]
    return out


FAULT_RATES = (0.02, 0.05, 0.1, 0.2)     # one per run, from the seed
SLOW_SKIP = 0.8                          # how often a slow member's transfers and acks wait
HEAL_STEPS = 300       # fair steps after the faults stop (a few dozen suffice when nothing is wrong)


def fair_actions(g: FailoverGroup, slow: str | None = None) -> list:
    """The protocol's own actions (weakly fair in the spec), in a fixed order; a ``slow``
    broker's transfers and acks are left out (this time)."""
    out = [g.elect_master]
    for b in g.names:
        out += [lambda b=b: g.broker_restart(b), lambda b=b: g.reconnect_to_controller(b),
                lambda b=b: g.change_role(b), lambda b=b: g.change_sync_state_set(b),
                lambda b=b: g.alter_sync_state_set(b), lambda b=b: g.replica_connect(b)]
        if b != slow:
            out += [lambda b=b: g.transfer(b), lambda b=b: g.replica_ack(b)]
    for i in range(1, len(g.requests) + 1):
        if g.requests[i - 1].status == "WAITING":
            out += [lambda i=i: g.respond(i), lambda i=i: g.timeout(i)]
    return out


def step_once(g: FailoverGroup, rng: random.Random, budget: FailoverBudget, fault_rate: float,
              slow: str | None) -> str | None:
    """One step of the seeded schedule: the first enabled action of a shuffled list of what
    could happen (uniform over what can); None when nothing in that list was enabled."""
    options = _choices(g, rng, budget, fault_rate, slow)
    rng.shuffle(options)
    for action in options:
        label = action()
        if label is not None:
            return label
    return None


def heal_and_check(cfg: FailoverConfig, g: FailoverGroup, pre, labels: list[str] | None = None):
    """The faults stop; the fair actions run round-robin until nothing is enabled (at
    most HEAL_STEPS rounds), every step checked; then MasterEventuallyStable and
    EveryRequestAnswered.  None, or (property, what was wrong)."""
    for _ in range(HEAL_STEPS):
        progress = False
        for action in fair_actions(g):
            label = action()
            if label is None:
                continue
            progress = True
            if labels is not None:
                labels.append(label)
            post = g.abstract()
            try:
                check_step(cfg, pre, label, post)
            except RefinementError as err:
                return "Refinement", str(err)
            bad = violated(cfg, post)
            if bad:
                return bad[0], f"{bad[0]} violated after {label}"
            pre = post
        if not progress:
            break
    if not stable_master(cfg, pre):
        return ("MasterEventuallyStable", f"no stable master after the faults stopped: controller master "
                f"{pre.masterId} epoch {pre.masterEpoch}, roles {pre.role}, up {pre.up}")
    waiting = [i for i, r in enumerate(pre.reqs, start=1) if r.status == "WAITING"]
    if waiting:
        return "EveryRequestAnswered", f"requests {waiting} still waiting after the faults stopped"
    return None


def simulate(seed: int, steps: int = 400, bugs: tuple[str, ...] = (), budget: FailoverBudget = FailoverBudget(),
             check: bool = True, heal: bool = True) -> FailoverRun:
    """One seeded run of up to ``steps`` actions; stops at the first violation.  Then
    (``heal``) the faults stop, the fair actions run round-robin, and the liveness
    properties MasterEventuallyStable and EveryRequestAnswered are checked at the end."""
    cfg = FailoverConfig(BROKERS, "b1", bugs=frozenset(bugs))
    rng = random.Random(seed)
    g = FailoverGroup(cfg)
    labels: list[str] = []
    pre = g.abstract()
    truncations = 0
    fault_rate = rng.choice(FAULT_RATES)
    slow = rng.choice((None,) * 3 + BROKERS)  # half the runs: a member whose link is slow (it lags, may leave the SSS)
    for _ in range(steps):
        label = step_once(g, rng, budget, fault_rate, slow)
        if label is None:
            continue
        labels.append(label)
        post = g.abstract()
        if label.startswith("ReplicaConnect"):
            k = cfg.index(label[15:-1])
            truncations += len(post.blog[k]) < len(pre.blog[k])
        if check:
            try:
                check_step(cfg, pre, label, post)
            except RefinementError as err:
                return _run(seed, bugs, labels, "Refinement", str(err), g, truncations)
            bad = violated(cfg, post)
            if bad:
                return _run(seed, bugs, labels, bad[0], f"{bad[0]} violated after {label}", g, truncations)
        pre = post
    if heal:
        problem = heal_and_check(cfg, g, pre, labels) if check else None
        if problem is not None:
            return _run(seed, bugs, labels, problem[0], problem[1], g, truncations)
    return _run(seed, bugs, labels, None, "", g, truncations)


def _run(seed, bugs, labels, violation, detail, g: FailoverGroup, truncations: int) -> FailoverRun:
    counts = dict(g.counters)
    counts["truncations"] = truncations
    counts["sssChanges"] = sum(1 for s in g.controller.steps if s.action == "AlterSyncStateSet" and s.accepted)
    counts["acked"] = sum(1 for r in g.requests if r.status == "PUT_OK")
    return FailoverRun(seed, len(labels), tuple(sorted(bugs)), violation, detail, tuple(labels), counts)
