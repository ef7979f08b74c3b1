"""The failover refinement machine: Hypothesis drives a ``FailoverGroup`` (the
reference's ControllerCore and one BrokerCore per broker, over bytes: the cores
``ackorder broker node`` runs) through the failover spec's actions, and after
every step checks that the step is a path of the twin (spec/failover/actions.py;
one step of the cores may be several of the spec's, refine.spec_path) and that
the spec's safety invariants hold on every state of it; ``teardown`` heals the
group (faults stop, the fair actions run) and checks the liveness properties,
as reference/failover/drive.py does.

One class per bug switch (``failover_machine_for``): the same rules with the
switch on in the twin and in the reference."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from reference.failover.drive import FailoverBudget, draw_scenario, fair_actions, heal_and_check, step_once
from reference.failover.group import SIM_MAX_NOT_CATCHUP_MS, SSS_CHECK_INTERVAL_MS, FailoverGroup
from reference.failover.refine import RefinementError, spec_path, violated
from spec.failover.config import FailoverConfig

BROKERS = ("b1", "b2", "b3")
BUDGET = FailoverBudget()
brokers = st.sampled_from(BROKERS)


class FailoverViolation(AssertionError):
    """A failover property (or the refinement) does not hold; ``prop`` names it."""

    def __init__(self, prop: str, detail: str) -> None:
        super().__init__(f"{prop}: {detail}")
        self.prop = prop


class FailoverMachine(RuleBasedStateMachine):
    bugs: tuple[str, ...] = ()
    trace_to: Path | None = None      # on demand: every test case's failover trace there (the last one stays)
    coverage_runs = None              # (the write-path machines' --coverage; not for this one)

    @initialize()
    def start(self) -> None:
        # One segment for the run: the seeded simulator (drive.py) draws rolling logs; drawn here
        # too, the derandomized hunt no longer met BugCommittedSssOnly within its budget (329 s).
        self.cfg = FailoverConfig(BROKERS, "b1", bugs=frozenset(self.bugs))
        self._group = FailoverGroup(self.cfg)
        self.pre = self._group.abstract()
        self.failed = False
        self.scenario = None          # the fault pattern of this program's schedule steps (its first seed's)
        self.scheduled = 0            # schedule steps taken so far (the scenario's clock)
        self._unchecked = False
        self.steps: list[tuple[str, object]] = []     # (label, the spec state after it): the case's trace

    @property
    def group(self) -> FailoverGroup:
        """The group, for a rule: whatever the rule does to it next is unchecked until a
        labelled step maps it again (``abstraction_is_current`` then has something to check)."""
        self._unchecked = True
        return self._group

    def _step(self, label: str | None) -> None:
        if label is None:
            self._unchecked = True          # a call that says it changed nothing: the invariant checks
            return
        post = self._group.abstract()
        try:
            path = spec_path(self.cfg, self.pre, label, post, remember=True)
        except RefinementError as err:
            self.steps.append((label, post))
            self.failed = True
            raise FailoverViolation("Refinement", str(err)) from None
        for part, state in path:
            self.steps.append((part, state))
            bad = violated(self.cfg, state, remember=True)
            if bad:
                self.failed = True
                raise FailoverViolation(bad[0], f"after {part}")
        self.pre = post
        self._unchecked = False             # the group's state now is ``pre``, checked

    # --- producer, GroupTransferService, HA --------------------------------------
    @rule(b=brokers)
    def put(self, b):
        self._step(self.group.put(b))

    @rule(data=st.data())
    def answer(self, data):
        """A waiting request's deadline passes at its master (a PUT_OK needs no rule: the master's
        core answers in the step that allows it, and a frame reaches its slave as it is sent)."""
        waiting = [i for i, r in enumerate(self.group.requests, start=1) if r.status == "WAITING"]
        if waiting:
            i = data.draw(st.sampled_from(waiting), label="request")
            self._step(self.group.timeout(i))

    @rule(b=brokers)
    def replica_connect(self, b):
        self._step(self.group.replica_connect(b))

    @rule(b=brokers)
    def replica_ack(self, b):
        self._step(self.group.replica_ack(b))

    @rule(b=brokers)
    def replica_disconnect(self, b):
        self._step(self.group.replica_disconnect(b))

    # --- SyncStateSet -------------------------------------------------------------
    @rule(m=brokers, advance_ms=st.sampled_from((0, SSS_CHECK_INTERVAL_MS, SIM_MAX_NOT_CATCHUP_MS)),
          checks=st.integers(1, 2))
    def check_sync_state_set(self, m, advance_ms, checks):
        """The master's periodic SyncStateSet check after ``advance_ms``, once or twice (the policy
        of reference/failover/sss_policy.py decides: expand, or shrink a member whose ack missed
        where the log ended at the previous check for haMaxTimeSlaveNotCatchup)."""
        for _ in range(checks):
            label = self.group.check_sync_state_set(m, advance_ms)
            if label is not None:
                self._step(label)
                return
        self._step(None)

    @rule(m=brokers)
    def alter_sync_state_set(self, m):
        self._step(self.group.alter_sync_state_set(m))

    @rule(m=brokers)
    def change_sync_state_set(self, m):
        self._step(self.group.change_sync_state_set(m))

    # --- controller and roles -------------------------------------------------------
    @rule()
    def elect_master(self):
        self._step(self.group.elect_master())

    @rule(b=brokers)
    def change_role(self, b):
        self._step(self.group.change_role(b))

    @rule(start=st.integers(0, 1 << 16), n=st.integers(1, 6))
    def protocol(self, start, n):
        """The next ``n`` protocol steps: each time, the first enabled action from a rotating
        point in the list of everything the brokers and the controller could do (expansions
        included).  A rule that always moves, where the named rules mostly find theirs disabled."""
        for k in range(n):
            options = fair_actions(self.group) + [
                (lambda m=m: self.group.check_sync_state_set(m)) for m in BROKERS]
            for j in range(len(options)):
                label = options[(start + 7 * k + j) % len(options)]()
                if label is not None:
                    self._step(label)
                    break

    @rule(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40))
    def schedule(self, seed, n):
        """``n`` steps of the seeded campaign's schedule (reference/failover/drive.py), each
        checked here, inside programs Hypothesis composes and shrinks (with the schedule's stale
        notices, drawn on a stream of their own: a rule of their own would change every
        derandomized program, and the hunt for BugCommittedSssOnly no longer met it).  The first call's seed
        draws the program's scenario (fault pattern, slow links, aimed faults); later calls
        go on with it, on the scenario's clock."""
        rng = random.Random(seed)
        notices = random.Random(f"ackorder-stale-notices-{seed}")     # StaleNotice, on a stream of its own
        if self.scenario is None:
            self.scenario = draw_scenario(rng)
        for _ in range(n):
            self._step(step_once(self.group, rng, BUDGET, self.scenario, self.scheduled, notices))
            self.scheduled += 1

    @rule(rounds=st.integers(1, 3))
    def settle(self, rounds):
        """The protocol's own actions, round-robin (what the brokers' and the controller's
        services do on their timers when no fault comes): big steps for the search."""
        for _ in range(rounds):
            for action in fair_actions(self.group):
                self._step(action())

    # --- faults and healing ----------------------------------------------------------
    @rule(b=brokers)
    def broker_crash(self, b):
        self._step(self.group.broker_crash(b))

    @rule(b=brokers, keep=st.integers(0, 8), lose_epoch_write=st.booleans())
    def broker_power_loss(self, b, keep, lose_epoch_write):
        self._step(self.group.broker_power_loss(b, keep, lose_epoch_write))

    @rule(b=brokers)
    def broker_restart(self, b):
        self._step(self.group.broker_restart(b))

    @rule(b=brokers)
    def cut_from_controller(self, b):
        self._step(self.group.cut_from_controller(b))

    @rule(b=brokers)
    def reconnect_to_controller(self, b):
        self._step(self.group.reconnect_to_controller(b))

    @invariant()
    def abstraction_is_current(self):
        # Every rule ends on a checked state: nothing changed behind the refinement check.  The
        # group is mapped again unless its last touch was a labelled step, mapped and checked
        # right then (then its state is ``pre`` by construction).
        if hasattr(self, "_group") and not self.failed and self._unchecked:
            assert self._group.abstract() == self.pre, "a rule changed the group without a spec step"
            self._unchecked = False

    def teardown(self):
        # Hypothesis tears down after a failing rule too: only a run that held so far is healed.
        if not hasattr(self, "_group"):
            return
        failing = self.failed
        try:
            if not self.failed:
                problem = heal_and_check(self.cfg, self._group, self.pre)
                if problem is not None:
                    failing = True
                    raise FailoverViolation(*problem)
        finally:
            self.save_trace(failing)

    def trace_lines(self) -> list[str]:
        """This case's failover trace (spec/failover/tracecheck.py): what `ackorder trace-check` reads."""
        from spec.failover.state import state_json
        from spec.failover.tracecheck import header

        return [header(BROKERS, "b1", self.bugs, f"{type(self).__name__}")] + [
            json.dumps({"step": k, "action": label, "state": state_json(s)}, separators=(",", ":")) + "\n"
            for k, (label, s) in enumerate(self.steps, start=1)]

    def save_trace(self, failing: bool) -> None:
        """The case's trace: to ``trace_to`` when asked, and a failing case's always to
        TRACE_DIR/<machine>-failure.ndjson (as the write-path machines keep theirs)."""
        from stateful_tests.machines import TRACE_DIR

        targets = ([self.trace_to] if self.trace_to else []) + \
            ([TRACE_DIR / f"{type(self).__name__}-failure.ndjson"] if failing else [])
        if targets:
            text = "".join(self.trace_lines())
            for path in targets:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)


def failover_machine_for(bug: str | None) -> type[FailoverMachine]:
    if bug is None:
        return FailoverMachine
    return type(f"FailoverMachine_{bug}", (FailoverMachine,), {"bugs": (bug,)})


