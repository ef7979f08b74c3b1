"""`ackorder tlc`: TLC on the manifest's models, on a cfg path, or on a user's own spec."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from cli.argtypes import output_file
from cli import errors
from cli.ui import FAILED, FOUND_AS_EXPECTED, bar_column, console as make_console, print_line
from spec.config import ConfigError
from tla import counterexample
from tla.check import Events, Verdict, check_models, new_log_dir, update_manifest, verdict_json
from tla.manifest import (KINDS, MANIFEST_PATH, SIZES, Model, adhoc_model, load_manifest, resolve,
                          save_manifest, select)
from tla.tlc import TlcOptions, TlcUnavailable

MAX_VALUE_CHARS = 320


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tlc", help="model-check the TLA+ spec (or your own) with TLC 2.15",
        description="Run TLC on models of tla/manifest.json (by name, either spelling of a bug), on a cfg "
                    "path, or on your own spec with --spec/--config. Each model's outcome, distinct states "
                    "and depth are compared with the manifest: any difference is an unexpected outcome "
                    "(exit 1). Arguments after `--` go to TLC verbatim.")
    p.add_argument("models", nargs="*", metavar="MODEL|CFG", help="model names or .cfg paths (default: all)")
    p.add_argument("--list", action="store_true", help="list the models with their expectation and exit")
    p.add_argument("--size", choices=SIZES, help="only small (make test) or large (run --full) models")
    p.add_argument("--kind", choices=KINDS, help="only green, bug or reach models")
    p.add_argument("--spec", type=Path, metavar="FILE.tla", help="your own spec module (with --config)")
    p.add_argument("--config", type=Path, metavar="FILE.cfg", help="your own cfg (with --spec, or next to it)")
    p.add_argument("--expect", default="pass", metavar="PROPERTY",
                   help="what your own model must give: pass (default) or the property it must violate")
    p.add_argument("--workers", type=int, default=1, help="TLC workers per model (default 1: reproducible depths)")
    p.add_argument("--jobs", type=int, default=None,
                   help="models checked at once (default: CPUs / workers)")
    p.add_argument("--json", type=output_file, metavar="FILE", help="write every verdict (and counterexample) as JSON")
    p.add_argument("--counterexamples", choices=("auto", "all", "none"), default="auto",
                   help="counterexample tables: auto = unexpected outcomes, or every violation when models are named")
    p.add_argument("--no-check-counts", action="store_true",
                   help="do not fail on distinct-state or depth differences (while editing the spec)")
    p.add_argument("--emit-test", type=Path, metavar="PATH",
                   help="write each bug model's counterexample as a pytest file driving the reference cores "
                        "(PATH: a .py file for one model, or a directory)")
    p.add_argument("--update-manifest", action="store_true",
                   help="record the counts of this run in tla/manifest.json (needs --workers 1)")
    p.add_argument("--manifest", type=Path, default=MANIFEST_PATH, help=argparse.SUPPRESS)
    tlc = p.add_argument_group("TLC's own options (2.15)")
    tlc.add_argument("--simulate", type=int, nargs="?", const=0, metavar="N",
                     help="-simulate num=N: N random behaviours (with --traces: on Spark, no N)")
    tlc.add_argument("--depth", type=int, metavar="N", help="-depth N: behaviour length in simulation")
    tlc.add_argument("--seed", type=int, metavar="N", help="-seed N (simulation)")
    tlc.add_argument("--check-deadlock", action="store_true", help="report deadlocks (ackorder passes -deadlock)")
    tlc.add_argument("--coverage", type=int, metavar="MINUTES",
                     help="-coverage MINUTES; then a table of the spec's branches: how often TLC took each, beside "
                          "how often the fuzz campaign in --fuzz-out reached it")
    p.add_argument("--fuzz-out", type=Path, default=Path(".ackorder/fuzz"), metavar="DIR",
                   help="the campaign whose coverage --coverage shows beside TLC's (default .ackorder/fuzz)")
    tlc.add_argument("--continue", dest="continue_", action="store_true", help="-continue after a violation")
    tlc.add_argument("--checkpoint", type=int, metavar="MINUTES", help="-checkpoint MINUTES")
    tlc.add_argument("--recover", type=Path, metavar="DIR", help="-recover DIR (a checkpoint)")
    tlc.add_argument("--heap", metavar="SIZE", help="JVM heap, e.g. 4g")
    tlc.add_argument("--timeout", type=float, metavar="SECONDS", help="stop a model's TLC after this long")
    spark = p.add_argument_group("TLC's simulation on Spark (--simulate --traces N)")
    spark.add_argument("--traces", type=int, metavar="N",
                       help="simulate N behaviours of one model in all, fanned out over Spark executors")
    spark.add_argument("--tasks", type=int, default=8, metavar="N",
                       help="TLC processes (Spark tasks), each with its own seed (default 8)")
    spark.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    spark.add_argument("--out", type=Path, default=Path(".ackorder/tlc-sim"),
                       help="the ledger and summary (`ackorder fuzz-report --out` renders it)")
    spark.add_argument("--max-failures", type=int, metavar="K", help="stop after the batch that reaches K violations")
    p.set_defaults(func=main, passthrough=())


def options_from(args: argparse.Namespace) -> TlcOptions:
    extra = tuple(args.passthrough)      # what followed `--` on the command line (cli/main.py)
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError(f"--timeout must be positive, got {args.timeout}")
    return TlcOptions(workers=args.workers, simulate=args.simulate, depth=args.depth, check_deadlock=args.check_deadlock,
                      coverage_minutes=args.coverage, continue_after_violation=args.continue_, seed=args.seed,
                      checkpoint_minutes=args.checkpoint, recover=args.recover, heap=args.heap, extra=extra,
                      timeout_s=args.timeout)


def choose_models(args: argparse.Namespace) -> list[Model]:
    """Manifest models by name, cfg paths (a manifest cfg is its model), or --spec/--config."""
    if args.spec or args.config:
        if args.models:
            raise ConfigError("give either model names or --spec/--config, not both")
        if args.config is None:
            raise ConfigError("--spec needs --config FILE.cfg (the constants and properties to check)")
        return [adhoc_model(args.config, args.spec, args.expect)]
    manifest = load_manifest(args.manifest)
    chosen: list[Model] = []
    for name in args.models:
        path = Path(name)
        if name.endswith(".tla"):
            raise ConfigError(f"{name}: a spec module, not a model: give its cfg (`ackorder tlc My.cfg`, the .tla "
                              "beside it) or both (`--spec My.tla --config My.cfg`)")
        if name.endswith(".cfg") or path.is_file():
            owner = next((m for m in manifest if path.is_file() and m.cfg_path == path.resolve()), None)
            chosen.append(owner or adhoc_model(path, None, args.expect))
        else:
            chosen.append(resolve(manifest, name))
    return select(chosen or manifest, [], args.size, args.kind)


def main(args: argparse.Namespace) -> int:
    if args.traces is not None:
        return simulate_on_spark(args)
    if args.simulate == 0:
        raise errors.UsageError("--simulate needs N, or --traces N to fan the simulation out over Spark")
    console = make_console()
    options = options_from(args)
    models = choose_models(args)
    if args.list:
        list_models(console, models)
        if args.json:            # the same rows (it was never written with --list)
            args.json.write_text(json.dumps([{"model": m.model, "kind": m.kind, "size": m.size, "expected": m.expected,
                                              "distinct_states": m.distinct_states, "depth": m.depth, "title": m.title}
                                             for m in models], indent=2) + "\n")
        return errors.OK
    if not models:
        raise errors.UsageError("no model matches the selection (`ackorder tlc --list` shows them)")
    if args.emit_test and not any(m.kind == "bug" for m in models):
        # Known before TLC runs: refuse now rather than after minutes of model checking.
        raise errors.UsageError("--emit-test: no bug model gave its counterexample (name bug models, e.g. BugAckOnWrote)")
    if args.emit_test and all(not m.is_write_path for m in models if m.kind == "bug"):
        raise errors.UsageError("--emit-test: the reference cores model the write path, not failover: name a "
                                "write-path bug model, e.g. BugAckOnWrote")
    emitted = [m for m in models if m.kind == "bug" and m.is_write_path]
    if args.emit_test and args.emit_test.suffix == ".py" and len(emitted) > 1:
        raise errors.UsageError(f"--emit-test {args.emit_test}: a .py file holds one model's test; give a directory "
                                f"for {len(emitted)}")
    if args.update_manifest and (args.workers != 1 or not options.exhaustive):
        raise errors.UsageError("--update-manifest needs an exhaustive check with --workers 1")
    jobs = args.jobs or max(1, (os.cpu_count() or 1) // args.workers)
    if jobs < 1:
        raise errors.UsageError(f"--jobs must be at least 1, got {jobs}")
    fuzz = fuzz_coverage(args.fuzz_out) if args.coverage else None      # a bad --fuzz-out: refused before TLC runs
    log_dir = new_log_dir()
    try:
        verdicts = run_with_progress(console, models, options, jobs, log_dir, not args.no_check_counts)
    except TlcUnavailable as err:
        raise errors.EnvironmentFailure(str(err)) from None
    console.print(results_table(verdicts))
    records = []
    for v in verdicts:
        steps, problem = counterexample.steps(v.run) if v.run.trace else ([], None)
        records.append(verdict_json(v, [s.to_json() for s in steps] if steps else None))
        if v.kind == "tlc_error":
            console.print(f"[bold red]{v.model.model}: TLC error[/]: {v.detail}")
            console.print(f"  full TLC output: {v.run.log_path}")
        show = args.counterexamples == "all" or (args.counterexamples == "auto" and (not v.ok or args.models or args.spec))
        if steps and show:
            console.print(counterexample_table(v, steps, problem))
    if args.json:
        args.json.write_text(json.dumps(records, indent=2) + "\n")
    if args.coverage:
        show_coverage(console, verdicts, args.fuzz_out, fuzz)
    if args.emit_test:
        if not emit_tests(console, verdicts, args.emit_test):
            return errors.VIOLATION
    if args.update_manifest:
        manifest = load_manifest(args.manifest)
        save_manifest(update_manifest(verdicts, manifest), args.manifest)
        console.print(f"{args.manifest} updated with the counts of {len(verdicts)} model(s)")
        verdicts = [v if v.kind != "count_mismatch" else Verdict(v.run, "as_expected") for v in verdicts]
    console.print(f"TLC logs: {log_dir}")
    return final_verdict(console, verdicts)


def emit_tests(console: Console, verdicts: list[Verdict], path: Path) -> bool:
    """Write the counterexample tests; False when some counterexample could not be driven."""
    from cli.emit import emit_for_run, counterexample_file
    from reference.sim.drive import DriveError

    with_cex = [v for v in verdicts if v.run.trace and v.model.kind == "bug" and v.ok]
    for v in [v for v in with_cex if not v.model.is_write_path]:
        console.print(f"{v.model.model}: no test emitted: counterexample tests drive the write path's cores "
                      f"({v.model.spec} is checked by its own machines)")
    failover = any(not v.model.is_write_path for v in with_cex)
    with_cex = [v for v in with_cex if v.model.is_write_path]
    if not with_cex and failover:
        raise errors.UsageError("--emit-test: the reference cores model the write path, not failover: name a "
                                "write-path bug model, e.g. BugAckOnWrote")
    if not with_cex:
        raise errors.UsageError("--emit-test: no bug model gave its counterexample (name bug models, e.g. BugAckOnWrote)")
    single = path.suffix == ".py"         # one model at most then (refused before TLC ran otherwise)
    ok = True
    for v in with_cex:
        target = path if single else path / counterexample_file(v.model.model)
        try:
            emitted = emit_for_run(v.run, f"ackorder tlc {v.model.model} --emit-test {target}")
        except DriveError as err:
            console.print(f"[bold red]{v.model.model}: the counterexample could not be driven through the cores:[/] {err}")
            ok = False
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(emitted.text)
        console.print(f"{v.model.model}: {target} ({len(emitted.run.program)} environment steps drive "
                      f"{len(emitted.driven)} spec steps to {emitted.run.violation})")
    return ok


def fuzz_coverage(fuzz_out: Path) -> tuple[list, str] | None:
    """The branch rows of the fuzz campaign in ``fuzz_out`` and what its runs are called, or None
    when there is no campaign; a summary or ledger that is not a campaign's is a usage error."""
    if not (fuzz_out / "summary.json").exists():
        return None
    from spark_fuzz import ledger
    from spark_fuzz.report import spec_coverage

    try:
        campaign = ledger.load_summary(fuzz_out)
        seeds = ledger.read_ledger(fuzz_out, campaign["campaign"]).to_pylist()
    except ledger.LedgerError as err:
        raise errors.UsageError(f"--fuzz-out: {err}") from None
    return spec_coverage(seeds, campaign.get("bug"))[0], f"seeds of {campaign['campaign']}"


def show_coverage(console: Console, verdicts: list[Verdict], fuzz_out: Path, fuzz: tuple[list, str] | None) -> None:
    """TLC's own coverage of every branch of the spec, beside a fuzz campaign's (``fuzz_coverage``)."""
    from cli.coverage import branch_table
    from spec.coverage import branch_table as rows_for
    from tla.coverage import branch_counts

    rows, runs_word = fuzz if fuzz is not None else (rows_for([]), None)
    if fuzz is None:
        console.print(f"[dim]no fuzz campaign in {fuzz_out} to compare with (`ackorder fuzz --out {fuzz_out}`)[/]")
    for v in verdicts:
        if v.run.log_path is None or not v.model.in_manifest_spec:
            continue
        tlc = branch_counts(v.run.log_path.read_text())
        if not tlc:
            console.print(f"[dim]{v.model.model}: TLC printed no coverage (it stopped before its first report)[/]")
            continue
        console.print(branch_table(rows, runs_word, tlc, title=f"Spec branches: TLC on {v.model.model} (times "
                                                              f"taken while generating states) and real runs"))


def final_verdict(console: Console, verdicts: list[Verdict]) -> int:
    bad = [v for v in verdicts if not v.ok]
    if not bad:
        console.print(f"[green]all {len(verdicts)} model(s) gave their expected outcome and counts[/]")
        return errors.OK
    if all(v.run.bad_input for v in bad):
        # TLC refused what the user gave it (an option, their own spec): bad input, known only once TLC ran
        first = bad[0]
        more = f" (and {len(bad) - 1} more model(s))" if len(bad) > 1 else ""
        raise errors.UsageError(f"{first.model.model}: {first.run.bad_input}{more}")
    by_kind: dict[str, list[str]] = {}
    for v in bad:
        by_kind.setdefault(v.kind, []).append(v.model.model)
    for kind, names in by_kind.items():
        console.print(f"[bold red]{kind.replace('_', ' ')}:[/] {', '.join(names)}")
    console.print(f"[bold red]{len(bad)} of {len(verdicts)} model(s) not as expected[/]")
    return errors.VIOLATION


def run_with_progress(console: Console, models: list[Model], options: TlcOptions, jobs: int, log_dir: Path,
                      check_counts: bool) -> list[Verdict]:
    """Check the models with a progress bar weighted by the manifest's state counts."""
    weight = {m.model: max(m.distinct_states or 0, 1) for m in models}
    total = sum(weight.values())
    columns = (TextColumn("{task.description}"), bar_column(), TaskProgressColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[running]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("TLC", total=len(models), running="")
        states = bar.add_task("states (manifest)", total=total, running="", visible=total > len(models))
        running: dict[str, int] = {}

        def show_running() -> None:
            text = ", ".join(f"{name} {n:,}" for name, n in sorted(running.items())[:3])
            bar.update(task, running=text)

        def started(m: Model) -> None:
            running[m.model] = 0
            show_running()

        def progress(m: Model, distinct: int, queue: int) -> None:
            running[m.model] = distinct
            show_running()

        def finished(v: Verdict) -> None:
            running.pop(v.model.model, None)
            bar.update(task, advance=1)
            bar.update(states, advance=weight[v.model.model])
            show_running()
            mark = "ok" if v.ok else f"[bold red]{v.kind}[/]"
            console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {v.model.model}: {v.run.outcome} ({mark}), {v.run.distinct_states or 0:,} states, "
                        f"{v.run.seconds:.1f} s")

        return check_models(models, options, jobs, log_dir, check_counts, Events(started, progress, finished))


def list_models(console: Console, models: list[Model]) -> None:
    table = Table(title="Models (tla/manifest.json)", title_justify="left")
    for col in ("model", "kind", "size", "expected", "distinct states", "depth", "what it checks"):
        table.add_column(col)
    for m in models:
        table.add_row(m.model, m.kind, m.size, m.expected,
                      "-" if m.distinct_states is None else f"{m.distinct_states:,}",
                      "-" if m.depth is None else str(m.depth), m.title)
    console.print(table)


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def results_table(verdicts: list[Verdict], title: str = "TLC model checks") -> Table:
    table = Table(title=title, title_justify="left")
    for col, justify in [("model", "left"), ("expected", "left"), ("outcome", "left"), ("verdict", "left"),
                         ("distinct states", "right"), ("manifest", "right"), ("depth", "right"),
                         ("seconds", "right"), ("states/s", "right")]:
        table.add_column(col, justify=justify, overflow="fold")     # a name is never cut short
    for v in verdicts:
        run, m = v.run, v.model
        style = "green" if v.ok else "bold red"
        rate = run.states_per_second
        table.add_row(
            m.model, m.expected, Text(run.outcome, style=style), Text(v.kind.replace("_", " "), style=style),
            _num(run.distinct_states), _num(m.distinct_states),
            f"{_num(run.depth)}" + (f" ({m.depth})" if m.depth is not None and m.depth != run.depth else ""),
            f"{run.seconds:.1f}", "-" if rate is None else f"{rate:,.0f}",
        )
    return table


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def counterexample_table(v: Verdict, steps: list[counterexample.Step], problem: str | None) -> Table:
    """One row per step: the action (with parameters, from the twin) and what changed."""
    table = Table(title=f"Counterexample: {v.model.model} violates {v.run.outcome}", title_justify="left",
                  show_lines=True, caption=f"twin: {problem}" if problem else None)
    table.add_column("step", justify="right")
    table.add_column("action")
    table.add_column("variables that changed")
    for s in steps:
        table.add_row(str(s.number or ""), s.label, Text("\n".join(_shorten(line) for line in s.changed)))
    return table


def simulate_on_spark(args: argparse.Namespace) -> int:
    """`--simulate --traces N`: one model's random simulation over Spark executors."""
    from cli.fuzz import preflight, task_os_error
    from spark_fuzz.campaign import spark_session
    from spark_fuzz.tlcsim import SimCampaign, run_sim_campaign

    console = make_console()
    if args.simulate is None:
        raise errors.UsageError("--traces N is for the simulation: give --simulate too")
    if args.simulate:
        raise errors.UsageError("--simulate N and --traces N: give the number of behaviours once, with --traces")
    if args.spec or args.config or len(args.models) != 1:
        raise errors.UsageError("--simulate --traces simulates one model of the manifest: name exactly one")
    for name, value in (("--traces", args.traces), ("--tasks", args.tasks), ("--depth", args.depth or 1),
                        ("--max-failures", args.max_failures or 1)):
        if value < 1:
            raise errors.UsageError(f"{name} must be a positive integer, got {value}")
    model = resolve(load_manifest(args.manifest), args.models[0])
    preflight(args.master, args.out)
    spec = SimCampaign(model=model.model, traces=args.traces, tasks=min(args.tasks, args.traces),
                       depth=args.depth or 100, out=args.out, max_failures=args.max_failures,
                       timeout_s=args.timeout)
    try:
        spark = spark_session(args.master, {"spark.ui.enabled": "false"})
    except Exception as err:         # noqa: BLE001  (Py4J and JVM start-up errors have many types)
        raise errors.EnvironmentFailure(f"Spark did not start on {args.master}: {str(err).strip()[:200]}")
    try:
        with console.status(f"{model.model}: {args.traces:,} behaviours in {spec.tasks} TLC tasks on {args.master}"):
            summary = run_sim_campaign(spark, spec)
    except Exception as err:                 # noqa: BLE001  (a task's failure reaches the driver as Spark's)
        if (failed := task_os_error(err)) is None:
            raise
        raise errors.EnvironmentFailure(f"a Spark task failed: {failed}") from None
    finally:
        spark.stop()
    table = Table(title=f"TLC simulation of {model.model} on Spark ({args.master})", title_justify="left",
                  show_header=False)
    for key in ("campaign", "tasks", "traces", "depth", "steps", "seconds", "traces_per_second",
                "states_per_second", "first_violation_s", "fastest_task_to_violation_s"):
        value = summary[key]
        table.add_row(key, "-" if value is None else f"{value:,}" if isinstance(value, (int, float)) else str(value))
    table.add_row("outcomes", ", ".join(f"{k} {v:,}" for k, v in summary["outcomes"].items()))
    console.print(table)
    from tla.manifest import expected_violations

    # a bug may first show as another property its model allows (tla/manifest.py)
    expected = frozenset() if model.expected == "pass" else expected_violations(model.model)
    for rep in summary["reproducers"][:3]:
        style = FOUND_AS_EXPECTED if rep["outcome"] in expected else FAILED
        console.print(f"[{style}]{rep['outcome']}[/] (task {rep['index']}): {rep['message'][:200]}")
        print_line(rep["reproducer"])
    console.print(f"ledger: {args.out} (`ackorder fuzz-report --out {args.out}`)")
    found = {o for o in summary["outcomes"] if o != "ok"}
    if model.expected == "pass":
        code = errors.OK if not found else errors.VIOLATION
    else:
        code = errors.OK if found and found <= expected else errors.VIOLATION
    why = (f"{model.model}: expected {model.expected}, simulation found "
           f"{', '.join(sorted(found)) if found else 'no violation'}")
    console.print(("[green]" if code == errors.OK else "[bold red]") + why + "[/]")
    return code
