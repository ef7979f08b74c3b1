"""TLC's random simulation fanned out over Spark executors, into the fuzzer's ledger.

For models too large to check exhaustively, each Spark task runs one TLC `-simulate` with its own
seed (derived from the data, never from Spark), depth and number of behaviours, with `-coverage`,
and becomes one ledger row: the property it found violated (or "ok"), the states it generated, the
behaviours it simulated, how often it took each labelled branch of the spec (tla/coverage.py), and
its wall time.  The rows use the fuzz ledger's schema and layout (spark_fuzz/ledger.py), so
`ackorder fuzz-report` renders a simulation campaign as it renders a simulator one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs

from spark_fuzz import ledger

STEPS_IN_TASK = re.compile(r"(?:The number of states generated|states generated): ?([\d,]+)")
TRACES_IN_TASK = re.compile(r"([\d,]+) behaviors? generated|traces? generated:? ?([\d,]+)", re.I)


@attrs.frozen
class SimTask:
    campaign: str
    index: int
    model: str                 # a manifest model's name
    traces: int                # behaviours this task simulates (TLC -simulate num=)
    depth: int                 # TLC -depth
    timeout_s: float | None = None


@attrs.frozen
class SimCampaign:
    model: str
    traces: int                # behaviours in all
    tasks: int                 # Spark tasks (TLC processes), each its own seed
    depth: int = 100
    out: Path = Path(".ackorder/tlc-sim")
    max_failures: int | None = None
    timeout_s: float | None = None

    def campaign_id(self) -> str:
        key = json.dumps({"kind": "tlc-simulate", "model": self.model, "traces": self.traces, "tasks": self.tasks,
                          "depth": self.depth}, sort_keys=True)
        return "t" + hashlib.sha256(key.encode()).hexdigest()[:10]

    def task_list(self) -> list[SimTask]:
        campaign = self.campaign_id()
        per, extra = divmod(self.traces, self.tasks)
        return [SimTask(campaign, i, self.model, per + (1 if i < extra else 0), self.depth, self.timeout_s)
                for i in range(self.tasks) if per + (1 if i < extra else 0) > 0]


def task_seed(campaign: str, index: int) -> int:
    digest = hashlib.sha256(f"ackorder-tlc-sim/{campaign}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1         # TLC's -seed is a Java long; keep it short


def _config_json(model) -> str:
    """The model's constants in the ledger's config vocabulary (what fuzz-report reads)."""
    from spec.cfgfile import load_cfg, model_from_cfg

    cfg, bounds = model_from_cfg(load_cfg(model.cfg_path))
    return json.dumps({"flush_disk_type": cfg.flush_mode, "broker_role": cfg.repl_mode,
                       "transient_store_pool_enable": cfg.transient_store_pool, "ack_policy": cfg.ack_policy,
                       "in_sync_replicas": cfg.in_sync_replicas, "replicas": len(cfg.replicas),
                       "bugs": sorted(cfg.bugs), "file_size": cfg.file_size, **attrs.asdict(bounds)}, sort_keys=True)


def run_task(task: SimTask) -> dict:
    """One TLC simulation; a TLC error is a row (outcome "internal_error"), never an exception."""
    from tla.coverage import branch_counts
    from tla.manifest import load_manifest, resolve
    from tla.tlc import TlcOptions, log_tail, run_model

    model = resolve(load_manifest(), task.model)
    seed = task_seed(task.campaign, task.index)
    row = {"campaign": task.campaign, "index": task.index, "seed": seed, "bug": _bug_of(model),
           "overrides": json.dumps({"model": task.model, "traces": task.traces, "depth": task.depth}, sort_keys=True),
           "config": _config_json(model), "outcome": "ok", "signature": "", "message": "", "steps": 0,
           "spec_steps": 0, "sim_ms": 0, "wall_s": 0.0, "trace_hash": "", "actions": "{}",
           "worker": f"{socket.gethostname()}:{os.getpid()}", "faults": "{}", "branches": "{}", "antecedents": "{}",
           "cpu_s": 0.0, "violation_step": 0}
    start, cpu_start = time.perf_counter(), _cpu_with_children()
    try:
        # the log is read here and goes with the task (a campaign's thousands of tasks keep nothing in /tmp)
        with tempfile.TemporaryDirectory(prefix="ackorder-tlcsim-") as log_dir:
            run = run_model(model, TlcOptions(workers=1, simulate=task.traces, depth=task.depth, seed=seed,
                                              coverage_minutes=1, timeout_s=task.timeout_s),   # 2.15 prints a last report only then
                            Path(log_dir))
            log = run.log_path.read_text(errors="replace") if run.log_path else ""
        # TakeReport's branches serve ReplicaAck and ForgedAck; TLC counts them together: under ReplicaAck
        counts = {k: int(v.split()[0].replace(",", "")) for k, v in branch_counts(log).items()
                  if not k.startswith("ForgedAck/")}
        row.update(steps=run.generated_states or _generated(log), spec_steps=_behaviours(log, task.traces, run),
                   branches=json.dumps({k: n for k, n in counts.items() if n}, sort_keys=True))
        if run.outcome == "error":
            row.update(outcome="internal_error", signature="internal_error",
                       message=("; ".join(run.errors) + f" (the log's end: {log_tail(log)})")[-2_000:])
        elif run.outcome != "pass":
            labels = [s.action for s in run.trace]
            row.update(outcome=run.outcome, violation_step=len(labels), signature=f"{run.outcome} at {labels[-1] if labels else '?'}",
                       message=f"{run.outcome} violated after {len(labels)} states: {' -> '.join(labels)}"[:2_000],
                       trace_hash=hashlib.sha256(" ".join(labels).encode()).hexdigest())
    except Exception as err:  # noqa: BLE001  (a task that cannot run TLC is a row, as a simulator crash is)
        row.update(outcome="internal_error", signature="internal_error", message=f"{type(err).__name__}: {err}")
    row["wall_s"] = round(time.perf_counter() - start, 6)
    row["cpu_s"] = round(_cpu_with_children() - cpu_start, 6)      # TLC's JVM is a child process
    return row


def _cpu_with_children() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _bug_of(model) -> str:
    return model.model if model.kind == "bug" else ""


def _generated(log: str) -> int:
    found = re.findall(r"([\d,]+) states generated", log)
    return int(found[-1].replace(",", "")) if found else 0


def _behaviours(log: str, asked: int, run) -> int:
    """Behaviours TLC simulated: all it was asked for, unless it stopped at a violation."""
    found = re.findall(r"(\d[\d,]*) behaviou?rs? (?:generated|checked)", log)
    if found:
        return int(found[-1].replace(",", ""))
    return asked if run.outcome == "pass" else 0


def run_partition(tasks: Iterator[SimTask]) -> Iterator[dict]:
    for task in tasks:
        yield run_task(task)


def run_sim_campaign(spark, spec: SimCampaign) -> dict:
    """All tasks as one Spark job per batch of 4 x parallelism tasks; stops after the batch that
    reaches ``max_failures``.  Rows go to the ledger; the summary to OUT/summary.json."""
    campaign = spec.campaign_id()
    tasks = spec.task_list()
    slots = max(1, spark.sparkContext.defaultParallelism)
    batch = 4 * slots if spec.max_failures else len(tasks)
    ledger_dir = ledger.campaign_dir(spec.out, campaign)
    if ledger_dir.exists():
        import shutil

        shutil.rmtree(ledger_dir)
    start = time.perf_counter()
    failures = 0
    first_violation_s = None
    for at in range(0, len(tasks), batch):
        chunk = tasks[at: at + batch]
        path = ledger.batch_dir(spec.out, campaign, chunk[0].index, len(chunk))
        rdd = spark.sparkContext.parallelize(chunk, min(len(chunk), slots * 4)).mapPartitions(run_partition)
        spark.createDataFrame(rdd, ledger.spark_schema()).write.mode("overwrite").parquet(str(path))
        outcomes = ledger.read_batch(path).column("outcome").to_pylist()
        found = sum(o != "ok" for o in outcomes)
        if found and first_violation_s is None:
            first_violation_s = time.perf_counter() - start
        failures += found
        if spec.max_failures is not None and failures >= spec.max_failures:
            break
    seconds = time.perf_counter() - start
    rows = ledger.read_ledger(spec.out, campaign).to_pylist()
    summary = summarise(spec, campaign, rows, seconds, first_violation_s)
    spec.out.mkdir(parents=True, exist_ok=True)
    (spec.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def summarise(spec: SimCampaign, campaign: str, rows: list[dict], seconds: float,
              first_violation_s: float | None) -> dict:
    from collections import Counter

    outcomes = Counter(r["outcome"] for r in rows)
    behaviours = sum(r["spec_steps"] for r in rows)
    steps = sum(r["steps"] for r in rows)
    violations = sorted((r for r in rows if r["outcome"] != "ok"), key=lambda r: r["wall_s"])
    return {
        "campaign": campaign, "kind": "tlc-simulate", "model": spec.model, "bug": rows[0]["bug"] if rows else "",
        "seeds": len(rows), "tasks": len(rows), "traces_asked": spec.traces, "depth": spec.depth,
        "traces": behaviours, "steps": steps, "seconds": round(seconds, 3),
        "traces_per_second": round(behaviours / seconds, 1) if seconds else 0.0,
        "states_per_second": round(steps / seconds, 1) if seconds else 0.0,
        "task_seconds": round(sum(r["wall_s"] for r in rows), 3),
        "first_violation_s": None if first_violation_s is None else round(first_violation_s, 3),
        "fastest_task_to_violation_s": round(violations[0]["wall_s"], 3) if violations else None,
        "outcomes": dict(sorted(outcomes.items())),
        "reproducers": [{"signature": r["signature"], "outcome": r["outcome"], "count": 1, "index": r["index"],
                         "seed": r["seed"], "message": r["message"],
                         "reproducer": f"ackorder tlc {spec.model} --simulate {json.loads(r['overrides'])['traces']} "
                                       f"--depth {spec.depth} --seed {r['seed']}"} for r in violations[:20]],
        "faults": {}, "by_config": {}, "stopped_early": len(rows) < len(spec.task_list()),
        "steps_per_second": round(steps / seconds, 1) if seconds else 0.0, "seeds_run_now": len(rows),
        "seeds_per_second": round(len(rows) / seconds, 3) if seconds else 0.0, "max_failures": spec.max_failures,
        "reproducers_file": None, "first_seed": 0,
    }
