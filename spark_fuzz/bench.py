"""Spark's cost, measured side by side in one run (`python -m spark_fuzz.bench`):
the same seeds in a plain single-process loop, on local[1] and on local[2].

Reports seeds/s and simulated steps/s of each, Spark's overhead against the
plain loop on the same single core (local[1]), and the local[2] / local[1]
speed-up.  The session start is excluded (paid once per campaign, 8-10 s);
everything after it — scheduling, pickling, Parquet — is included."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import attrs

from spark_fuzz.campaign import CampaignSpec, run_campaign, spark_session
from spark_fuzz.seeds import DEFAULT_STEPS, Job, run_job
from spec.config import ascii_digits
from rich.console import Console

GOAL_SPARK_OVERHEAD = 0.10          # campaign wall x cores over the tasks' CPU, minus 1
GOAL_LOCAL2_OVER_LOCAL1 = 1.8
COMPARE_BUGS = ("BugRecoveryKeepsTorn", "BugFlushIgnoresFsyncError", "BugHandshakeRefusesCaughtUp")


def plain(campaign: str, seeds: int, steps: int) -> tuple[float, int]:
    start = time.perf_counter()
    total = sum(run_job(Job(campaign, i, (), None, steps))["steps"] for i in range(seeds))
    return time.perf_counter() - start, total


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds (user + system, reaped children included) of a process and all its descendants,
    from /proc: this driver, its JVM and the JVM's Python workers.  Unlike the wall clock, other
    jobs on the machine do not inflate it."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not ascii_digits(entry):
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:            # gone meanwhile
            continue
        procs[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root or os.getpid()]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0.0))[1]
        todo += children.get(pid, [])
    return total


def on_spark(master: str, seeds: int, steps: int, batch: int | None) -> tuple[float, int, str, float, float]:
    """A campaign on a session of its own (its start excluded): (wall s, steps, id, the tasks' CPU s,
    the CPU s of the driver, its JVM and its workers over the campaign)."""
    spark = spark_session(master)
    try:
        spark.sparkContext.parallelize([0], 1).count()      # the Python workers started: not the campaign's
        with tempfile.TemporaryDirectory() as out:
            cpu0 = tree_cpu_s()
            summary = run_campaign(spark, CampaignSpec(seeds=seeds, out=Path(out), steps=steps, batch_seeds=batch,
                                                       audit=False))
            tree_s = tree_cpu_s() - cpu0
    finally:
        spark.stop()
    return summary["seconds"], summary["steps"], summary["campaign"], summary["cpu_seconds"], tree_s


GOAL_SEEDS_PER_S_OVER_BEFORE = 3.0
_BASELINE_CAMPAIGN = """
import json, sys, tempfile
from pathlib import Path
import spark_fuzz.campaign as C
master, seeds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spark = C.spark_session(master)
try:
    with tempfile.TemporaryDirectory() as out:
        s = C.run_campaign(spark, C.CampaignSpec(seeds=seeds, out=Path(out), steps=steps, audit=False))
finally:
    spark.stop()
print(json.dumps({"seconds": s["seconds"], "steps": s["steps"], "code": C.__file__}))
"""


def baseline_campaign(tree: Path, master: str, seeds: int, steps: int) -> dict:
    """The same default campaign run from another source tree, in a process of its own (its Spark
    workers import that tree too: PYTHONPATH)."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", _BASELINE_CAMPAIGN, master, str(seeds), str(steps)], cwd=tree,
                          env=env, capture_output=True, text=True, timeout=6 * 3600)
    if proc.returncode != 0:
        raise RuntimeError(f"the campaign from {tree} failed:\n{proc.stderr[-2000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    if Path(r["code"]).resolve().parents[1] != tree.resolve():
        raise RuntimeError(f"the campaign meant for {tree} imported {r['code']}")
    return {"seeds": seeds, "seconds": round(r["seconds"], 2), "seeds_per_s": round(seeds / r["seconds"], 1),
            "steps_per_s": round(r["steps"] / r["seconds"])}


def campaign_rates(campaign_seeds: int, steps: int = DEFAULT_STEPS, progress=print,
                   baseline: Path | None = None) -> dict:
    """Seeds/s of a default fuzz campaign (``steps`` per seed, default batches) on local[1] and
    local[2] and of the same seeds in a plain loop in this process, side by side.  Spark's
    overhead: the campaign's wall time times its cores over the sum of its tasks' own CPU time,
    minus 1 (scheduling, pickling, Parquet, the driver's reading back; what the simulator
    itself costs is in the tasks' CPU) — and, for local[1], its wall over the plain loop's."""
    out: dict = {"steps_per_seed": steps}
    for master, cores in (("local[1]", 1), ("local[2]", 2)):
        if baseline is not None:          # the same campaign from the baseline tree, right before
            progress(f"sim: fuzz campaign of {campaign_seeds} seeds x {steps} steps on {master}, baseline tree")
            load = round(os.getloadavg()[0], 2)
            out[f"before {master}"] = {**baseline_campaign(baseline, master, campaign_seeds, steps), "load": load}
        progress(f"sim: fuzz campaign of {campaign_seeds} seeds x {steps} steps on {master}")
        load = round(os.getloadavg()[0], 2)
        seconds, total, campaign, cpu_s, tree_s = on_spark(master, campaign_seeds, steps, None)
        out[master] = {"seeds": campaign_seeds, "seconds": round(seconds, 2), "task_cpu_s": round(cpu_s, 2),
                       "tree_cpu_s": round(tree_s, 2), "seeds_per_s": round(campaign_seeds / seconds, 1),
                       "steps_per_s": round(total / seconds),
                       "spark_overhead": round(seconds * cores / cpu_s - 1, 3) if cpu_s else None,
                       "spark_cpu_overhead": round(tree_s / cpu_s - 1, 3) if cpu_s else None, "load": load}
    progress(f"sim: the same {campaign_seeds} seeds in a plain loop")
    load = round(os.getloadavg()[0], 2)
    plain_s, plain_steps = plain(campaign, campaign_seeds, steps)
    assert plain_steps == total, (plain_steps, total)
    out["plain"] = {"seeds": campaign_seeds, "seconds": round(plain_s, 2), "seeds_per_s": round(campaign_seeds / plain_s, 1),
                    "steps_per_s": round(plain_steps / plain_s), "load": load}
    out["local1_over_plain_overhead"] = round(out["local[1]"]["seconds"] / plain_s - 1, 3)
    out["local2_over_local1"] = round(out["local[2]"]["seeds_per_s"] / out["local[1]"]["seeds_per_s"], 2)
    for master in ("local[1]", "local[2]"):
        if f"before {master}" in out:
            out[f"{master}_after_over_before"] = round(out[master]["seeds_per_s"] / out[f"before {master}"]["seeds_per_s"], 2)
    out["goals_campaign"] = {"spark_overhead": GOAL_SPARK_OVERHEAD, "local2_over_local1": GOAL_LOCAL2_OVER_LOCAL1,
                             "seeds_per_s_over_before": GOAL_SEEDS_PER_S_OVER_BEFORE}
    return out


@attrs.frozen
class ComparePlan:
    """Both modes get the same step budget per bug switch: many short seeds or a few long ones."""
    short_seeds: int
    short_steps: int
    long_seeds: int
    long_steps: int


COMPARE_FULL = ComparePlan(short_seeds=500, short_steps=DEFAULT_STEPS, long_seeds=2, long_steps=100_000)
COMPARE_QUICK = ComparePlan(short_seeds=100, short_steps=DEFAULT_STEPS, long_seeds=2, long_steps=20_000)


def mode_comparison(bugs: tuple[str, ...], plan: ComparePlan, master: str = "local[2]", progress=print) -> dict:
    """Bugs found per CPU-hour, short mode against long mode, for each bug switch: one campaign
    of each on one session (each seed stops at its violation; no early stop of the campaign, so
    both spend their whole budget unless every seed finds the bug), with the CPU-seconds to the
    first violation (the seeds in index order)."""
    rows = []
    spark = spark_session(master)
    try:
        for bug in bugs:
            for mode, seeds, steps in (("short", plan.short_seeds, plan.short_steps),
                                       ("long", plan.long_seeds, plan.long_steps)):
                progress(f"sim: {bug}, {mode} mode, {seeds} seeds x {steps:,} steps")
                load = round(os.getloadavg()[0], 2)
                with tempfile.TemporaryDirectory() as out:
                    s = run_campaign(spark, CampaignSpec(seeds=seeds, out=Path(out), steps=steps, bug=bug, mode=mode,
                                                         audit=False))
                rows.append({"bug": bug, "mode": mode, "seeds": seeds, "steps_per_seed": steps, "steps": s["steps"],
                             "found": sorted(set(s["outcomes"]) - {"ok"}),
                             "failing_seeds": sum(v for k, v in s["outcomes"].items() if k != "ok"),
                             "cpu_s": s["cpu_seconds"], "bugs_per_cpu_hour": s["bugs_per_cpu_hour"],
                             "cpu_s_to_first": s["cpu_s_to_first_violation"], "wall_s": s["seconds"], "load": load})
    finally:
        spark.stop()
    return {"plan": attrs.asdict(plan), "master": master, "rows": rows}


def bugs(max_seeds: int, steps: int) -> dict[str, dict]:
    """Time for a local[*] campaign of at most ``max_seeds`` seeds to find each bug switch."""
    from spec.config import BUG_NAMES

    spark = spark_session("local[*]")
    found = {}
    try:
        for bug in BUG_NAMES:
            with tempfile.TemporaryDirectory() as out:
                s = run_campaign(spark, CampaignSpec(seeds=max_seeds, out=Path(out), steps=steps, bug=bug,
                                                     batch_seeds=100, max_failures=1, audit=False))
            bad = {k: v for k, v in s["outcomes"].items() if k != "ok"}
            first = min((r["index"] for r in s["reproducers"]), default=None)
            found[bug] = {"found": sorted(bad), "seeds_run": s["seeds"], "seeds_to_first": None if first is None
                          else first + 1, "seconds": round(s["seconds"], 2)}
    finally:
        spark.stop()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bugs", action="store_true",
                        help="instead: time for a campaign of at most --seeds seeds to find each bug switch")
    parser.add_argument("--seeds", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-seeds", type=int, default=5_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    console = Console()
    if args.bugs:
        result = bugs(args.seeds, args.steps)
        for bug, row in result.items():
            console.print(f"{bug:34} {', '.join(row['found']) or 'NOT FOUND':34} first at seed "
                          f"{row['seeds_to_first'] or '-':>4} of {row['seeds_run']:5,} run, {row['seconds']:6.1f} s")
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        return 0 if all(row["found"] for row in result.values()) else 1
    one_s, one_steps, campaign, _, _ = on_spark("local[1]", args.seeds, args.steps, args.batch_seeds)
    two_s, two_steps, _, _, _ = on_spark("local[2]", args.seeds, args.steps, args.batch_seeds)
    plain_s, plain_steps = plain(campaign, args.seeds, args.steps)
    assert plain_steps == one_steps == two_steps, (plain_steps, one_steps, two_steps)
    result = {
        "seeds": args.seeds, "steps_per_seed_cap": args.steps, "sim_steps": plain_steps,
        "plain_s": round(plain_s, 2), "local1_s": round(one_s, 2), "local2_s": round(two_s, 2),
        "plain_seeds_per_s": round(args.seeds / plain_s, 1), "local1_seeds_per_s": round(args.seeds / one_s, 1),
        "local2_seeds_per_s": round(args.seeds / two_s, 1),
        "plain_steps_per_s": round(plain_steps / plain_s), "local2_steps_per_s_per_core": round(two_steps / two_s / 2),
        "spark_overhead_vs_plain": round(one_s / plain_s - 1, 3), "local2_over_local1": round(one_s / two_s, 2),
    }
    for key, value in result.items():
        console.print(f"{key:28} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
