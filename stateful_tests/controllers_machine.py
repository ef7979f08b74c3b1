"""The controllers machine: Hypothesis drives reference/failover/controllers_sim.py's
world — two controllers' ShardTables and shard cores, the code the runtime runs, over an
in-memory etcd — through tla/AckOrderControllers.tla's actions, with commits reaching etcd
late and in any order; every write etcd applies is checked against the spec's properties
(controllers_sim.py says how).  One class per runtime bug switch (``controllers_machine_for``)."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reference.failover.controllers_sim import BROKERS, CONTROLLERS, STEP_MS, ControllersViolation, ControllersWorld

controllers = st.sampled_from(CONTROLLERS)
brokers = st.sampled_from(BROKERS)
__all__ = ["ControllersViolation", "controllers_machine_for"]


class ControllersMachine(RuleBasedStateMachine):
    bugs: frozenset[str] = frozenset()

    @initialize()
    def start(self) -> None:
        self.world = ControllersWorld(self.bugs)

    @rule(c=controllers)
    def survey(self, c: str) -> None:
        self.world.survey(c)

    @rule(c=controllers)
    def keepalive_stalls(self, c: str) -> None:
        self.world.keepalive_stalls(c)

    @rule(c=controllers)
    def keepalive_resumes(self, c: str) -> None:
        self.world.keepalive_resumes(c)

    @rule(c=controllers)
    def lease_expires(self, c: str) -> None:
        self.world.lease_expires(c)

    @rule(c=controllers)
    def rejoin(self, c: str) -> None:
        self.world.rejoin(c)

    @rule(b=brokers)
    def heartbeat(self, b: int) -> None:
        self.world.heartbeat(b)

    @rule(b=brokers)
    def broker_crash(self, b: int) -> None:
        self.world.broker_crash(b)

    @rule(b=brokers)
    def broker_restart(self, b: int) -> None:
        self.world.broker_restart(b)

    @rule(ms=st.sampled_from(STEP_MS))
    def time_passes(self, ms: int) -> None:
        self.world.time_passes(ms)

    @rule(c=controllers, member=brokers)
    def alter_sync_state_set(self, c: str, member: int) -> None:
        self.world.alter_sync_state_set(c, member)

    @precondition(lambda self: self.world.pending)
    @rule(data=st.data(), answer=st.sampled_from(("heard", "lost", "retried")))
    def commit_reaches_etcd(self, data, answer: str) -> None:
        self.world.commit_reaches_etcd(data.draw(st.integers(0, len(self.world.pending) - 1)), answer)

    @invariant()
    def one_master_per_epoch(self) -> None:
        self.world.one_master_per_epoch()


def controllers_machine_for(bug: str | None) -> type[ControllersMachine]:
    name = f"ControllersMachine_{bug}" if bug else "ControllersMachine"
    return type(name, (ControllersMachine,), {"bugs": frozenset({bug}) if bug else frozenset()})
