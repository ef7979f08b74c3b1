"""One seed of a campaign: where its simulator seed comes from, running it
into one ledger row, the signature failures are deduplicated by, and
shrinking a failure into a one-line reproducer.

Everything here is plain Python that runs inside Spark tasks and on the
driver alike; nothing depends on the partition or the task attempt, so a
campaign gives the same rows on any master and any partitioning.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

from reference.sim.params import draw
from reference.sim.world import World
from spec.config import ConfigError

DEFAULT_STEPS = 400            # events with faults per seed, then the liveness phase
LONG_STEPS = 1_000_000         # events per seed of a long-run campaign (`ackorder fuzz --long`)
MESSAGE_CHARS = 2_000          # a violation message or traceback kept in the ledger


def derive_seed(campaign: str, index: int) -> int:
    """The simulator seed of row ``index``: from the data, never from Spark."""
    assert index >= 0, index
    digest = hashlib.sha256(f"ackorder-fuzz/{campaign}/{index}".encode()).digest()
    return int.from_bytes(digest[:6], "big")        # < 2**48: an int64 column and a short CLI argument


@attrs.frozen
class Job:
    """What a task needs to run one seed."""
    campaign: str
    index: int
    overrides: tuple[tuple[str, str], ...]     # one entry of the configuration matrix
    bug: str | None
    steps: int
    model: str = "write-path"       # or "failover": reference/failover/drive.py; "controllers": controllers_sim.py

    def override_dict(self) -> dict[str, str]:
        out = dict(self.overrides)
        if self.bug:
            out["bug"] = self.bug
        return out


FAULT_ACTIONS = frozenset({"MasterProcessCrash", "MasterMachineCrash", "Recover", "FlushFail", "WriteFail",
                           "ReplicaCrash", "ReplicaRestart", "ReplicaDisconnect"})


def signature(prop: str, tail: Iterable[str]) -> str:
    """A normalised counterexample: the property, the spec action that broke
    it, and the last fault before it.  Which puts, acks and transfers came in
    between varies from seed to seed for the same defect and is left out."""
    tail = list(tail)
    if not tail:
        return prop
    faults = [a for a in tail[:-1] if a in FAULT_ACTIONS]
    return f"{prop} at {tail[-1]}" + (f" after {faults[-1]}" if faults else "")


MODELS = ("write-path", "failover", "controllers")


def _run_failover(job: Job, seed: int, row: dict) -> None:
    """One seed of the failover simulation (a broker group, its controller and the refinement
    check against spec/failover); its counts go in the row's ``faults`` for the report."""
    from reference.failover.drive import simulate

    run = simulate(seed, job.steps, (job.bug,) if job.bug else ())
    actions = Counter(label.split("(")[0] for label in run.labels)
    row.update(steps=run.steps, spec_steps=run.steps, trace_hash=run.trace_hash,
               actions=json.dumps(dict(sorted(actions.items()))), config=json.dumps({"model": "failover"}),
               faults=json.dumps({k: v for k, v in sorted(run.counts.items()) if k != "acked"}))
    if run.violation:
        last = run.labels[-1].split("(")[0] if run.labels else "Init"
        row.update(violation_step=run.steps, outcome=run.violation, signature=f"{run.violation} at {last}", message=run.detail[:MESSAGE_CHARS])


def _run_controllers(job: Job, seed: int, row: dict) -> None:
    """One seed of several controllers over an in-memory etcd (reference/failover/controllers_sim.py)."""
    from reference.failover.controllers_sim import simulate

    run = simulate(seed, job.steps, (job.bug,) if job.bug else ())
    actions = Counter(label.split("(")[0] for label in run.labels)
    row.update(steps=run.steps, spec_steps=run.steps, trace_hash=run.trace_hash,
               actions=json.dumps(dict(sorted(actions.items()))), config=json.dumps({"model": "controllers"}),
               faults=json.dumps(dict(sorted(run.counts.items()))))
    if run.violation:
        last = run.labels[-1].split("(")[0] if run.labels else "Init"
        row.update(violation_step=run.steps, outcome=run.violation, signature=f"{run.violation} at {last}",
                   message=run.detail[:MESSAGE_CHARS])


def run_job(job: Job) -> dict:
    """Run one seed; a violation or a crash of the simulator is a row, never an exception."""
    seed = derive_seed(job.campaign, job.index)
    start, cpu_start = time.perf_counter(), time.process_time()
    row = {"campaign": job.campaign, "index": job.index, "seed": seed, "bug": job.bug or "",
           "overrides": json.dumps(dict(job.overrides), sort_keys=True), "config": "{}", "outcome": "ok",
           "signature": "", "message": "", "steps": 0, "spec_steps": 0, "sim_ms": 0, "wall_s": 0.0,
           "trace_hash": "", "actions": "{}", "worker": f"{socket.gethostname()}:{os.getpid()}", "faults": "{}",
           "branches": "{}", "antecedents": "{}", "cpu_s": 0.0, "violation_step": 0}
    try:
        if job.model == "failover":
            _run_failover(job, seed, row)
            return _timed(row, start, cpu_start)
        if job.model == "controllers":
            _run_controllers(job, seed, row)
            return _timed(row, start, cpu_start)
        params = draw(seed, job.override_dict())
        row["config"] = json.dumps({k: v for k, v in params.describe().items() if k != "seed"}, sort_keys=True)
        outcome = World(params).run(job.steps)
        row.update(steps=outcome.steps, spec_steps=outcome.spec_steps, sim_ms=outcome.sim_ms,
                   trace_hash=outcome.trace_hash, actions=json.dumps(outcome.actions, sort_keys=True),
                   faults=json.dumps(outcome.faults, sort_keys=True),
                   branches=json.dumps(outcome.branches, sort_keys=True),
                   antecedents=json.dumps(outcome.antecedents, sort_keys=True))
        if outcome.violation:
            row.update(violation_step=outcome.steps, outcome=outcome.violation, signature=signature(outcome.violation, outcome.tail),
                       message=(outcome.message or "")[:MESSAGE_CHARS])
    except ConfigError:
        raise                        # a bad matrix is the user's input: the driver validated it already
    except Exception:                # noqa: BLE001  (a simulator crash is a finding, recorded as a row)
        row.update(outcome="internal_error", signature="internal_error",
                   message=traceback.format_exc()[-MESSAGE_CHARS:])
    return _timed(row, start, cpu_start)


def _timed(row: dict, start: float, cpu_start: float) -> dict:
    """The seed's wall time and its own CPU time (the task's process, user + system): the
    denominator of bugs per CPU-hour, which other jobs on the machine disturb far less."""
    row["wall_s"] = round(time.perf_counter() - start, 6)
    row["cpu_s"] = round(time.process_time() - cpu_start, 6)
    assert row["cpu_s"] >= 0 and row["violation_step"] >= 0, row
    return row


def run_partition(jobs: Iterator[Job]) -> Iterator[dict]:
    for job in jobs:
        yield run_job(job)


# ------------------------------------------------------------------ the matrix

def load_matrix(path: Path | None) -> list[tuple[tuple[str, str], ...]]:
    """A JSON list of objects, each pinning knobs of ``ackorder sim --config``;
    row ``i`` of the campaign uses entry ``i mod len``.  Every entry is checked
    here, so a bad key is reported with its place before any task starts."""
    if path is None:
        return [()]
    try:
        entries = json.loads(Path(path).read_text())
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: line {err.lineno} column {err.colno}: {err.msg}") from None
    except (ValueError, RecursionError) as err:  # an integer of over 4,300 digits; nesting deeper than the stack
        raise ConfigError(f"{path}: {'nested too deeply' if isinstance(err, RecursionError) else err}") from None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: expected a non-empty JSON list of objects")
    matrix = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: entry {i}: expected an object, got {type(entry).__name__}")
        pairs = tuple(sorted((str(k), _text(v)) for k, v in entry.items()))
        try:
            draw(0, dict(pairs))
        except ConfigError as err:
            raise ConfigError(f"{path}: entry {i}: {err}") from None
        matrix.append(pairs)
    return matrix


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


# ------------------------------------------------------------------ shrinking

FAULT_KEYS = ("master_process_crash_per_s", "master_machine_crash_per_s", "replica_crash_per_s",
              "replica_disconnect_per_s", "fsync_failure_probability", "write_failure_probability",
              "forged_ack_per_s", "impostor_per_s", "duplicate_frame_per_s", "reorder_frame_per_s",
              "truncate_frame_per_s", "garbage_frame_per_s", "corrupt_frame_per_s", "flood_per_s",
              "greetless_per_s", "epoch_query_per_s")


@attrs.frozen
class Reproducer:
    seed: int
    steps: int
    overrides: tuple[tuple[str, str], ...]
    bug: str | None
    outcome: str
    trace_hash: str

    def command(self) -> str:
        if self.overrides == CONTROLLERS:
            bug = f" --bug {self.bug}" if self.bug else ""
            return f"ackorder replay --controllers --seed {self.seed} --steps {self.steps}{bug}"
        if self.overrides == FAILOVER:
            bug = f" --bug {self.bug}" if self.bug else ""
            return f"ackorder replay --failover --seed {self.seed} --steps {self.steps}{bug}"
        config = "".join(f" --config {k}={v}" for k, v in self.overrides)
        bug = f" --bug {self.bug}" if self.bug else ""
        expect = f" --expect-hash {self.trace_hash}" if self.trace_hash else ""
        return f"ackorder replay --seed {self.seed} --steps {self.steps}{config}{bug}{expect}"

    def write_trace(self, path: Path) -> None:
        """The spec-level trace of this run (NDJSON, the violating step last)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.overrides == CONTROLLERS:
            from reference.failover.controllers_sim import simulate

            run = simulate(self.seed, self.steps, (self.bug,) if self.bug else ())
            path.write_text("".join(json.dumps({"step": k + 1, "action": label}) + "\n"
                                    for k, label in enumerate(run.labels)))
            return
        if self.overrides == FAILOVER:
            from reference.failover.drive import simulate

            from reference.failover.drive import trace_lines

            states: list = []
            run = simulate(self.seed, self.steps, (self.bug,) if self.bug else (), states=states)
            path.write_text("".join(trace_lines(run, states, self.command())))
            return
        with open(path, "w") as out:
            World(_params(self.seed, dict(self.overrides), self.bug), trace=out).run(self.steps)


def _params(seed: int, overrides: dict[str, str], bug: str | None):
    return draw(seed, {**overrides, **({"bug": bug} if bug else {})})


def _rerun(seed: int, steps: int, overrides: dict[str, str], bug: str | None):
    return World(_params(seed, overrides, bug)).run(steps)


FAILOVER = (("model", "failover"),)      # a Reproducer's overrides for a failover seed
CONTROLLERS = (("model", "controllers"),)  # ... and for a seed of several controllers


def shrink_controllers(seed: int, steps: int, bug: str | None, outcome: str) -> Reproducer:
    """A failing controllers seed, cut at the step that failed (deterministic: the seed is it)."""
    from reference.failover.controllers_sim import simulate

    first = simulate(seed, steps, (bug,) if bug else ())
    return Reproducer(seed, first.steps, CONTROLLERS, bug, first.violation or "ok", first.trace_hash)


def shrink_failover(seed: int, steps: int, bug: str | None, outcome: str) -> Reproducer:
    """A failing failover seed, cut at the step that failed (the schedule is drawn from
    the seed, so there are no fault rates to switch off)."""
    from reference.failover.drive import simulate

    first = simulate(seed, steps, (bug,) if bug else ())
    if first.violation != outcome:
        return Reproducer(seed, steps, FAILOVER, bug, first.violation or "ok", first.trace_hash)
    return Reproducer(seed, steps, FAILOVER, bug, outcome, first.trace_hash)


def shrink(seed: int, steps: int, overrides: dict[str, str], bug: str | None, outcome: str,
           max_runs: int = 16) -> Reproducer:
    """Delta-debug the fault schedule of a failing seed: cut the run at the
    step that failed, then switch off each kind of fault that is not needed
    for the same property to fail.  Every candidate is a full deterministic
    re-run; at most ``max_runs`` of them."""
    assert outcome != "ok", "only failures are shrunk"
    best = dict(overrides)
    first = _rerun(seed, steps, best, bug)
    runs = 1
    if first.violation != outcome:          # not reproducible: report the run as it was
        return Reproducer(seed, steps, tuple(sorted(best.items())), bug, first.violation or "ok",
                          first.trace_hash)
    final = first
    if first.steps < steps:
        cut = _rerun(seed, first.steps, best, bug)
        runs += 1
        if cut.violation == outcome:
            steps, final = first.steps, cut
    params = _params(seed, best, bug)
    for key in FAULT_KEYS:
        if runs >= max_runs:
            break
        if getattr(params.faults, key) == 0 or key in overrides:
            continue
        candidate = {**best, key: "0"}
        run = _rerun(seed, steps, candidate, bug)
        runs += 1
        if run.violation == outcome:
            best, final = candidate, run
    return Reproducer(seed, steps, tuple(sorted(best.items())), bug, outcome, final.trace_hash)
