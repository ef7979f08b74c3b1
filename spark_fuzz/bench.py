"""Spark's cost, measured side by side in one run (`python -m spark_fuzz.bench`):
the same seeds in a plain single-process loop, on local[1] and on local[2].

Reports seeds/s and simulated steps/s of each, Spark's overhead against the
plain loop on the same single core (local[1]), and the local[2] / local[1]
speed-up.  The session start is excluded (paid once per campaign, 8-10 s);
everything after it — scheduling, pickling, Parquet — is included."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from spark_fuzz.campaign import CampaignSpec, run_campaign, spark_session
from spark_fuzz.seeds import Job, run_job
from rich.console import Console


def plain(campaign: str, seeds: int, steps: int) -> tuple[float, int]:
    start = time.perf_counter()
    total = sum(run_job(Job(campaign, i, (), None, steps))["steps"] for i in range(seeds))
    return time.perf_counter() - start, total


def on_spark(master: str, seeds: int, steps: int, batch: int) -> tuple[float, int, str]:
    spark = spark_session(master)
    try:
        with tempfile.TemporaryDirectory() as out:
            summary = run_campaign(spark, CampaignSpec(seeds=seeds, out=Path(out), steps=steps, batch_seeds=batch,
                                                       audit=False))
    finally:
        spark.stop()
    return summary["seconds"], summary["steps"], summary["campaign"]


def campaign_rates(campaign_seeds: int, progress=print) -> dict:
    """Seeds/s of a fuzz campaign (100 steps per seed) on local[1] and local[2], side by side."""
    out = {}
    for master in ("local[1]", "local[2]"):
        progress(f"sim: fuzz campaign of {campaign_seeds} seeds on {master}")
        seconds, total, _ = on_spark(master, campaign_seeds, 100, max(campaign_seeds // 2, 1))
        out[master] = {"seeds": campaign_seeds, "seconds": round(seconds, 2),
                       "seeds_per_s": round(campaign_seeds / seconds, 1), "steps_per_s": round(total / seconds)}
    out["local2_over_local1"] = round(out["local[2]"]["seeds_per_s"] / out["local[1]"]["seeds_per_s"], 2)
    return out


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
    one_s, one_steps, campaign = on_spark("local[1]", args.seeds, args.steps, args.batch_seeds)
    two_s, two_steps, _ = on_spark("local[2]", args.seeds, args.steps, args.batch_seeds)
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
