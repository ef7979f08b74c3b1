"""A fuzz campaign: seeds fanned out over Spark, batch by batch, into the ledger.

The driver schedules only the seed indices the ledger lacks (so ``--resume``
and a re-run after a killed driver never count a seed twice), runs each batch
as one Spark job (``mapPartitions``: many seeds per task), and reads the
batch back from Parquet to count outcomes: the ledger, not an accumulator,
is the record.  Then failures are deduplicated by signature and the smallest
seed of each is shrunk into a reproducer; a determinism audit re-runs every
failing seed and 1 % of the others in another partitioning and compares
trace hashes.

Two modes.  ``short`` (the default): many seeds of a few hundred steps, many
seeds per Spark task.  ``long``: few seeds of very long runs (a million steps
by default), one Spark task per seed, each stopping at its first violation;
a batch is as many seeds as Spark runs at once, so a killed driver loses at
most the runs in flight.  Both record each seed's own CPU time, and the
summary gives bugs found per CPU-hour (distinct properties violated / CPU
hours of the tasks): the figure the two modes are compared by.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from spark_fuzz import ledger
from spark_fuzz.seeds import (CONTROLLERS, FAILOVER, Job, Reproducer, load_matrix, run_partition, shrink,
                              shrink_controllers, shrink_failover)
from spec.config import ascii_digits

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

AUDIT_FRACTION = 0.01
MAX_SHRINKS = 20                 # distinct failure signatures shrunk per campaign
MESSAGE_KEPT = 2_000             # characters of a failure's message (or traceback) in the summary
MODES = ("short", "long")
SHORT_BATCH_SEEDS = 2_000
LONG_SHRINK_RUNS = 2             # a long seed's reproducer: the run cut at its violation, no fault delta-debugging
HISTORY = "campaigns.jsonl"      # one line per finished campaign in OUT: the per-CPU-hour comparison of modes


class DeterminismError(RuntimeError):
    """The same seed gave two different traces."""


@attrs.frozen
class CampaignSpec:
    seeds: int
    first_seed: int = 0
    out: Path = Path(".ackorder/fuzz")
    matrix_path: Path | None = None
    bug: str | None = None
    steps: int = 400
    batch_seeds: int | None = None      # None: 2,000 (short), as many as run at once (long)
    max_failures: int | None = None
    resume: bool = False
    audit: bool = True
    model: str = "write-path"
    mode: str = attrs.field(default="short", validator=attrs.validators.in_(MODES))

    def campaign_id(self, matrix) -> str:
        """Named by what decides its rows, so a resumed campaign finds its ledger."""
        fields = {"matrix": matrix, "bug": self.bug, "steps": self.steps}
        if self.model != "write-path":          # write-path campaigns keep their ids (and ledgers)
            fields["model"] = self.model
        if self.mode != "short":
            fields["mode"] = self.mode
        key = json.dumps(fields, sort_keys=True)
        return "c" + hashlib.sha256(key.encode()).hexdigest()[:10]


def _py4j_interrupt_record(record: logging.LogRecord) -> bool:
    """False for py4j's own record of a KeyboardInterrupt it re-raises (``logging.exception`` on the
    root logger): the interrupt itself is what the command reports."""
    return not (record.exc_info and record.exc_info[0] is KeyboardInterrupt
                and record.getMessage().startswith("KeyboardInterrupt while sending command"))


def _started_off_the_main_thread(start: Callable[[threading.Event], SparkSession]) -> SparkSession:
    """``start()``'s session, started on a thread of its own.  On the main thread, PySpark's SparkContext
    takes SIGINT for a handler that calls into the JVM from inside the signal while the main thread waits
    on the same py4j connection (a Ctrl-C printed pages of py4j's "reentrant call" tracebacks); off it,
    it takes nothing, and the caller's handler stays: a KeyboardInterrupt, then ``spark.stop()``.  And a
    Ctrl-C while the driver's JVM starts left that JVM running, holding the command's stdout and stderr
    open (PySpark's launch does not stop it when interrupted): here the start runs to its end, and a
    session it made is stopped, before the interrupt goes on.  ``start`` is told, by the Event it is
    given, when a stop was asked for: a JVM that failed then failed for that reason."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        return start(stopping)
    outcome: dict = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["session"] = start(stopping)
        except BaseException as err:        # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = err
        finally:
            done.set()

    # Waited for on an Event, not by join(): a join a KeyboardInterrupt breaks marks the thread as ended
    # while it runs (CPython 3.11), and the interpreter then exits under it, the JVM half started.
    children_before = _children()
    threading.Thread(target=run, name="spark-session-start").start()    # not a daemon: see above
    try:
        done.wait()
    except KeyboardInterrupt:
        stopping.set()
        try:
            done.wait()
        except KeyboardInterrupt:       # a second one does not wait: the JVM it started is killed, and
            for pid in _children() - children_before:      # the launch, seeing it gone, ends at once
                _kill(pid)
            done.wait()
        if "session" in outcome:
            outcome["session"].stop()
        raise
    if "error" in outcome:
        raise outcome["error"]
    session = outcome["session"]
    # PySpark's pinned threads keep the JVM's active session per thread: the main thread's, as
    # SparkSession's own constructor sets it on the thread that made it
    session._get_j_spark_session_class(session._jvm).setActiveSession(session._jsparkSession)
    return session


def _children() -> set[int]:
    """This process's child processes (Linux's /proc: a process's fourth stat field is its parent; none
    where there is no /proc)."""
    mine, found = os.getpid(), set()
    if not os.path.isdir("/proc"):
        return found
    for entry in os.scandir("/proc"):
        if ascii_digits(entry.name):
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    stat = f.read()
            except OSError:         # ended since the directory was read
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == mine:
                found.add(int(entry.name))
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def spark_session(master: str, conf: dict[str, str] | None = None, cds_dir: Path | None = None):
    """A session on ``master``; ``conf`` wins over the defaults here.  The driver's JVM maps its
    classes from the class-data archive when there is one (spark_fuzz/jvmcds.py, in ``cds_dir``
    or the default place), unless ``conf`` sets the driver's JVM options itself."""
    from pyspark.sql import SparkSession

    from spark_fuzz import jvmcds
    from spark_fuzz.standalone import jvm_conf, session_builder_conf, spark_env

    if "PYSPARK_GATEWAY_PORT" not in os.environ:     # not under spark-submit, which set up its own
        os.environ.update(spark_env())
    builder = SparkSession.builder.master(master).appName("ackorder-fuzz")
    loopback = master.startswith("local") or "127.0.0.1" in master or "localhost" in master
    for key, value in session_builder_conf().items():
        if loopback or not key.startswith("spark.driver."):   # remote executors must reach the driver
            builder = builder.config(key, value)
    builder = builder.config("spark.task.maxFailures", "4")
    conf = conf or {}
    driver = "spark.driver.extraJavaOptions"
    archive = None if driver in conf else jvmcds.usable_archive(cds_dir)
    for key, value in {**jvm_conf(), driver: jvmcds.driver_options(archive), **conf}.items():
        builder = builder.config(key, value)
    root = logging.getLogger()
    if _py4j_interrupt_record not in root.filters:
        root.addFilter(_py4j_interrupt_record)      # py4j logs a Ctrl-C it passes on, traceback and all
    # py4j's own loggers report a connection the interrupt or a stopping JVM broke, with tracebacks: the
    # driver gets each failure as an exception anyway, and the command reports that.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)

    def start(stopping: threading.Event):
        try:
            return builder.getOrCreate()
        except Exception as err:
            if archive is None or stopping.is_set():      # not the archive's fault: the JVM was stopped
                raise
            # A JVM that will not start with the archive (a damaged file crashes it) starts without it;
            # only when that works was the archive the cause, and it goes.
            session = builder.config(driver, jvmcds.driver_options(None)).getOrCreate()
            jvmcds.discard(archive, f"the driver's JVM did not start with it: {str(err).strip()[:200]}")
            return session

    session = _started_off_the_main_thread(start)
    session.sparkContext.setLogLevel("ERROR")
    return session


def _jobs(campaign: str, indices: list[int], matrix, spec: CampaignSpec) -> list[Job]:
    return [Job(campaign, i, matrix[i % len(matrix)], spec.bug, spec.steps, spec.model) for i in indices]


def _run_batch(spark, jobs: list[Job], path: Path, slices: int) -> None:
    """One Spark job; each task writes its rows as one Parquet part of the batch directory
    (``ledger.write_part``: the rows never go through the JVM), and the driver marks the batch
    complete once every part is in.  The directory is emptied first, and a retried task
    replaces its own part, so a re-run batch never leaves a row twice."""
    import shutil
    from functools import partial

    assert jobs and slices >= 1, (len(jobs), slices)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    rdd = spark.sparkContext.parallelize(jobs, min(slices, len(jobs)))
    written = rdd.mapPartitionsWithIndex(partial(_write_partition, str(path))).collect()
    assert sum(written) == len(jobs), (sum(written), len(jobs))
    (path / "_SUCCESS").touch()


def _write_partition(batch: str, part: int, jobs) -> list[int]:
    return [ledger.write_part(Path(batch), part, list(run_partition(jobs)))]


@attrs.frozen
class BatchProgress:
    """Where a campaign stands, after each batch (and once before the first)."""
    done: int              # seeds with a row in the ledger, of ``total``
    total: int
    failures: int
    seeds_per_second: float | None   # of this run so far


def run_campaign(spark, spec: CampaignSpec, on_batch: Callable[[BatchProgress], None] | None = None) -> dict:
    matrix = load_matrix(spec.matrix_path)
    campaign = spec.campaign_id(matrix)
    wanted = range(spec.first_seed, spec.first_seed + spec.seeds)
    done = ledger.done_indices(spec.out, campaign) if spec.resume else set()
    if not spec.resume and ledger.complete_batches(spec.out, campaign):
        _clear(spec.out, campaign)
    missing = [i for i in wanted if i not in done]
    parallelism = spark.sparkContext.defaultParallelism
    if spec.mode == "long":      # one task per seed: a long run is the unit of work
        batch_seeds, slices = spec.batch_seeds or parallelism, spec.batch_seeds or parallelism
    else:
        batch_seeds, slices = spec.batch_seeds or SHORT_BATCH_SEEDS, 4 * parallelism
    assert batch_seeds >= 1, batch_seeds
    start = time.perf_counter()
    failures = sum(1 for row in _rows(spec.out, campaign, ["index", "outcome"])
                   if row["outcome"] != "ok" and row["index"] in wanted)
    stopped_early = False
    report = on_batch or (lambda p: None)
    report(BatchProgress(len(wanted) - len(missing), len(wanted), failures, None))
    ran, ran_indices = 0, set()
    for at in range(0, len(missing), batch_seeds):
        chunk = missing[at: at + batch_seeds]
        path = ledger.batch_dir(spec.out, campaign, chunk[0], len(chunk))
        _run_batch(spark, _jobs(campaign, chunk, matrix, spec), path, slices)
        outcomes = ledger.read_batch(path).column("outcome").to_pylist()
        assert len(outcomes) == len(chunk), (len(outcomes), len(chunk))
        ran += len(chunk)
        ran_indices.update(chunk)
        failures += sum(o != "ok" for o in outcomes)
        report(BatchProgress(len(wanted) - len(missing) + ran, len(wanted), failures,
                             ran / (time.perf_counter() - start)))
        if spec.max_failures is not None and failures >= spec.max_failures:
            stopped_early = at + len(chunk) < len(missing)
            break
    seconds = time.perf_counter() - start
    rows = [r for r in _rows(spec.out, campaign) if r["index"] in wanted]
    summary = _summarise(spec, campaign, rows, seconds, ran_indices, stopped_early)
    if spec.audit and rows:
        summary["audit"] = audit(spark, campaign, rows, matrix, spec)
    spec.out.mkdir(parents=True, exist_ok=True)
    (spec.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    with open(spec.out / HISTORY, "a") as history:
        history.write(json.dumps(per_cpu_hour_entry(summary), sort_keys=True) + "\n")
    return summary


PER_CPU_HOUR_KEYS = ("campaign", "mode", "model", "bug", "seeds", "steps", "steps_per_seed", "cpu_seconds",
                     "bugs_found", "bugs_per_cpu_hour", "cpu_s_to_first_violation", "seconds")


def per_cpu_hour_entry(summary: dict) -> dict:
    return {k: summary.get(k) for k in PER_CPU_HOUR_KEYS}


def read_history(out: Path) -> list[dict]:
    """The latest entry of each campaign run into ``out`` (either mode), oldest first; a torn
    last line (a driver killed while appending) is skipped."""
    path = Path(out) / HISTORY
    if not path.exists():
        return []
    latest: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and "campaign" in entry:
            latest.pop(entry["campaign"], None)
            latest[entry["campaign"]] = entry
    return list(latest.values())


def cpu_figures(rows: list[dict]) -> dict:
    """Bugs found per CPU-hour: distinct properties violated over the hours of CPU the seeds
    took in their tasks; and the CPU-seconds to the first violation, with the seeds taken in
    index order (what one core running them one after another would have spent)."""
    cpu_s = sum(r.get("cpu_s") or 0.0 for r in rows)
    bugs = sorted({r["outcome"] for r in rows} - {"ok"})
    to_first, first = 0.0, None
    for r in sorted(rows, key=lambda r: r["index"]):
        to_first += r.get("cpu_s") or 0.0
        if r["outcome"] != "ok":
            first = r
            break
    return {
        "cpu_seconds": round(cpu_s, 6), "bugs_found": len(bugs), "bugs_found_names": bugs,
        "bugs_per_cpu_hour": round(len(bugs) / (cpu_s / 3600), 3) if cpu_s > 0 else 0.0,
        "cpu_s_to_first_violation": round(to_first, 6) if first else None,
        "first_violation": None if first is None else {
            "index": first["index"], "outcome": first["outcome"], "step": first.get("violation_step") or 0,
            "cpu_s": round(first.get("cpu_s") or 0.0, 3)},
    }


def _clear(out: Path, campaign: str) -> None:
    import shutil

    shutil.rmtree(ledger.campaign_dir(out, campaign), ignore_errors=True)


def _rows(out: Path, campaign: str, columns: list[str] | None = None) -> list[dict]:
    return ledger.read_ledger(out, campaign, columns).to_pylist()


def _summarise(spec: CampaignSpec, campaign: str, rows: list[dict], seconds: float, ran_indices: set[int],
               stopped_early: bool) -> dict:
    ran = len(ran_indices)
    steps_now = sum(r["steps"] for r in rows if r["index"] in ran_indices)
    outcomes = Counter(r["outcome"] for r in rows)
    steps = sum(r["steps"] for r in rows)
    wall = sum(r["wall_s"] for r in rows)
    by_signature: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r["outcome"] != "ok":
            by_signature[r["signature"]].append(r)
    reproducers = []
    for n, (sig, group) in enumerate(sorted(by_signature.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:MAX_SHRINKS]):
        first = min(group, key=lambda r: r["index"])
        overrides = json.loads(first["overrides"])
        entry = {"signature": sig, "outcome": first["outcome"], "count": len(group), "index": first["index"],
                 "seed": first["seed"], "message": first["message"][:MESSAGE_KEPT]}
        if first["outcome"] == "internal_error":   # a crash of the simulator: the seed itself reproduces it
            pins = FAILOVER if spec.model == "failover" else CONTROLLERS if spec.model == "controllers" else \
                tuple(sorted(overrides.items()))
            rep = Reproducer(first["seed"], spec.steps, pins, spec.bug or None, "internal_error", "")
            entry.update(reproducer=rep.command(), reproduces=None)
        else:
            runs = LONG_SHRINK_RUNS if spec.mode == "long" else 16    # a long seed's re-run costs its run
            rep = (shrink_failover(first["seed"], spec.steps, spec.bug or None, first["outcome"])
                   if spec.model == "failover" else
                   shrink_controllers(first["seed"], spec.steps, spec.bug or None, first["outcome"])
                   if spec.model == "controllers" else
                   shrink(first["seed"], spec.steps, overrides, spec.bug or None, first["outcome"], runs))
            trace = spec.out / "traces" / f"{n:02d}-{re.sub(r'[^A-Za-z0-9]+', '-', sig).strip('-')}.ndjson"
            rep.write_trace(trace)
            entry.update(reproducer=rep.command(), trace_hash=rep.trace_hash, shrunk_steps=rep.steps,
                         reproduces=rep.outcome == first["outcome"], trace=str(trace))
        reproducers.append(entry)
    reproducers_file = None
    if reproducers:
        reproducers_file = spec.out / "reproducers.txt"
        spec.out.mkdir(parents=True, exist_ok=True)
        reproducers_file.write_text("".join(f"# {r['signature']} (x{r['count']})\n{r['reproducer']}\n"
                                            for r in reproducers))
    faults: Counter = Counter()
    for r in rows:
        faults.update(json.loads(r.get("faults") or "{}"))
    by_config: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        c = json.loads(r["config"]) if r["config"] else {}
        key = c["model"] if c.get("model") in ("failover", "controllers") else \
            "/".join(str(c.get(k, "?")) for k in ("flush_disk_type", "broker_role", "ack_policy"))
        by_config[key][r["outcome"]] += 1
    return {
        "campaign": campaign, "model": spec.model, "mode": spec.mode, "steps_per_seed": spec.steps,
        "bug": spec.bug, "first_seed": spec.first_seed, "seeds": len(rows), **cpu_figures(rows),
        "seeds_run_now": ran, "steps": steps, "seconds": round(seconds, 3),
        "seeds_per_second": round(ran / seconds, 3) if seconds and ran else 0.0,
        "steps_per_second": round(steps_now / seconds, 1) if seconds and ran else 0.0,
        "sim_seconds_in_tasks": round(wall, 3), "outcomes": dict(sorted(outcomes.items())),
        "faults": dict(sorted(faults.items())),
        "by_config": {k: dict(v) for k, v in sorted(by_config.items())},
        "reproducers": reproducers, "stopped_early": stopped_early, "max_failures": spec.max_failures,
        "reproducers_file": str(reproducers_file) if reproducers_file else None,
    }


def audit(spark, campaign: str, rows: list[dict], matrix, spec: CampaignSpec) -> dict:
    """Re-run every failing seed and a 1 % sample of the rest, in reverse
    order and another partitioning (so on other tasks, usually other
    executors), and compare trace hashes.  A long campaign re-runs its failing
    seeds only (each stops at its violation; a clean long seed would cost as
    much again as it did)."""
    rng = random.Random(f"audit/{campaign}")
    failing = [r for r in rows if r["outcome"] != "ok"]
    passing = [r for r in rows if r["outcome"] == "ok"] if spec.mode == "short" else []
    if not failing and not passing:
        return {"seeds": 0, "failing": 0, "mismatches": []}
    sample = failing + rng.sample(passing, max(1, int(len(passing) * AUDIT_FRACTION))) if passing else failing
    sample = sorted(sample, key=lambda r: -r["index"])[:2_000]
    jobs = _jobs(campaign, [r["index"] for r in sample], matrix, spec)
    slices = max(1, 3 * spark.sparkContext.defaultParallelism - 1)
    again = spark.sparkContext.parallelize(jobs, min(slices, len(jobs))).mapPartitions(run_partition).collect()
    before = {r["index"]: (r["trace_hash"], r["outcome"]) for r in sample}
    mismatches = [r["index"] for r in again if before[r["index"]] != (r["trace_hash"], r["outcome"])]
    result = {"seeds": len(sample), "failing": len(failing), "mismatches": mismatches[:20]}
    if mismatches:
        raise DeterminismError(f"{len(mismatches)} seed(s) gave a different trace when re-run: indices "
                               f"{mismatches[:20]}")
    return result


def campaign_verdict(summary: dict, bug: str | None) -> tuple[bool, str]:
    """Whether a finished campaign came out as expected, and why: a clean one with no failing seed,
    a ``bug`` one that found its bug as its cfg's property (or one the simulator may also show) and
    nothing else."""
    outcomes = {k: v for k, v in summary["outcomes"].items() if k != "ok"}
    if bug is None:
        if outcomes:
            return False, f"{sum(outcomes.values()):,} seed(s) failed: " + \
                ", ".join(f"{k} {v:,}" for k, v in outcomes.items())
        return True, f"no violation in {summary['seeds']:,} seeds"
    from tla.manifest import expected_violations

    expected = expected_violations(bug)
    found = set(outcomes) & expected
    others = set(outcomes) - expected
    if others:
        return False, f"{bug}: unexpected outcomes {', '.join(sorted(others))}" + \
            (f" (besides {', '.join(sorted(found))})" if found else "")
    if not found:
        return False, f"{bug} was not found in {summary['seeds']:,} seeds"
    return True, f"{bug} found as {', '.join(sorted(found))}, as expected"
