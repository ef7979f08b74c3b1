"""`ackorder tlc`: run TLC on the models of tla/manifest.json."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import attrs
from rich.console import Console

from spec.ui import console as make_console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from tla.manifest import KINDS, MANIFEST_PATH, SIZES, ManifestError, load_manifest, save_manifest, select
from tla.report import counterexample_table, print_errors, results_table
from tla.tlc import TlcRun, TlcUnavailable, run_model


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tlc", help="model-check the TLA+ spec with TLC",
                       description="Run TLC on the models of tla/manifest.json and print one row per model.")
    p.add_argument("models", nargs="*", metavar="MODEL", help="model names (default: every model)")
    p.add_argument("--list", action="store_true", help="list the models with their expectation and exit")
    p.add_argument("--workers", type=int, default=None, help="TLC worker threads (default: CPU count)")
    p.add_argument("--size", choices=SIZES, help="only small (make test) or large (make run) models")
    p.add_argument("--kind", choices=KINDS, help="only green, bug or reach models")
    p.add_argument("--manifest", type=Path, default=MANIFEST_PATH, help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    p.add_argument("--traces", choices=("auto", "all", "none"), default="auto",
                   help="counterexample tables: auto = unexpected outcomes, or every violation when "
                        "models are named")
    p.add_argument("--check-counts", action="store_true",
                   help="also fail when distinct states or depth differ from the manifest")
    p.add_argument("--update-manifest", action="store_true",
                   help="record the observed counts in tla/manifest.json (models with the expected outcome; "
                        "needs --workers 1, the only setting whose depths are reproducible)")
    p.set_defaults(func=main)


def list_models(console: Console, models) -> None:
    table = Table(title="Models (tla/manifest.json)", title_justify="left")
    for col in ("model", "kind", "size", "expected", "distinct states", "depth", "what it checks"):
        table.add_column(col)
    for m in models:
        table.add_row(m.model, m.kind, m.size, m.expected,
                      "-" if m.distinct_states is None else f"{m.distinct_states:,}",
                      "-" if m.depth is None else str(m.depth), m.title)
    console.print(table)


def count_mismatches(runs: list[TlcRun], workers: int) -> list[str]:
    """Models whose TLC counts differ from the manifest's record.  With more
    than one worker TLC's BFS is not level by level, so only the distinct
    count of a passing run is comparable; with one worker everything is."""
    out = []
    for run in runs:
        m = run.model
        if not run.as_expected or not m.counts_are_stable or (run.outcome != "pass" and workers != 1):
            continue
        if m.distinct_states is None or m.depth is None:
            out.append(f"{m.model}: no counts recorded in the manifest")
            continue
        if run.distinct_states != m.distinct_states:
            out.append(f"{m.model}: distinct states {run.distinct_states} (manifest {m.distinct_states})")
        if workers == 1 and run.depth != m.depth:
            out.append(f"{m.model}: depth {run.depth} (manifest {m.depth})")
    return out


def run_models(console: Console, models, workers: int) -> list[TlcRun]:
    runs: list[TlcRun] = []
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.fields[stats]}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        overall = progress.add_task(f"TLC: 0/{len(models)} models", total=len(models), stats="")
        for m in models:
            task = progress.add_task(f"  {m.model}", total=None, stats="starting")

            def on_progress(generated, distinct, queue, task=task):
                progress.update(task, stats=f"{distinct:,} distinct states, {queue:,} on queue")

            run = run_model(m, workers=workers, on_progress=on_progress)
            runs.append(run)
            progress.remove_task(task)
            done = len(runs)
            progress.update(overall, advance=1, description=f"TLC: {done}/{len(models)} models")
            mark = "ok" if run.as_expected else "UNEXPECTED"
            console.log(f"{m.model}: {run.outcome} ({mark}), {run.distinct_states or 0:,} states, "
                        f"{run.seconds:.1f} s")
    return runs


def main(args: argparse.Namespace) -> int:
    console = make_console()
    try:
        models = select(load_manifest(args.manifest), args.models, args.size, args.kind)
    except ManifestError as err:
        console.print(f"[bold red]error:[/] {err}")
        return 2
    if args.list:
        list_models(console, models)
        return 0
    if not models:
        console.print("[bold red]error:[/] no model matches the selection")
        return 2
    workers = args.workers or os.cpu_count() or 1
    try:
        runs = run_models(console, models, workers)
    except TlcUnavailable as err:
        console.print(f"[bold red]error:[/] {err}")
        return 2
    console.print(results_table(runs))
    for run in runs:
        if run.outcome == "error":
            print_errors(console, run)
        show = args.traces == "all" or (args.traces == "auto" and (not run.as_expected or args.models))
        if run.trace and show and run.outcome not in ("pass", "error"):
            console.print(counterexample_table(run))
    if args.json:
        args.json.write_text(json.dumps([r.to_json() for r in runs], indent=2) + "\n")
    unexpected = [r for r in runs if not r.as_expected]
    mismatches = count_mismatches(runs, workers)
    for line in mismatches:
        console.print(f"[yellow]counts differ:[/] {line}")
    if args.update_manifest and workers != 1:
        console.print("[bold red]error:[/] --update-manifest needs --workers 1")
        return 2
    if args.update_manifest:
        update_manifest(runs)
        console.print("tla/manifest.json updated")
    if unexpected:
        console.print(f"[bold red]{len(unexpected)} model(s) gave an unexpected outcome:[/] "
                      + ", ".join(r.model.model for r in unexpected))
        return 1
    if args.check_counts and mismatches:
        return 1
    console.print(f"[green]all {len(runs)} models gave their expected outcome[/]")
    return 0


def update_manifest(runs: list[TlcRun]) -> None:
    observed = {r.model.model: r for r in runs if r.as_expected}
    models = []
    for m in load_manifest():
        if (run := observed.get(m.model)) is not None:
            m = attrs.evolve(m, distinct_states=run.distinct_states, depth=run.depth)
        models.append(m)
    save_manifest(models)
