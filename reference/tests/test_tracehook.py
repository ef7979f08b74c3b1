"""The per-process trace writers a real runtime calls (reference/tracehook.py), exercised on the
simulator: a Cluster whose master and slaves each write their own trace through the hooks, with
nothing but what their cores reported and what their runtime sees; the files merge by causality
and are valid for clean seeds, and rejected with a bug switch on."""

from __future__ import annotations

import io

import pytest

from reference.refinement import spec_config
from reference.sim import world as world_module
from reference.sim.cluster import Cluster
from reference.sim.params import draw
from reference.tracehook import MasterTraceHook, ReplicaTraceHook
from spec.traceformat import read_trace
from spec.tracecheck import check_steps
from spec.tracemerge import adopt_config, merge, spec_ids


class HookedCluster(Cluster):
    """The simulator's cluster, its cores' labels going to per-process trace hooks."""

    def __init__(self, cfg, replicas, disk_factory, check=True, trace=None, wire_bytes=False):
        super().__init__(cfg, replicas, disk_factory, check=False, wire_bytes=wire_bytes)
        spec = spec_config(cfg, replicas)
        self.files = {name: io.StringIO() for name in ("master", *replicas)}
        self.master.spec_steps = []
        self.hooks = {"master": MasterTraceHook(self.files["master"], self.master, spec)}
        for name, node in self.replicas.items():
            node.core.spec_steps = []
            self.hooks[name] = ReplicaTraceHook(self.files[name], node.core)

    def _finish(self, what, env_labels=()):
        super()._finish(what, env_labels)
        if self.mstate == "UP":
            self.hooks["master"].event(self.now)
        for name, node in self.replicas.items():
            if node.up:
                self.hooks[name].event(self.now)

    def _close_conn(self, conn, by_master):
        accepted = self.master.name_of(conn) if self.mstate == "UP" and not by_master else None
        super()._close_conn(conn, by_master)
        if accepted is not None:
            self.hooks["master"].connection_lost(accepted, conn, self.now)

    def replica_crash(self, name):
        node = self.replicas[name]
        if node.up and node.conn is not None and self.mstate == "UP" and self.master.name_of(node.conn) == name:
            self.hooks["master"].connection_lost(name, node.conn, self.now)
        super().replica_crash(name)

    def connect(self, name):
        node = self.replicas[name]
        opened = self.mstate == "UP" and node.up and node.conn is None
        if opened:
            self.hooks[name].connecting(self._conn_ids + 1, self.now)
        return super().connect(name)

    def replica_restart(self, name):
        was_down = not self.replicas[name].up
        super().replica_restart(name)
        if was_down:
            self.replicas[name].core.spec_steps = []
            self.hooks[name].restarted(self.replicas[name].core)

    def master_restart(self):
        was_down = self.mstate != "UP"
        super().master_restart()
        if was_down:
            self.master.spec_steps = []
            self.hooks["master"].restarted(self.master)

    def close(self):
        for hook in self.hooks.values():
            hook.close()
        return {name: f.getvalue() for name, f in self.files.items()}


def hooked_run(seed: int, overrides: dict | None = None):
    made = []

    def factory(*args, **kwargs):
        made.append(HookedCluster(*args, **kwargs))
        return made[-1]

    original = world_module.Cluster
    world_module.Cluster = factory
    try:
        outcome = world_module.World(draw(seed, overrides or {}), check=False).run(400)
    finally:
        world_module.Cluster = original
    return outcome, made[0].close()


def verdict(files: dict):
    traces = adopt_config([read_trace(f"{p}.ndjson", t) for p, t in files.items()])
    steps, complete = merge(traces)
    return check_steps(traces[0].config, spec_ids(traces, steps), complete)


@pytest.mark.parametrize("seed", range(12))
def test_runtime_traces_of_clean_seeds_are_valid(seed):
    outcome, files = hooked_run(seed)
    v = verdict(files)
    assert v.valid, (seed, v.failed and v.failed.where(), v.reason)
    master = read_trace("master.ndjson", files["master"])
    assert master.ids == "keys" and all(s.observes <= master.observes for s in master.steps)


# Seeds where the bug shows in what a runtime sees.  (Not every seed of a bug does: a torn record
# kept by recovery looks, to the master's own trace, like one that survived the crash whole; the
# simulator's check, which sees the disk, catches BugRecoveryKeepsTorn in seeds 13 and 23 as well.)
@pytest.mark.parametrize("bug, seed", [("BugAckOnWrote", 0), ("BugTimeoutAsOK", 0), ("BugRecoveryKeepsTorn", 37),
                                       ("BugTransferBeyondCommitted", 0), ("BugFlushIgnoresFsyncError", 6)])
def test_runtime_traces_of_a_bug_are_rejected(bug, seed):
    outcome, files = hooked_run(seed, {"bug": bug})
    assert not verdict(files).valid


# What a runtime may call on a core without it being an event (questions, and handing over effects).
MASTER_QUERIES = {"check_invariants", "flush_frontier", "flush_leg_done", "handshake_accepts", "header_confirm",
                  "log_end_offset", "name_of", "next_wakeup_ms", "readable_end", "replica_coverage", "take_effects",
                  "transfer_label", "write_cancelled"}
REPLICA_QUERIES = {"take_effects"}


def _public_methods(cls) -> set[str]:
    return {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}


def test_the_traced_cores_trace_every_event_method():
    """A new event method of a core must be added to MASTER_EVENTS / REPLICA_EVENTS (or be a query)."""
    from reference.master import MasterCore
    from reference.replica import ReplicaCore
    from reference.tracehook import MASTER_EVENTS, MASTER_UNTRACED, REPLICA_EVENTS

    assert _public_methods(MasterCore) - {"recovered"} == set(MASTER_EVENTS) | MASTER_QUERIES | set(MASTER_UNTRACED)
    assert _public_methods(ReplicaCore) - {"recovered"} == set(REPLICA_EVENTS) | REPLICA_QUERIES


def test_a_traced_core_calls_its_hook_once_per_event():
    from reference.config import StoreConfig
    from reference.master import MasterCore
    from reference.tracehook import TracedMaster

    class Hook:
        def __init__(self):
            self.calls = []

        def event(self, now_ms):
            self.calls.append(("event", now_ms))

        def connection_lost(self, name, conn, now_ms):
            self.calls.append(("lost", name, conn))

    hook = Hook()
    core = TracedMaster(MasterCore(StoreConfig(), ("r1",), 0), hook, lambda: 7)
    core.replica_connection_opened(1, 0)
    core.replica_handshake(1, "r1", 0, core.log.index.chain_at(0), 0, 0)
    assert core.name_of(1) == "r1" and hook.calls == [("event", 7)] * 2
    core.replica_disconnected(1)         # an accepted connection lost: the spec's ReplicaDisconnect
    assert hook.calls[2:] == [("event", 7), ("lost", "r1", 1)]
    core.replica_disconnected(1)         # no longer accepted: nothing to say
    assert hook.calls[4:] == [("event", 7)]


def test_a_traced_master_refuses_an_event_its_trace_cannot_express():
    """A SyncStateSet change has no action in the write-path spec: tracing it silently would give
    trace-check a run it cannot explain, so the traced core refuses it by name."""
    import pytest

    from reference.config import StoreConfig
    from reference.master import MasterCore
    from reference.tracehook import TracedMaster, UntracedEvent

    class Hook:
        def event(self, now):
            raise AssertionError("no event may be traced")

    traced = TracedMaster(MasterCore(StoreConfig(), ("s1",), 0), Hook(), lambda: 0)
    with pytest.raises(UntracedEvent, match="change_sync_state_set"):
        traced.change_sync_state_set(("s1",), frozenset({"s1"}))
