"""Side-by-side measurements of the trace bridge (`ackorder bench traces|tlcsim`).

* ``trace_check_rates``: seconds per 1,000 steps of `ackorder trace-check` by TLC and by the twin,
  and the twin's peak RSS, on the same simulator traces, whole (every variable observed, a
  checkpoint every 10,000 steps: TLC checks the segments between them), the short ones also split
  into the master's and the replicas' files (each sees its own variables; the checkers search the
  rest), and on the files a real master and slave wrote (`--trace`).
* ``simulation_rates``: TLC's random simulation fanned out over Spark, behaviours per second on
  local[1] and local[2] with the same tasks and seeds (the session start excluded).
* ``bug_find_times``: per bug model, the wall time of a simulation campaign until the batch that
  finds its violation, and the fastest task's time to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _sim_trace_file(seed: int, events: int, path: Path) -> None:
    """A simulator run's trace, written as it goes (a checkpoint every CHECKPOINT_EVERY_STEPS steps)."""
    from reference.sim.params import draw
    from reference.sim.world import World

    with open(path, "w") as out:
        World(draw(seed), trace=out).run(events)


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


# `ackorder trace-check --twin`, then the process's own peak RSS (VmHWM: its memory since exec; a
# child's ru_maxrss also counts the parent's pages it started with)
_TWIN = """import sys
from cli.main import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
sys.exit(code)
"""


def _twin_in_a_process(files: list[Path]) -> tuple[float, int, int]:
    """The twin's check as a user runs it, in a process of its own, for its peak RSS: (seconds,
    steps, peak RSS in KiB)."""
    with tempfile.TemporaryDirectory(prefix="ackorder-bench-twin-") as tmp:
        verdict, peak = Path(tmp) / "verdict.json", Path(tmp) / "peak"
        start = time.perf_counter()
        child = subprocess.run([sys.executable, "-c", _TWIN, str(peak), "trace-check", "--twin", "--json",
                                str(verdict), *map(str, files)], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - start
        assert child.returncode == 0, (child.returncode, child.stderr)
        return seconds, json.loads(verdict.read_text())["steps"], int(peak.read_text())


NOT_RUN = "not run"


def _check_row(files: list[Path], row: dict, progress: Callable[[str], None], tlc_jobs: int = 1,
               tlc: bool = True) -> dict:
    """Both checkers on the same files, side by side: the twin in a process of its own (its peak
    RSS), TLC from here (its JVMs are processes of their own), split at the file's checkpoints.
    ``tlc`` false: the twin only, TLC's cells say it was not run (a run past --trace-tlc-max-events)."""
    from tla.tlc import TlcOptions
    from tla.tracecheck import check_files

    progress(f"twin on {row['events']} ({row['files']})")
    seconds, steps, rss_kib = _twin_in_a_process(files)
    row["steps"] = steps
    row["twin_s"] = round(seconds, 2)
    row["twin_s_per_1000"] = round(seconds / steps * 1000, 3)
    row["twin_peak_rss_mib"] = round(rss_kib / 1024, 1)
    if not tlc:
        row.update(tlc_segments=NOT_RUN, tlc_batch_s_first_last=NOT_RUN, tlc_s=NOT_RUN, tlc_s_per_1000=NOT_RUN, tlc_over_twin=NOT_RUN)
        return row
    progress(f"tlc on {row['events']} ({row['files']})")
    start = time.perf_counter()
    result = check_files(files, options=TlcOptions(workers=tlc_jobs))
    seconds = time.perf_counter() - start
    assert result.verdict.valid, result.verdict.reason
    assert result.step_count == steps, (result.step_count, steps)
    row["tlc_segments"] = result.timings.get("segments", 1)
    batches = result.timings.get("batch_s", [])
    row["tlc_batch_s_first_last"] = f"{batches[0]} / {batches[-1]}" if batches else "-"
    row["tlc_s"] = round(seconds, 2)
    row["tlc_s_per_1000"] = round(seconds / steps * 1000, 3)
    row["tlc_over_twin"] = round(row["tlc_s"] / row["twin_s"], 1)
    return row


def trace_check_rates(seed: int = 7, steps: tuple[int, ...] = (10_000, 100_000, 300_000), real_messages: int = 300,
                      split_max_events: int = 20_000, tlc_jobs: int = 1, tlc_max_events: int | None = None,
                      progress: Callable[[str], None] = print) -> dict:
    """``steps``: the simulator events of each run (a run takes a few percent more spec steps);
    runs of at most ``split_max_events`` are also checked split into the master's and the
    replicas' files (which have no checkpoints: TLC checks them whole); runs of more than
    ``tlc_max_events`` are checked by the twin only (TLC's cost per step grows with the position in
    the trace: its states hold the logs so far)."""
    from reference.sim.trace import split

    rows = []
    with tempfile.TemporaryDirectory(prefix="ackorder-bench-traces-") as tmp:
        for n in steps:
            progress(f"simulating seed {seed}, {n:,} events")
            whole = Path(tmp) / f"sim-{n}.ndjson"
            _sim_trace_file(seed, n, whole)
            tlc = tlc_max_events is None or n <= tlc_max_events
            rows.append(_check_row([whole], {"events": f"sim {n:,} events", "files": "whole"}, progress, tlc_jobs,
                                   tlc))
            if n <= split_max_events:
                parts = []
                for proc, part in split(whole.read_text(), str(whole)).items():
                    parts.append(Path(tmp) / f"sim-{n}.{proc}.ndjson")
                    parts[-1].write_text(part)
                rows.append(_check_row(parts, {"events": f"sim {n:,} events", "files": "split"}, progress, tlc_jobs))
            whole.unlink()
        if real_messages:
            progress(f"a real master and slave, {real_messages} messages")
            files = _real_traces(Path(tmp), real_messages)
            rows.append(_check_row(files, {"events": f"real run, {real_messages} messages",
                                           "files": "master + r1"}, progress, tlc_jobs))
    return {"scenario": "traces", "seed": seed, "tlc_jobs": tlc_jobs, "tlc_max_events": tlc_max_events,
            "load": round(os.getloadavg()[0], 2),
            "rows": rows}


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
