"""Driving the reference cores along a spec behaviour: a TLC counterexample becomes a program of
environment steps for a Cluster (reference/sim/cluster.py, which performs the cores' effects), and
that program becomes a pytest case (`ackorder tlc --emit-test`).

Each spec action maps to environment steps that make the cores take it: ``Put`` is a producer's
put, ``Flush`` a group-commit round whose fsync returns, ``FlushFail`` one whose fsync fails,
``Transfer(r)`` a DATA frame delivered to slave r, ``ReplicaAck(r)`` its ACK delivered to the
master, ``Timeout(i)`` the clock past the request's deadlines, ``MasterMachineCrash`` a power loss
cutting the log where the spec's state says, a lasso's stuttering the liveness phase...  The cores
sometimes take a spec step on their own (a response in the event of the fsync that completes it),
so a step already taken needs none; when the cores answer a request at once where the spec let it
wait (the fail-fast SLAVE_NOT_AVAILABLE), the driver tries the behaviour with the slaves'
connections moved before the puts (steps that commute in the spec).

The program is made of robust primitives (``("machine_crash", keep, torn)``, not a byte offset),
so the same program can run with the bug switch off, where the property must hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from reference.config import StoreConfig
from reference.record import END_FILE_MIN_BLANK_LENGTH, record_size
from reference.refinement import PropertyViolation, RefinementError
from reference.sim.cluster import TO_MASTER, TO_REPLICA, UP, Cluster
from reference.sim.disk import sim_disk_factory
from reference.sim.heal import heal
from spec.config import Config
from spec.state import TORN, State

BODY_BYTES = 40               # every message the same size: a look-alike after a power loss
TIMEOUT_MS = 50               # both deadlines (short enough for the liveness phase to outlast)
INTERVAL_MS = 10              # every service's period
ATTEMPTS = 3                  # tries of an action's environment steps before giving up

Primitive = tuple


class DriveError(AssertionError):
    """The cores could not be made to take a spec step of the behaviour."""


@attrs.frozen
class SpecStep:
    """One step of a spec behaviour, with what the driver needs from the states around it."""
    label: str                    # the twin's label: "Put", "Respond(1)", "Transfer(r1)", "Stuttering"
    keep: int = 0                 # MasterMachineCrash: records kept
    torn: bool = False            # MasterMachineCrash: a torn record after them
    reported: int = 0             # ForgedAck: the records the forged report claims
    landed: int = 0               # WriteFail: records of the failed write that reached the page cache

    def to_args(self) -> tuple:
        fields = {k: v for k, v in attrs.asdict(self).items() if k != "label" and v}
        return (self.label, fields) if fields else (self.label,)


def spec_steps(labels: list[str], states: list[State | None]) -> list[SpecStep]:
    """The behaviour's steps (Init left out) with the parameters the states fix."""
    out = []
    for k in range(1, len(labels)):
        label, before, after = labels[k], states[k - 1], states[k]
        name = label.partition("(")[0]
        step = SpecStep(label)
        if name == "MasterMachineCrash":
            step = SpecStep(label, keep=after.committed, torn=after.log[after.committed:] == (TORN,))
        elif name == "ForgedAck":
            k_ = int(re.sub(r"\D", "", label.partition("(")[2]) or 1) - 1
            step = SpecStep(label, reported=after.ack[k_] or before.wrote + 1)
        elif name == "WriteFail":
            step = SpecStep(label, landed=1 if (after.landed > before.landed or
                                                (after.committed > before.committed and not after.unwritten))
                            else 0)
        out.append(step)
    return out


def store_config(cfg: Config, bug: str | None) -> StoreConfig:
    """A store configuration that refines the spec configuration ``cfg``, with every service
    driven by the clock only (so that the program decides what happens when)."""
    size = record_size(BODY_BYTES)
    return StoreConfig(
        flush_disk_type=cfg.flush_mode, broker_role=cfg.repl_mode, transient_store_pool_enable=cfg.transient_store_pool,
        ack_policy=cfg.ack_policy, in_sync_replicas=cfg.in_sync_replicas, ack_mode="DECOUPLED",
        commit_on_replica_wait=cfg.commit_on_replica_wait,
        mapped_file_size_commit_log=min(max(cfg.file_size * size + END_FILE_MIN_BLANK_LENGTH, 2 * size), 1 << 20),
        max_message_size=BODY_BYTES, os_page_size=64,
        sync_flush_timeout_ms=TIMEOUT_MS, slave_timeout_ms=TIMEOUT_MS,
        group_commit_interval_ms=INTERVAL_MS, flush_interval_commit_log_ms=INTERVAL_MS,
        flush_commit_log_least_pages=0, flush_commit_log_thorough_interval_ms=INTERVAL_MS,
        commit_interval_commit_log_ms=INTERVAL_MS, commit_commit_log_least_pages=0,
        commit_commit_log_thorough_interval_ms=INTERVAL_MS, wake_commit_when_put_message=False,
        wake_flush_when_put_message=False, ha_transfer_batch_size=size, ha_send_window_bytes=1 << 20,
        ha_housekeeping_interval_ms=4 * TIMEOUT_MS, bugs=frozenset({bug}) if bug else frozenset())


@attrs.define
class Run:
    """What a program did to a cluster."""
    labels: list[str] = attrs.Factory(list)       # spec steps the cores took, in order
    violation: str | None = None
    message: str = ""
    program: list[Primitive] = attrs.Factory(list)
    driven: list[str] = attrs.Factory(list)       # the behaviour's steps the cores were made to take
    skipped: list[str] = attrs.Factory(list)      # those they could not be (allow_skips)


class Driver:
    def __init__(self, store: StoreConfig, replicas: tuple[str, ...]) -> None:
        self.c = Cluster(store, replicas, sim_disk_factory)
        self.run = Run()
        self.puts = 0

    # --- primitives: one environment step each, recorded -------------------------------

    def do(self, *prim) -> None:
        self.run.program.append(prim)
        c = self.c
        try:
            getattr(self, "_" + prim[0])(*prim[1:])
        finally:
            if c.checker is not None:
                self.run.labels += [name for name, _ in c.checker.taken]
                c.checker.taken = []

    def _put(self) -> None:
        self.puts += 1
        self.c.put(bytes([self.puts % 251]) * BODY_BYTES)

    def _tick(self, ms: int) -> None:
        self.c.tick(self.c.now + ms)

    def _fsync(self, ok: bool) -> None:
        if self.c.pending_fsync is not None:
            self.c.complete_fsync(ok)

    def _write_fault(self, landed: int) -> None:
        faults = [("EIO", None if landed else 0)]

        def fail_next(length: int):
            if not faults:
                return None
            kind, written = faults.pop()
            return kind, length if written is None else written
        self.c.write_fault = fail_next

    def _connect(self, r: str) -> None:
        self.c.connect(r)

    def _deliver(self, r: str, direction: str) -> None:
        conn = self.c.replicas[r].conn
        link = self.c.links.get((conn, direction)) if conn is not None else None
        if link is not None and link.frames:
            self.c.deliver(conn, direction)

    def _forge(self, r: str, records: int) -> None:
        c = self.c
        if c.mstate != UP:
            return
        log = c.master.log
        offset = log.index.ends[records - 1] if 0 < records <= len(log.index.ends) else log.wrote + 1
        c.forge_ack(r, offset, records)

    def _disconnect(self, r: str) -> None:
        self.c.disconnect(r)

    def _replica_crash(self, r: str) -> None:
        self.c.replica_crash(r)

    def _replica_restart(self, r: str) -> None:
        self.c.replica_restart(r)

    def _process_crash(self) -> None:
        self.c.master_process_crash()

    def _machine_crash(self, keep: int, torn: bool) -> None:
        c = self.c
        low, high, _ = c.machine_crash_bounds()
        idx = c.master.log.index if c.mstate == UP else c.down["index"]
        cut = idx.ends[keep - 1] if keep else 0
        if torn and keep < len(idx.ends):
            cut = idx.starts[keep] + (idx.ends[keep] - idx.starts[keep]) // 2
        c.master_machine_crash(min(max(cut, low), high))

    def _master_restart(self) -> None:
        self.c.master_restart()

    def _heal(self) -> None:
        heal(self.c)

    # --- spec actions ---------------------------------------------------------------------

    def attempts(self, step: SpecStep) -> list[list[Primitive]]:
        name, _, param = step.label.partition("(")
        r = param.rstrip(")")
        store = self.c.cfg
        if name == "Put":
            return [[("put",)]]
        if name == "Commit":
            return [[("tick", INTERVAL_MS)]] * ATTEMPTS
        if name in ("Flush", "FlushFail"):
            return [[("tick", INTERVAL_MS), ("fsync", name == "Flush")]] * ATTEMPTS
        if name == "WriteFail":
            then = ("tick", INTERVAL_MS) if store.transient_store_pool_enable else ("put",)
            return [[("write_fault", step.landed), then]]
        if name == "Respond":
            return [[("tick", 1)]] * ATTEMPTS
        if name == "Timeout":
            return [[("tick", TIMEOUT_MS + 1)]] * ATTEMPTS
        if name == "ReplicaConnect":
            return [[("connect", r), ("deliver", r, TO_MASTER)]]
        if name == "Transfer":
            return [[("tick", 0), ("deliver", r, TO_REPLICA)]] * ATTEMPTS
        if name == "ReplicaAck":
            return [[("deliver", r, TO_MASTER)], [("tick", 0), ("deliver", r, TO_MASTER)]]
        if name == "ForgedAck":
            return [[("forge", r, step.reported)]]
        if name == "ReplicaDisconnect":
            return [[("disconnect", r)]]
        if name == "ReplicaCrash":
            return [[("replica_crash", r)]]
        if name == "ReplicaRestart":
            return [[("replica_restart", r)]]
        if name == "MasterProcessCrash":
            return [[("process_crash",)]]
        if name == "MasterMachineCrash":
            return [[("machine_crash", step.keep, step.torn)]]
        if name == "Recover":
            return [[("master_restart",)]]
        if name == "Stuttering" or name.startswith("Back to"):
            return [[("heal",)]]
        raise DriveError(f"no environment step makes the cores take {step.label}")


def _is_liveness_end(step: SpecStep) -> bool:
    return step.label == "Stuttering" or step.label.startswith("Back to")


def drive(steps: list[SpecStep], store: StoreConfig, replicas: tuple[str, ...], allow_skips: bool = False) -> Run:
    """Drive the cores along ``steps``; the Run ends at the first property violation.  A step the
    cores took already (in an earlier step's event, or before a step it commutes with, as a
    fail-fast answer before a slave's connection) needs nothing; one the cores cannot be made to
    take is a DriveError, or (``allow_skips``, for long behaviours of fuzz and Hypothesis failures)
    is recorded as skipped.  ``driven`` lists the steps taken, in the cores' order."""
    d = Driver(store, replicas)
    consumed: list[int] = []          # positions in d.run.labels of the behaviour's steps

    def take(label: str) -> bool:
        for i, taken in enumerate(d.run.labels):
            if taken == label and i not in consumed:
                consumed.append(i)
                return True
        return False

    step = None
    try:
        for step in steps:
            if _is_liveness_end(step):
                d.do("heal")
                break
            if take(step.label):
                continue
            for attempt in d.attempts(step):
                for prim in attempt:
                    d.do(*prim)
                if take(step.label):
                    break
            else:
                if not allow_skips:
                    raise DriveError(f"the cores did not take {step.label}; they took {d.run.labels}")
                d.run.skipped.append(step.label)
    except (PropertyViolation, RefinementError) as err:
        d.run.violation, d.run.message = getattr(err, "prop", "refinement"), str(err)
        if step is not None and not _is_liveness_end(step):
            take(step.label)             # the step the cores took when it failed
    d.run.driven = [d.run.labels[i] for i in sorted(consumed)]
    return d.run


def reorderings(steps: list[SpecStep]) -> Iterable[list[SpecStep]]:
    """The behaviour, then with each slave's first connection moved to the front (in the spec a
    ReplicaConnect before any put commutes with the puts: the handshake reads an empty log)."""
    yield steps
    first = {}
    for i, s in enumerate(steps):
        if s.label.startswith("ReplicaConnect(") and s.label not in first:
            first[s.label] = i
    moved = [steps[i] for i in sorted(first.values())]
    if moved and any(i > 0 for i in first.values()):
        rest = [s for i, s in enumerate(steps) if i not in first.values()]
        yield moved + rest


def run_program(program: list[Primitive], store: StoreConfig, replicas: tuple[str, ...],
                liveness: bool = False) -> Run:
    """Run a recorded program (with the bug switch on or off); ``liveness``: then the liveness
    phase, unless the program ended with it."""
    d = Driver(store, replicas)
    try:
        for prim in program:
            d.do(*prim)
        if liveness and (not program or program[-1] != ("heal",)):
            d.do("heal")
        if d.c.checker is not None and not d.c.failed:
            d.c.checker.finish()
    except PropertyViolation as err:
        d.run.violation, d.run.message = err.prop, str(err)
    except RefinementError as err:
        d.run.violation, d.run.message = "refinement", str(err)
    return d.run


def is_subsequence(wanted: list[str], taken: list[str]) -> bool:
    it = iter(taken)
    return all(any(w == t for t in it) for w in wanted)




def assert_violates(program: list[Primitive], cfg: Config, bug: str, prop: str, driven: list[str]) -> None:
    """A generated counterexample test, bug on: the program makes the cores take ``driven`` (in
    order) and violate ``prop``."""
    run = run_program(program, store_config(cfg, bug), cfg.replicas)
    assert run.violation == prop, f"{bug}: expected {prop}, got {run.violation}: {run.message}"
    assert is_subsequence(driven, run.labels), f"the cores took {run.labels}, not {driven}"


def assert_holds(program: list[Primitive], cfg: Config) -> None:
    """A generated counterexample test, bug off: the same program keeps every property, the
    liveness phase included."""
    run = run_program(program, store_config(cfg, None), cfg.replicas, liveness=True)
    assert run.violation is None, run.message
