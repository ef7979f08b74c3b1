"""Seeded simulation of a broker group under failover: a random schedule of
the spec's actions on a ``FailoverGroup`` (reference/failover/group.py: the
``BrokerCore``s the node runs, over bytes, and the ``ControllerCore``), the
refinement check after every step (a step the cores take at once may be
several spec steps: refine.spec_path) and the safety invariants on every
state of it.  Deterministic per seed.

Each seed first draws a ``Scenario`` (``draw_scenario``): a fault pattern such as a
master deposed while it keeps proposing, or a lagging SyncStateSet member with an
outsider ahead of it when the master dies.  Scenarios come from the seed alone, never
from the bug switches."""

from __future__ import annotations

import hashlib
import random

import attrs

from reference.failover.group import GROUP, SIM_MAX_NOT_CATCHUP_MS, SSS_CHECK_INTERVAL_MS, FailoverGroup
from reference.failover.refine import SEP, RefinementError, spec_path, violated
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
    scenario: str = ""             # the fault pattern drawn from the seed (Scenario.name)

    @property
    def ok(self) -> bool:
        return self.violation is None

    @property
    def trace_hash(self) -> str:
        """What the determinism audit compares: the run's actions, in order."""
        return hashlib.sha256("\n".join(self.labels).encode()).hexdigest()[:16]


SLOW_SKIP = 0.8                          # how often a slow member's transfers and acks wait
AIM = 8.0                                # weight factor of a fault aimed at the controller's master
FAULT_KINDS = ("disconnect", "brokerCrash", "powerLoss", "cutOff", "sssProposal")


@attrs.frozen
class Scenario:
    """The fault pattern of one run, drawn from its seed (``draw_scenario``) and never from
    the bug switches: how often faults come, from which step and of which kinds, whether
    they are aimed at the controller's master, whose link is slow when (a link that
    degrades), and a member whose acks are late while its data flows."""
    name: str
    fault_rate: float
    weights: tuple[tuple[str, float], ...]   # fault kind -> weight (FAULT_KINDS, all present)
    aimed: tuple[str, ...] = ()              # fault kinds aimed at the controller's master (weight x AIM)
    faults_from: int = 0                     # no fault before this step
    slow: tuple[tuple[int, str | None], ...] = ((0, None),)   # (from step, the member whose link is slow)
    slow_skip: float = SLOW_SKIP             # how often the slow member's transfers and acks wait
    late_acks: str | None = None             # this member's acks wait as often (its transfers do not)
    put_rate: float = 0.25                   # share of the steps (beyond faults) that are producers' puts ...
    put_rate_in_faults: float | None = None  # ... and from faults_from on (None: the same)
    slow_joiner: bool = False                # a member being added to the SyncStateSet is slow while it joins
    cuts_hold: float = 0.0                   # how often a broker cut from the controller stays cut (this step)
    prompt_shrinks: float = 0.0              # how often a master's check comes after haMaxTimeSlaveNotCatchup
    check_ms: int = SSS_CHECK_INTERVAL_MS    # virtual time before a master's SyncStateSet check otherwise
    send_window_records: int = 1             # how far a slave's data runs ahead of its ACKs (group.py)
    segment_records: int | None = None       # records per segment (logs roll; None: one segment)

    def __attrs_post_init__(self) -> None:
        assert 0 < self.fault_rate < 1 and set(self.aimed) <= {"brokerCrash", "powerLoss", "cutOff"}, self
        assert all(0 < r < 1 - self.fault_rate for r in (self.put_rate, self.put_rate_in_faults or self.put_rate)), self
        assert tuple(k for k, _ in self.weights) == FAULT_KINDS and all(w > 0 for _, w in self.weights), self
        assert self.slow[0][0] == 0 and list(self.slow) == sorted(self.slow, key=lambda p: p[0]), self
        assert self.faults_from >= 0 and 0 < self.slow_skip <= 1, self
        assert 0 <= self.cuts_hold < 1 and 0 <= self.prompt_shrinks <= 1, self

    def weight(self, kind: str) -> float:
        return dict(self.weights)[kind]

    def puts_at(self, step: int) -> float:
        return self.put_rate if step < self.faults_from or self.put_rate_in_faults is None else self.put_rate_in_faults

    def slow_at(self, step: int) -> str | None:
        return [b for start, b in self.slow if start <= step][-1]


def _joiner(g: FailoverGroup) -> str | None:
    """A broker an up master has proposed to add to its SyncStateSet (its alter in flight)."""
    for b in g.brokers.values():
        rm = b.rm
        if rm is not None and rm.role == "MASTER" and rm.remote_sss - rm.sss:
            return min(rm.remote_sss - rm.sss)
    return None


def _weights(**boost: float) -> tuple[tuple[str, float], ...]:
    return tuple((k, boost.get(k, 1.0)) for k in FAULT_KINDS)


def draw_scenario(rng: random.Random) -> Scenario:
    """One of the fault patterns (SCENARIOS says how often each is drawn).

    mixed: any fault, any target, any time (with a slow member in half the runs).
    deposed-master: cuts from the controller and SyncStateSet proposals, aimed at the
      master: a master that keeps running (and proposing) after it was deposed.
    lagging-member: a quiet start in which the SSS forms; then one member's link degrades
      while another member's data flows but its acks are late (so the master does not take
      it into the SSS, though it may be ahead of the lagging member); then crashes and
      power losses, aimed at the master.
    joining-member: any fault, aimed crashes and power losses at the master; a member whose
      expansion is in flight is slow (its ACKs wait, so its data stops at the send window) until
      the controller answers: a PUT_OK in that window must wait for it (#5663)."""
    name = rng.choice(SCENARIOS)
    sc = _draw(rng, name)
    return attrs.evolve(sc, segment_records=rng.choice(SEGMENT_RECORDS))


SEGMENT_RECORDS = (None, 5, 8)           # records per segment, one per run: a third of the runs keep one segment


def _draw(rng: random.Random, name: str) -> Scenario:
    if name == "mixed":
        return Scenario(name, rng.choice(FAULT_RATES), _weights(), slow=((0, rng.choice((None,) * 3 + BROKERS)),),
                        send_window_records=rng.choice((1, 4)))
    if name == "deposed-master":
        return Scenario(name, rng.choice(FAULT_RATES[1:]),
                        _weights(cutOff=4.0, sssProposal=4.0, brokerCrash=0.5, powerLoss=0.5),
                        aimed=("cutOff",), faults_from=rng.randrange(10, 60), slow=((0, rng.choice((None,) + BROKERS)),),
                        put_rate=0.1, cuts_hold=0.8, prompt_shrinks=0.3)
    if name == "joining-member":
        return Scenario(name, rng.choice(FAULT_RATES[1:]), _weights(brokerCrash=3.0, powerLoss=2.0, disconnect=0.5),
                        aimed=("brokerCrash", "powerLoss"), faults_from=rng.randrange(10, 40), slow_joiner=True,
                        slow_skip=0.9, put_rate=0.3)
    assert name == "lagging-member", name
    lagging, late = rng.sample(BROKERS[1:], 2)          # the initial master's two slaves
    degrade_step = rng.randrange(20, 100)
    return Scenario(name, rng.choice(FAULT_RATES[1:]),
                    _weights(brokerCrash=3.0, powerLoss=2.0, cutOff=0.5, disconnect=0.5, sssProposal=0.5),
                    aimed=("brokerCrash", "powerLoss"), faults_from=degrade_step + rng.randrange(5, 40),
                    slow=((0, None), (degrade_step, lagging)), slow_skip=1.0, late_acks=late, put_rate=0.08,
                    put_rate_in_faults=0.3, check_ms=SSS_CHECK_INTERVAL_MS // 10,   # the lagging member stays a while
                    send_window_records=4)          # the late member's data flows while its ACKs wait


def _faults(g: FailoverGroup, rng: random.Random, budget: FailoverBudget, sc: Scenario) -> list:
    """The environment's perturbations still in budget, as (weight, thunk)."""
    c, out = g.counters, []
    master = g.by_id.get(g.controller.groups[GROUP].master_id)
    for b in g.names:
        def w(kind: str, b=b) -> float:
            return sc.weight(kind) * (AIM if b == master and kind in sc.aimed else 1.0)
        if c["disconnect"] < budget.disconnects:
            out.append((w("disconnect"), lambda b=b: g.replica_disconnect(b)))
        if c["brokerCrash"] < budget.broker_crashes:
            out.append((w("brokerCrash"), lambda b=b: g.broker_crash(b)))
        if c["powerLoss"] < budget.power_losses:
            out.append((w("powerLoss"), lambda b=b: g.broker_power_loss(
                b, rng.randint(0, len(g.brokers[b].log)), rng.random() < 0.5)))
        if c["cutOff"] < budget.cut_offs:
            out.append((w("cutOff"), lambda b=b: g.cut_from_controller(b)))
        if c["sssProposal"] < budget.sss_proposals:
            # time passes at a master: members that lag that long are dropped
            out.append((sc.weight("sssProposal"), lambda b=b: g.check_sync_state_set(b, SIM_MAX_NOT_CATCHUP_MS)))
    return out


def _weighted_order(rng: random.Random, weighted: list) -> list:
    """The thunks in a random order where each comes first in proportion to its weight
    (Efraimidis-Spirakis keys): the first enabled one is a weighted draw over what can happen."""
    keys = sorted(((rng.random() ** (1.0 / w), k) for k, (w, _) in enumerate(weighted)), reverse=True)
    return [weighted[k][1] for _, k in keys]


def _choices(g: FailoverGroup, rng: random.Random, budget: FailoverBudget, sc: Scenario, step: int) -> list:
    """What may happen next, in the order to try: mostly the protocol and producers,
    sometimes a fault (spread over the run so that faults meet every phase of the protocol)."""
    roll = rng.random()
    if roll < sc.fault_rate and step >= sc.faults_from:
        faults = _faults(g, rng, budget, sc)
        if faults:
            return _weighted_order(rng, faults)
    if roll < sc.fault_rate + sc.puts_at(step) and len(g.requests) < budget.puts:
        out = [lambda b=b: g.put(b) for b in g.names]
    else:
        slow = (_joiner(g) if sc.slow_joiner else None) or sc.slow_at(step)
        out = fair_actions(g, slow if rng.random() < sc.slow_skip else None,
                           sc.late_acks if rng.random() < sc.slow_skip else None, rng.random() < sc.cuts_hold)
        if g.counters["sssProposal"] < budget.sss_proposals:     # the master's housekeeping: isInSyncSlave
            advance_ms = SIM_MAX_NOT_CATCHUP_MS if rng.random() < sc.prompt_shrinks else sc.check_ms
            out += [lambda b=b: g.check_sync_state_set(b, advance_ms) for b in g.names]
    rng.shuffle(out)
    return out


FAULT_RATES = (0.02, 0.05, 0.1, 0.2)     # one per run, from the seed
STALE_NOTICE_RATE = 0.1                  # steps that first try to deliver an old controller answer again
SCENARIOS = ("mixed", "deposed-master", "lagging-member", "joining-member")
HEAL_STEPS = 300       # fair steps after the faults stop (a few dozen suffice when nothing is wrong)


def fair_actions(g: FailoverGroup, slow: str | None = None, late_acks: str | None = None,
                 cuts_hold: bool = False) -> list:
    """The protocol's own actions (weakly fair in the spec), in a fixed order; a ``slow`` or
    ``late_acks`` broker's ACKs (so its data too, beyond the send window: group.py), and
    (``cuts_hold``) the reconnections to the controller are left out (this time).  Transfer and
    Respond are no actions of their own: a frame reaches its slave in the step that sends it, and
    a master's core answers in the step that allows it (group.py)."""
    out = [g.elect_master]
    for b in g.names:
        out += [lambda b=b: g.broker_restart(b), lambda b=b: g.change_role(b), lambda b=b: g.change_sync_state_set(b),
                lambda b=b: g.alter_sync_state_set(b), lambda b=b: g.replica_connect(b)]
        if not cuts_hold:
            out.append(lambda b=b: g.reconnect_to_controller(b))
        if b not in (slow, late_acks):
            out.append(lambda b=b: g.replica_ack(b))
    for i in range(1, len(g.requests) + 1):
        if g.requests[i - 1].status == "WAITING":
            out.append(lambda i=i: g.timeout(i))
    return out


def step_once(g: FailoverGroup, rng: random.Random, budget: FailoverBudget, sc: Scenario,
              step: int, notices: random.Random | None = None) -> str | None:
    """Step ``step`` of the seeded schedule: the first enabled action of a shuffled list of what
    could happen (a draw over what can); None when nothing in that list was enabled.

    ``notices``: a stream of its own for StaleNotice, an old answer of the controller delivered
    again (group.stale_notice).  The cores must refuse it, changing nothing the spec sees, so the
    schedule drawn from ``rng`` goes on as it would without it: a correct run's steps are those of
    a run without stale notices (the first 160 seeds' trace hashes are), and only a core that takes
    one strays (and fails the refinement check)."""
    if notices is not None and notices.random() < STALE_NOTICE_RATE:
        label = g.stale_notice(notices.choice(g.names), notices.randrange(1 << 16))
        if label is not None:
            return label
    for action in _choices(g, rng, budget, sc, step):
        label = action()
        if label is not None:
            return label
    return None


def _checked(cfg: FailoverConfig, pre, label: str, post, check: bool) -> tuple[list, str | None, str]:
    """The spec steps of one concrete step [(label, state)], checked: the twin's path through
    its labels (refine.spec_path) and the safety invariants on every state of it.  Unchecked,
    a compound step's parts are recorded with the step's end state."""
    if not check:
        return [(part, post) for part in label.split(SEP)], None, ""
    try:
        path = spec_path(cfg, pre, label, post)
    except RefinementError as err:
        return [(label, post)], "Refinement", str(err)
    for k, (part, s) in enumerate(path):
        bad = violated(cfg, s)
        if bad:
            return path[:k + 1], bad[0], f"{bad[0]} violated after {part}"     # the run ends at that step
    return path, None, ""


def heal_and_check(cfg: FailoverConfig, g: FailoverGroup, pre, labels: list[str] | None = None,
                   states: list | None = None):
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
            post = g.abstract()
            path, violation, detail = _checked(cfg, pre, label, post, True)
            if labels is not None:
                labels += [part for part, _ in path]
            if states is not None:
                states += [s for _, s in path]
            if violation is not None:
                return violation, detail
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
             check: bool = True, heal: bool = True, states: list | None = None, group=None) -> FailoverRun:
    """One seeded run of up to ``steps`` actions; stops at the first violation.  Then
    (``heal``) the faults stop, the fair actions run round-robin, and the liveness
    properties MasterEventuallyStable and EveryRequestAnswered are checked at the end.  ``states``:
    a list the spec state after each labelled step is appended to (a trace's ``state``).
    ``group``: the simulated group's class (the byte-level ``FailoverGroup`` unless a test
    passes a double)."""
    cfg = FailoverConfig(BROKERS, "b1", bugs=frozenset(bugs))
    rng = random.Random(seed)
    notices = random.Random(f"ackorder-stale-notices-{seed}")
    sc = draw_scenario(rng)
    g = FailoverGroup(cfg, sc.send_window_records, sc.segment_records) if group is None else group(cfg)
    labels: list[str] = []
    pre = g.abstract()
    truncations = 0
    for step in range(steps):
        label = step_once(g, rng, budget, sc, step, notices)
        if label is None:
            continue
        post = g.abstract()
        path, violation, detail = _checked(cfg, pre, label, post, check)
        labels += [part for part, _ in path]
        if states is not None:
            states += [s for _, s in path]
        at = pre
        for part, s in path:
            if part.startswith("ReplicaConnect"):
                k = cfg.index(part[15:-1])
                truncations += len(s.blog[k]) < len(at.blog[k])
            at = s
        if violation is not None:
            return _run(seed, bugs, sc, labels, violation, detail, g, truncations)
        pre = post
    if heal:
        problem = heal_and_check(cfg, g, pre, labels, states) if check else None
        if problem is not None:
            return _run(seed, bugs, sc, labels, problem[0], problem[1], g, truncations)
    return _run(seed, bugs, sc, labels, None, "", g, truncations)


def _run(seed, bugs, sc: Scenario, labels, violation, detail, g: FailoverGroup, truncations: int) -> FailoverRun:
    counts = dict(g.counters)
    counts["truncations"] = truncations
    counts["sssChanges"] = sum(1 for s in g.controller.steps if s.action == "AlterSyncStateSet" and s.accepted)
    counts["acked"] = sum(1 for r in g.requests if r.status == "PUT_OK")
    counts["staleNotices"] = g.stale_notices
    return FailoverRun(seed, len(labels), tuple(sorted(bugs)), violation, detail, tuple(labels), counts, sc.name)


def trace_lines(run: FailoverRun, states: list, source: str = "") -> list[str]:
    """A failover trace of ``run`` (spec/failover/tracecheck.py): the header, then each step's label
    and the spec state after it."""
    import json

    from spec.failover.state import state_json
    from spec.failover.tracecheck import header

    assert len(states) == len(run.labels), (len(states), len(run.labels))
    return [header(BROKERS, "b1", run.bugs, source)] + [
        json.dumps({"step": k, "action": label, "state": state_json(s)}, separators=(",", ":")) + "\n"
        for k, (label, s) in enumerate(zip(run.labels, states), start=1)]
