"""Side-by-side measurements of the trace bridge (`ackorder bench traces|tlcsim`).

* ``trace_check_rates``: seconds per 1,000 steps of `ackorder trace-check` by TLC and by the twin,
  on the same simulator traces, whole (every variable observed) and split into the master's and
  the replicas' files (each sees its own variables; the checkers search the rest), and on the
  files a real master and slave wrote (`--trace`).
* ``simulation_rates``: TLC's random simulation fanned out over Spark, behaviours per second on
  local[1] and local[2] with the same tasks and seeds (the session start excluded).
* ``bug_find_times``: per bug model, the wall time of a simulation campaign until the batch that
  finds its violation, and the fastest task's time to it.
"""

from __future__ import annotations

import io
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _sim_trace(seed: int, steps: int) -> str:
    from reference.sim.params import draw
    from reference.sim.world import World

    out = io.StringIO()
    World(draw(seed), trace=out).run(steps)
    return out.getvalue()


def _real_traces(directory: Path, messages: int) -> list[Path]:
    """A real SYNC_FLUSH + SYNC_MASTER master and slave r1 writing their traces under ``messages``
    puts from 4 producers; stopped with SIGTERM (the master first: its file can end complete)."""
    from reference.bench.procs import start_master, start_replica
    from reference.real.load import run_load

    seg = ["--mapped-file-size-commit-log", str(1 << 20), "--max-message-size", "4096"]
    files = [directory / "master.ndjson", directory / "r1.ndjson"]
    master = start_master(directory / "m", ["--flush-disk-type", "SYNC_FLUSH", "--broker-role", "SYNC_MASTER",
                                            "--replicas", "r1", *seg, "--trace", str(files[0])])
    replica = None
    try:
        replica = start_replica(directory / "r1", master.ha_port, "r1", [*seg[:2], "--trace", str(files[1])])
        master.wait_for(r"slave r1 connected")
        result = run_load(("127.0.0.1", master.port), producers=4, count=messages, size=100)
        assert result.statuses.get("PUT_OK") == messages, result.statuses
    finally:
        master.stop()
        if replica is not None:
            replica.stop()
    return files


def _check_row(files: list[Path], row: dict, progress: Callable[[str], None]) -> dict:
    """Both checkers on the same files, side by side."""
    from tla.tracecheck import check_files

    for checker in ("twin", "tlc"):
        progress(f"{checker} on {row['events']} ({row['files']})")
        start = time.perf_counter()
        result = check_files(files, twin=checker == "twin")
        seconds = time.perf_counter() - start
        assert result.verdict.valid, result.verdict.reason
        row["steps"] = len(result.steps)
        row[f"{checker}_s"] = round(seconds, 2)
        row[f"{checker}_s_per_1000"] = round(seconds / len(result.steps) * 1000, 3)
    row["tlc_over_twin"] = round(row["tlc_s"] / row["twin_s"], 1)
    return row


def trace_check_rates(seed: int = 7, steps: tuple[int, ...] = (2_000, 20_000), real_messages: int = 300,
                      progress: Callable[[str], None] = print) -> dict:
    from reference.sim.trace import split

    rows = []
    with tempfile.TemporaryDirectory(prefix="ackorder-bench-traces-") as tmp:
        for n in steps:
            progress(f"simulating seed {seed}, {n:,} events")
            text = _sim_trace(seed, n)
            whole = Path(tmp) / f"sim-{n}.ndjson"
            whole.write_text(text)
            parts = []
            for proc, part in split(text).items():
                parts.append(Path(tmp) / f"sim-{n}.{proc}.ndjson")
                parts[-1].write_text(part)
            for kind, files in (("whole", [whole]), ("split", parts)):
                rows.append(_check_row(files, {"events": f"sim {n:,} events", "files": kind}, progress))
        if real_messages:
            progress(f"a real master and slave, {real_messages} messages")
            files = _real_traces(Path(tmp), real_messages)
            rows.append(_check_row(files, {"events": f"real run, {real_messages} messages",
                                           "files": "master + r1"}, progress))
    return {"scenario": "traces", "seed": seed, "rows": rows}


def _simulate(master: str, model: str, traces: int, tasks: int, depth: int, max_failures=None) -> dict:
    from spark_fuzz.campaign import spark_session
    from spark_fuzz.tlcsim import SimCampaign, run_sim_campaign

    spark = spark_session(master)
    try:
        with tempfile.TemporaryDirectory(prefix="ackorder-bench-tlcsim-") as out:
            return run_sim_campaign(spark, SimCampaign(model=model, traces=traces, tasks=tasks, depth=depth,
                                                       out=Path(out), max_failures=max_failures))
    finally:
        spark.stop()


def simulation_rates(model: str = "sync_both_all_large", traces: int = 20_000, tasks: int = 8, depth: int = 40,
                     progress: Callable[[str], None] = print) -> dict:
    out = {"scenario": "tlcsim", "model": model, "traces": traces, "tasks": tasks, "depth": depth}
    for master in ("local[1]", "local[2]"):
        progress(f"TLC simulation of {model} on {master}")
        s = _simulate(master, model, traces, tasks, depth)
        assert set(s["outcomes"]) == {"ok"}, s["outcomes"]
        out[master] = {"seconds": s["seconds"], "traces": s["traces"], "traces_per_s": s["traces_per_second"],
                       "states_per_s": s["states_per_second"]}
    out["speedup"] = round(out["local[2]"]["traces_per_s"] / out["local[1]"]["traces_per_s"], 2)
    return out


def bug_find_times(master: str = "local[2]", traces: int = 20_000, tasks: int = 8, depth: int = 40,
                   progress: Callable[[str], None] = print) -> dict:
    from tla.manifest import expected_violations, load_manifest

    rows = []
    for m in load_manifest():
        if m.kind != "bug":
            continue
        progress(f"simulating {m.model} on {master}")
        s = _simulate(master, m.model, traces, tasks, depth, max_failures=1)
        found = sorted(set(s["outcomes"]) - {"ok"})
        rows.append({"model": m.model, "expected": m.expected, "found": found, "as_expected": bool(found) and set(found) <= expected_violations(m.model),
                     "first_violation_s": s["first_violation_s"],
                     "fastest_task_s": s["fastest_task_to_violation_s"], "tasks_run": s["tasks"]})
    return {"scenario": "tlcbugs", "master": master, "traces": traces, "tasks": tasks, "depth": depth, "rows": rows}
