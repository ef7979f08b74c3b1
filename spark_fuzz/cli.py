"""`ackorder fuzz` and `ackorder fuzz-report`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from spec.config import BUG_NAMES, ConfigError
from spec.ui import console as make_console


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fuzz", help="a campaign of seeded simulations on Spark",
                       description="Run the deterministic simulator over many seeds on Spark, one Parquet "
                                   "ledger row per seed; deduplicate, shrink and audit the failures.")
    p.add_argument("--seeds", type=int, required=True, help="number of seeds (row indices)")
    p.add_argument("--first-seed", type=int, default=0, help="first row index (default 0)")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--out", type=Path, default=Path(".ackorder/fuzz"), help="ledger and summary directory")
    p.add_argument("--config-matrix", type=Path, metavar="FILE",
                   help="JSON list of objects pinning `ackorder sim --config` knobs; row i uses entry i mod n")
    p.add_argument("--bug", choices=BUG_NAMES, metavar="NAME", help="switch on a seeded defect")
    p.add_argument("--steps", type=int, default=400, help="events with faults per seed (default 400)")
    p.add_argument("--batch-seeds", type=int, default=2_000, help="seeds per Spark job and ledger batch")
    p.add_argument("--resume", action="store_true", help="run only the seeds the ledger lacks")
    p.add_argument("--max-failures", type=int, metavar="K", help="stop after the batch that reaches K failures")
    p.add_argument("--no-audit", action="store_true", help="skip the determinism audit")
    p.set_defaults(func=main)

    r = sub.add_parser("fuzz-report", help="render a campaign's ledger as Markdown/HTML with plots")
    r.add_argument("--out", type=Path, default=Path(".ackorder/fuzz"))
    r.set_defaults(func=report_main)


def _check(args: argparse.Namespace) -> None:
    if args.seeds < 1 or args.first_seed < 0 or args.steps < 1 or args.batch_seeds < 1:
        raise ConfigError("--seeds, --steps and --batch-seeds must be positive and --first-seed >= 0")
    if args.max_failures is not None and args.max_failures < 1:
        raise ConfigError("--max-failures must be at least 1")


def main(args: argparse.Namespace) -> int:
    from spark_fuzz.campaign import CampaignSpec, DeterminismError, run_campaign, spark_session
    from spark_fuzz.seeds import load_matrix

    console = make_console()
    try:
        _check(args)
        load_matrix(args.config_matrix)          # a bad matrix is reported before Spark starts
    except ConfigError as err:
        console.print(f"[bold red]error:[/] {err}")
        return 2
    spec = CampaignSpec(seeds=args.seeds, first_seed=args.first_seed, out=args.out,
                        matrix_path=args.config_matrix, bug=args.bug, steps=args.steps,
                        batch_seeds=args.batch_seeds, max_failures=args.max_failures, resume=args.resume,
                        audit=not args.no_audit)
    spark = spark_session(args.master)
    try:
        summary = run_campaign(spark, spec, console=console)
    except DeterminismError as err:
        console.print(f"[bold red]determinism audit failed:[/] {err}")
        return 3
    finally:
        spark.stop()
    print_summary(console, summary)
    return 0


def print_summary(console, summary: dict) -> None:
    table = Table(title=f"fuzz campaign {summary['campaign']}" + (f" (--bug {summary['bug']})" if summary["bug"]
                                                                  else ""), title_justify="left")
    for col in ("configuration", "seeds", *sorted({o for c in summary["by_config"].values() for o in c})):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    outcomes = sorted({o for c in summary["by_config"].values() for o in c})
    for config, counts in summary["by_config"].items():
        table.add_row(config, f"{sum(counts.values()):,}", *[f"{counts.get(o, 0):,}" for o in outcomes])
    console.print(table)
    console.print(f"{summary['seeds']:,} seeds, {summary['steps']:,} steps; this run: "
                  f"{summary['seeds_run_now']:,} seeds in {summary['seconds']:.1f} s = "
                  f"{summary['seeds_per_second']:,.1f} seeds/s, {summary['steps_per_second']:,.0f} steps/s"
                  + ("; stopped early (--max-failures)" if summary["stopped_early"] else ""))
    console.print("outcomes: " + ", ".join(f"{k} {v:,}" for k, v in summary["outcomes"].items()))
    if summary.get("faults"):
        console.print("faults injected: " + ", ".join(f"{k} {v:,}" for k, v in summary["faults"].items()))
    if "audit" in summary:
        console.print(f"determinism audit: {summary['audit']['seeds']} seeds re-run, same trace hashes")
    for rep in summary["reproducers"]:
        console.print(f"[bold red]{rep['signature']}[/] ×{rep['count']}: "
                      + (rep.get("reproducer") or rep["message"].splitlines()[-1] if rep["message"] else ""))


def report_main(args: argparse.Namespace) -> int:
    from spark_fuzz.report import write_report

    console = make_console()
    summary_path = args.out / "summary.json"
    try:
        summary = json.loads(summary_path.read_text())
    except OSError as err:
        console.print(f"[bold red]error:[/] {summary_path}: {err.strerror} (run `ackorder fuzz --out {args.out}`)")
        return 2
    except json.JSONDecodeError as err:
        console.print(f"[bold red]error:[/] {summary_path}: line {err.lineno}: {err.msg}")
        return 2
    paths = write_report(args.out, summary)
    console.print("wrote " + ", ".join(str(p) for p in paths))
    return 0
