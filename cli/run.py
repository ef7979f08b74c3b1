"""`ackorder run`: the main job of `make run`.

Quick (the default, a few minutes on an idle 2-core machine): TLC on every small
safety, bug and reachability model; the Python twin against the TLC run it just
made; a 1,000-seed fuzz campaign; the z3 proofs.  `--full` adds the liveness and
large models, runs a 20,000-seed campaign, runs the slow tests: the test
suite's genuinely long checks that `make test` leaves out (`pytest -m full`), and a
mutation campaign of the cores (`ackorder mutate`, a sample of 200 mutants).

A plan comes first (steps, models, expected states from the manifest, an
estimate); progress is "k of N" with a percentage weighted by the estimate, on
the terminal and in the run's log; each step's result is written as it finishes
(`.ackorder/run/<id>/`), so `--resume` skips what finished and a Ctrl-C keeps
it; one verdict table ends the run, and the exit code is its verdict.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import attrs
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cli.argtypes import output_file
from cli import errors
from cli.ui import console as make_console, print_line
from tla.manifest import Model, load_manifest, resolve

RUN_ROOT = Path(".ackorder") / "run"
STEPS = ("tlc", "twin", "prove", "fuzz", "slow-tests", "mutate")   # the twin and the proofs run side by side
FULL_ONLY = frozenset({"slow-tests", "mutate"})
SOURCE_ROOT = Path(__file__).resolve().parent.parent     # where pyproject.toml and the tests are
QUICK_SEEDS, FULL_SEEDS = 1_000, 20_000
# Rates measured on this project's 2-core machine (2026-11-25), for estimates only.
TLC_JVM_S = 1.2                 # a TLC process's start-up and parsing
TLC_STATES_PER_S = 4_000        # one worker, when the manifest has no recorded time
TWIN_STATES_PER_S = 15_000
FUZZ_SEEDS_PER_S = 60           # local[*] on 2 cores, default steps
SPARK_START_S = 15
PROVE_S = 30                    # both abstractions, every CTI (`ackorder prove`: 21 s, idle machine, 2026-11-26)
# `pytest -m full`, both cores (8 tests: 278 s, 2026-11-25; then 3 TLC models, ~53 s; since 2026-11-27 CrossHair's
# 30 s per condition on the contracts' ~15 conditions, ~225 s; since 2026-11-28 the parser fuzzers' large budgets,
# ~700 CPU-s measured one test at a time, ~360 s on both cores; since 2026-11-28 the 76 tests of conftest.py's
# SLOW_TESTS, 1,645 s of test time measured in `make test`, ~700 s on both cores)
SLOW_TESTS_S = 1_600
# --full's mutation campaign: a fixed sample of the cores' 4,004 mutants (all of them take about 7 hours on
# this machine); 100 took 14 min on local[2] (2026-11-29: a baseline of the 15 modules, then ~14 s a mutant)
MUTATE_SAMPLE, MUTATE_SAMPLE_SEED = 200, 0
MUTATE_S = 1_800


@attrs.frozen
class Plan:
    full: bool
    models: tuple[str, ...]
    fuzz_seeds: int
    jobs: int
    skip: tuple[str, ...]
    check_counts: bool

    def to_json(self) -> dict:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        return cls(**{**data, "models": tuple(data["models"]), "skip": tuple(data["skip"])})

    @classmethod
    def load(cls, where: Path) -> Plan:
        """The plan.json of the run in ``where`` (`--resume DIR`), or a usage error naming it: a file
        that is not one a run wrote was a TypeError or KeyError traceback."""
        path = where / "plan.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError) as err:
            raise errors.UsageError(f"--resume: {path}: not a run's plan ({errors.one_line(err)[:200]})") from None
        types = {"full": bool, "models": list, "fuzz_seeds": int, "jobs": int, "skip": list, "check_counts": bool}
        if (not isinstance(data, dict) or set(data) != set(types)
                or any(not isinstance(data[k], t) for k, t in types.items())
                or isinstance(data["fuzz_seeds"], bool) or isinstance(data["jobs"], bool)
                or data["fuzz_seeds"] < 1 or data["jobs"] < 1
                or not all(isinstance(m, str) for m in data["models"]) or not set(data["skip"]) <= set(STEPS)):
            raise errors.UsageError(f"--resume: {path}: not the plan an `ackorder run` writes")
        return cls.from_json(data)


def runs(step: str, plan: Plan) -> bool:
    return step not in plan.skip and (plan.full or step not in FULL_ONLY)


def tlc_estimate(m: Model) -> float:
    """Seconds of one TLC worker (a large model gets every core, and is estimated per core)."""
    return TLC_JVM_S + (m.seconds if m.seconds is not None else (m.distinct_states or 0) / TLC_STATES_PER_S)


def step_estimates(plan: Plan, models: list[Model]) -> dict[str, float]:
    twin = [m for m in models if m.size == "small"]
    return {
        "tlc": sum(tlc_estimate(m) for m in models) / max(1, plan.jobs),
        "twin": sum((m.distinct_states or 0) for m in twin) / TWIN_STATES_PER_S + len(twin) * 0.05,
        "fuzz": SPARK_START_S + plan.fuzz_seeds / FUZZ_SEEDS_PER_S,
        "prove": PROVE_S,
        "slow-tests": SLOW_TESTS_S if plan.full else 0.0,
        "mutate": MUTATE_S if plan.full else 0.0,
    }


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="the main job: TLC, the twin against it, a fuzz campaign, the proofs",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("--full", action="store_true",
                   help=f"every model (liveness and large too), a {FULL_SEEDS:,}-seed campaign, and the slow tests")
    p.add_argument("--resume", nargs="?", const="latest", metavar="DIR",
                   help="continue the last run (or the one in DIR), skipping what finished")
    p.add_argument("--models", metavar="A,B", help="only these TLC models (either spelling of a bug)")
    p.add_argument("--fuzz-seeds", type=int, help=f"seeds of the campaign (default {QUICK_SEEDS:,}; --full {FULL_SEEDS:,})")
    p.add_argument("--jobs", type=int, default=None, help="TLC models at once (default: CPUs)")
    p.add_argument("--skip", action="append", default=[], choices=STEPS, help="leave a step out (repeatable)")
    p.add_argument("--no-check-counts", action="store_true", help="TLC counts that differ from the manifest are not a failure")
    p.add_argument("--json", type=output_file, metavar="FILE", help="write the verdict as JSON")
    p.set_defaults(func=main)


def choose_models(plan: Plan) -> list[Model]:
    from tla.manifest import checks_liveness

    manifest = load_manifest()
    if plan.models:
        return [resolve(manifest, name) for name in plan.models]
    if plan.full:
        return manifest
    return [m for m in manifest if m.size == "small" and not checks_liveness(m)]


class RunLog:
    """Lines for the terminal and for the run's log file; the results of each step as JSON."""

    def __init__(self, directory: Path, console: Console) -> None:
        self.dir = directory
        self.console = console
        self.file = open(directory / "run.log", "a")

    def say(self, text: str, style: str = "") -> None:
        stamp = datetime.datetime.now().strftime("%H:%M:%S")
        self.file.write(f"{stamp} {Text.from_markup(text).plain}\n")
        self.file.flush()
        self.console.print(f"[dim]{stamp}[/] " + (f"[{style}]{text}[/]" if style else text))

    def write(self, name: str, data) -> None:
        tmp = self.dir / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        os.replace(tmp, self.dir / name)      # a result file is whole or absent

    def read(self, name: str):
        path = self.dir / name
        return json.loads(path.read_text()) if path.exists() else None

    def append(self, name: str, record: dict) -> None:
        with open(self.dir / name, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")

    def records(self, name: str) -> list[dict]:
        path = self.dir / name
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break              # a line cut by a Ctrl-C: that model runs again
        return out


@attrs.define
class Progress:
    """Overall progress, weighted by the plan's estimates."""
    estimates: dict[str, float]
    started: float = attrs.Factory(time.perf_counter)
    done_s: float = 0.0

    def advance(self, seconds: float) -> None:
        self.done_s += seconds

    def line(self) -> str:
        total = sum(self.estimates.values()) or 1.0
        share = min(1.0, self.done_s / total)
        elapsed = time.perf_counter() - self.started
        # How much slower (or faster) than the estimate this machine runs, once there is evidence.
        pace = min(3.0, max(0.5, elapsed / self.done_s)) if self.done_s > 0.1 * total else 1.0
        left = max(0.0, total - self.done_s) * pace
        return f"{100 * share:3.0f}%, about {_duration(left)} left"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def new_run_dir() -> Path:
    """A directory of its own, even for two runs started in the same second (mkdir is the claim),
    and `latest` pointing at it (replaced in one rename: another run never sees it missing)."""
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1001):
        path = RUN_ROOT / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            path.mkdir()
            break
        except FileExistsError:
            continue
    else:
        raise errors.EnvironmentFailure(f"no free run directory for {stamp} in {RUN_ROOT}")
    tmp = RUN_ROOT / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(path.name)
    os.replace(tmp, RUN_ROOT / "latest")
    return path


def print_plan(console: Console, plan: Plan, models: list[Model], estimates: dict[str, float], where: Path) -> None:
    table = Table(title=f"ackorder run{' --full' if plan.full else ''}: the plan", title_justify="left")
    for col in ("step", "what", "size", "estimate"):
        table.add_column(col, justify="right" if col in ("size", "estimate") else "left")
    states = sum(m.distinct_states or 0 for m in models)
    twin = [m for m in models if m.size == "small"]
    n_large = len(models) - len(twin)
    rows = {
        "tlc": (f"TLC 2.15 on {len(models)} models ({plan.jobs} at once, 1 worker each"
                + (f"; the {n_large} large ones one at a time, {plan.jobs} workers" if n_large else "") + ")"
                + (", counts checked" if plan.check_counts else ""), f"{states:,} states"),
        "twin": ("the Python twin on the same small models, against this TLC run",
                 f"{sum(m.distinct_states or 0 for m in twin):,} states"),
        "fuzz": ("a fuzz campaign of the simulator on Spark local[*]", f"{plan.fuzz_seeds:,} seeds"),
        "prove": ("z3: invariants inductive, a reachable CTI per bug", "all configurations"),
        "slow-tests": ("the tests `make test` leaves out as too long (pytest -m full)", "marked full"),
        "mutate": ("a mutation campaign of the cores on Spark local[*] (ackorder mutate)",
                   f"{MUTATE_SAMPLE} mutants"),
    }
    for step in STEPS:
        what, size = rows[step]
        skipped = not runs(step, plan)
        why = "--full only" if step in FULL_ONLY and not plan.full and step not in plan.skip else "skipped"
        table.add_row(step, what + (f" [dim]({why})[/]" if skipped else ""), size,
                      "-" if skipped else _duration(estimates[step]))
    left_out = "" if plan.full or plan.models else " Liveness and large models: `ackorder run --full`."
    table.caption = f"estimate {_duration(sum(v for k, v in estimates.items() if k not in plan.skip))} in all; " \
                    f"results in {where}.{left_out}"
    console.print(table)


# ------------------------------------------------------------------ the steps

def step_tlc(log: RunLog, plan: Plan, models: list[Model], progress: Progress) -> dict:
    from tla.check import Events, check_models, new_log_dir, verdict_json
    from tla.tlc import TlcOptions, TlcUnavailable

    done = {r["model"]: r for r in log.records("tlc.jsonl")}
    todo = [m for m in models if m.model not in done]
    if done:
        log.say(f"tlc: {len(done)} model(s) already checked in this run, {len(todo)} to go")
        for m in models:
            if m.model in done:
                progress.advance(tlc_estimate(m) / max(1, plan.jobs))
    total, finished_count = len(models), [len(done)]

    def finished(v) -> None:
        log.append("tlc.jsonl", verdict_json(v))
        progress.advance(tlc_estimate(v.model) / max(1, plan.jobs))
        finished_count[0] += 1
        k = finished_count[0]
        mark = "ok" if v.ok else f"[bold red]{v.kind.replace('_', ' ')}[/]"
        log.say(f"tlc {k}/{total} ({progress.line()}): {v.model.model} {v.run.outcome} ({mark}), "
                f"{v.run.distinct_states or 0:,} states, {v.run.seconds:.1f} s")

    # Small models one worker each, several at once (reproducible depths); large ones one at a time
    # with every core (their depths are then not compared: TLC's parallel search is not level by level).
    small, large = [m for m in todo if m.size == "small"], [m for m in todo if m.size != "small"]
    log_dir = new_log_dir()
    try:
        check_models(small, TlcOptions(workers=1), plan.jobs, log_dir, plan.check_counts, Events(finished=finished))
        check_models(large, TlcOptions(workers=plan.jobs), 1, log_dir, plan.check_counts, Events(finished=finished))
    except TlcUnavailable as err:
        raise errors.EnvironmentFailure(str(err)) from None
    records = log.records("tlc.jsonl")
    bad = [r for r in records if r["verdict"] != "as_expected"]
    return {"ok": not bad, "models": len(records), "states": sum(r["distinct_states"] or 0 for r in records),
            "not_as_expected": [{k: r[k] for k in ("model", "verdict", "detail", "log")} for r in bad]}


def step_twin(log: RunLog, plan: Plan, models: list[Model], progress: Progress) -> dict:
    from tla.twincheck import TlcCounts, twin_check

    tlc = {r["model"]: r for r in log.records("tlc.jsonl")}
    small = [m for m in models if m.size == "small" and m.in_manifest_spec]
    problems, compared, against_manifest = [], 0, 0
    for k, m in enumerate(small, 1):
        r = tlc.get(m.model)
        counts = TlcCounts(r["outcome"], r["distinct_states"], r["depth"]) if r and r["workers"] == 1 else None
        against_manifest += counts is None
        c = twin_check(m, counts)
        compared += 1
        progress.advance((m.distinct_states or 0) / TWIN_STATES_PER_S + 0.05)
        if not c.agrees:
            problems.append({"model": m.model, "problems": list(c.problems)})
        if k % 10 == 0 or not c.agrees or k == len(small):
            mark = "agrees" if c.agrees else "[bold red]differs: " + "; ".join(c.problems) + "[/]"
            log.say(f"twin {k}/{len(small)} ({progress.line()}): {m.model} {mark}")
    return {"ok": not problems, "models": compared, "against_manifest": against_manifest, "differ": problems}


def _local_spark(out: Path):
    """A local[*] session for a step writing under ``out``; a Spark that does not start is the machine's."""
    from cli.fuzz import preflight
    from spark_fuzz.campaign import spark_session

    preflight("local[*]", out)
    try:
        return spark_session("local[*]")
    except Exception as err:           # noqa: BLE001  (Py4J/JVM start-up errors have many types)
        raise errors.EnvironmentFailure(f"Spark did not start: {str(err).strip()[:200]}") from None


def step_fuzz(log: RunLog, plan: Plan, progress: Progress) -> dict:
    from cli.fuzz import verdict
    from spark_fuzz.campaign import CampaignSpec, DeterminismError, run_campaign

    out = log.dir / "fuzz"
    spark = _local_spark(out)
    try:
        summary = run_campaign(spark, CampaignSpec(seeds=plan.fuzz_seeds, out=out, resume=True))
    except DeterminismError as err:
        return {"ok": False, "detail": f"determinism audit failed: {err}"}
    finally:
        spark.stop()
    progress.advance(progress.estimates["fuzz"])
    code, why = verdict(summary, None)
    for rep in summary["reproducers"]:
        log.say(f"fuzz: [bold red]{rep['signature']}[/] ×{rep['count']}; reproduce with:")
        print_line(rep["reproducer"])
    log.say(f"fuzz ({progress.line()}): {why} ({summary['seeds_per_second']:.0f} seeds/s)")
    return {"ok": code == errors.OK, "detail": why, "seeds": summary["seeds"], "outcomes": summary["outcomes"],
            "reproducers": [r["reproducer"] for r in summary["reproducers"]], "summary": str(out / "summary.json")}


def step_mutate(log: RunLog, plan: Plan, progress: Progress) -> dict:
    """A sample of the cores' mutants judged by the kill suite (spark_fuzz/mutation/).  As expected when
    the campaign ran over a clean suite that passes: its scores and survivors are figures for
    docs/benchmarks.md, not a verdict on the run (issue 36 sets the goal they are measured against)."""
    from spark_fuzz.mutation.campaign import MutationSpec, run_mutation_campaign
    from spark_fuzz.mutation.killsuite import CleanSuiteFailed
    from spark_fuzz.mutation.mutants import CORE_MODULES
    from spark_fuzz.mutation.report import write_report

    out = log.dir / "mutate"
    spark = _local_spark(out)
    try:
        summary = run_mutation_campaign(spark, MutationSpec(modules=CORE_MODULES, out=out, sample=MUTATE_SAMPLE,
                                                            sample_seed=MUTATE_SAMPLE_SEED))
    except CleanSuiteFailed as err:
        return {"ok": False, "detail": str(err)}
    finally:
        spark.stop()
    progress.advance(progress.estimates["mutate"])
    paths = write_report(out, summary)
    counts = summary["outcomes"]
    judged = summary["mutants"] - counts.get("equivalent", 0) - counts.get("error", 0)
    killed = counts.get("killed", 0) + counts.get("timeout", 0)
    why = (f"{summary['mutants']} mutants: {killed} killed ({', '.join(f'{k} {v}' for k, v in sorted(summary['killed_by'].items()))}), "
           f"{counts.get('survived', 0)} survived, {counts.get('equivalent', 0)} equivalent; score "
           f"{100 * killed / judged if judged else 0:.1f}%; report {paths[0]}")
    log.say(f"mutate ({progress.line()}): {why}")
    return {"ok": True, "detail": why, "outcomes": counts, "scores": summary["scores"], "summary": str(out / "summary.json")}


def prove_in_process():
    """The proofs, run in a process of their own (so that they share nothing with the twin)."""
    from cli.prove import prove_manifest

    return prove_manifest()


def step_prove(log: RunLog, plan: Plan, progress: Progress, future=None) -> dict:
    from cli.prove import report_json

    report = future.result() if future is not None else prove_in_process()
    progress.advance(progress.estimates["prove"])
    failed = [g.configuration for g in report.green if not g.ok] + \
             [r.config for r in report.bugs if r.result != "CTI"]
    log.write("prove-details.json", report_json(report))
    log.say(f"prove ({progress.line()}): {len(report.green)} green configurations, {len(report.bugs)} bugs, "
            + ("all as expected" if report.ok else f"[bold red]failed: {', '.join(failed)}[/]"))
    return {"ok": report.ok, "green": len(report.green), "bugs": len(report.bugs), "failed": failed,
            "seconds": report.seconds}


def junit_counts(report: Path) -> tuple[int, int, list[str]]:
    """Tests run, skipped, and the ids of those that failed or erred, from pytest's JUnit XML."""
    root = ET.parse(report).getroot()
    tests = skipped = 0
    failed = []
    for case in root.iter("testcase"):
        tests += 1
        if case.find("skipped") is not None:
            skipped += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname')}::{case.get('name')}")
    return tests, skipped, failed


def step_slow_tests(log: RunLog, plan: Plan, progress: Progress) -> dict:
    """The tests marked `full` (too long for `make test`), run by pytest in the source tree. None
    may be skipped, and there must be some: a step that checked nothing is not as expected."""
    if not (SOURCE_ROOT / "pyproject.toml").is_file():
        raise errors.EnvironmentFailure(f"the slow tests run in the source tree: no pyproject.toml in {SOURCE_ROOT}")
    report, out_path = log.dir / "slow-tests.xml", log.dir / "slow-tests.log"
    report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-m", "full", "-p", "no:cacheprovider", "-rfEs", f"--junitxml={report}"]
    if plan.jobs > 1 and importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", str(plan.jobs), "--dist", "loadgroup"]
    log.say(f"slow-tests: {' '.join(cmd[2:])} (output in {out_path})")
    with open(out_path, "w") as out:
        code = subprocess.run(cmd, cwd=SOURCE_ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    progress.advance(progress.estimates["slow-tests"])
    if code == 5:                       # pytest: no test collected
        return {"ok": False, "tests": 0, "failed": [], "exit_code": code, "log": str(out_path),
                "detail": "no test is marked full"}
    if code not in (0, 1) or not report.is_file():
        raise errors.EnvironmentFailure(f"pytest -m full ended with exit code {code}; see {out_path}")
    tests, skipped, failed = junit_counts(report)
    ok = code == 0 and tests > 0 and not failed and not skipped
    log.say(f"slow-tests ({progress.line()}): {tests} tests, "
            + ("all passed" if ok else f"[bold red]{len(failed)} failed, {skipped} skipped[/]"))
    return {"ok": ok, "tests": tests, "skipped": skipped, "failed": failed, "exit_code": code, "log": str(out_path)}


# ------------------------------------------------------------------ the run

def detail(step: str, result: dict) -> str:
    if step == "tlc":
        text = f"{result['models']} models, {result['states']:,} states"
        if result["not_as_expected"]:
            text += "; not as expected: " + ", ".join(f"{r['model']} ({r['verdict']})" for r in result["not_as_expected"])
        return text
    if step == "twin":
        text = f"{result['models']} models" + (f" ({result['against_manifest']} against the manifest)"
                                               if result["against_manifest"] else "")
        return text + ("; differ: " + ", ".join(d["model"] for d in result["differ"]) if result["differ"] else "")
    if step in ("fuzz", "mutate"):
        return result.get("detail", "")
    if step == "prove":
        return f"{result['green']} green configurations proved, {result['bugs']} bug CTIs (beside the twin)" + \
            (f"; failed: {', '.join(result['failed'])}" if result["failed"] else "")
    if step == "slow-tests":
        if "detail" in result:
            return result["detail"]
        text = f"{result['tests']} tests marked full" + (f", {result['skipped']} skipped" if result["skipped"] else "")
        return text + (f"; failed: {', '.join(result['failed'])}" if result["failed"] else "")
    return ""


def verdict_table(results: dict[str, dict | None], plan: Plan, interrupted_at: str | None) -> Table:
    table = Table(title="ackorder run: verdict", title_justify="left")
    for col in ("step", "result", "detail", "seconds"):
        table.add_column(col, justify="right" if col == "seconds" else "left")
    for step in STEPS:
        r = results.get(step)
        if step in plan.skip:
            table.add_row(step, "skipped", "--skip", "")
        elif not runs(step, plan):
            table.add_row(step, "skipped", "--full only", "")
        elif r is None:
            table.add_row(step, Text("interrupted" if step == interrupted_at else "not run", style="yellow"), "", "")
        elif r.get("environment"):
            table.add_row(step, Text("environment failed", style="bold red"), r["environment"], "")
        else:
            seconds = r.get("seconds", 0) if step == "prove" else r.get("step_seconds", 0)   # beside the twin
            table.add_row(step, Text("as expected" if r["ok"] else "NOT as expected",
                                     style="green" if r["ok"] else "bold red"),
                          detail(step, r), f"{seconds:.0f}")
    return table


def main(args: argparse.Namespace) -> int:
    console = make_console()
    if args.resume:
        where = (RUN_ROOT / "latest").resolve() if args.resume == "latest" else Path(args.resume)
        if not (where / "plan.json").is_file():
            raise errors.UsageError(f"--resume: no run to resume in {where} (no plan.json)")
        plan = Plan.load(where)
        for step in STEPS:                      # what a step that finished wrote, checked before anything runs
            result = where / f"{step}.json"
            try:
                done = json.loads(result.read_text()) if result.exists() else {"ok": True}
            except (OSError, ValueError, RecursionError):
                done = None
            if not (isinstance(done, dict) and isinstance(done.get("ok"), bool)):
                raise errors.UsageError(f"--resume: {result}: not a step's result an `ackorder run` writes")
        log = RunLog(where, console)
        log.say(f"resuming the run in {where}")
    else:
        if args.fuzz_seeds is not None and args.fuzz_seeds < 1:
            raise errors.UsageError(f"--fuzz-seeds must be positive, got {args.fuzz_seeds}")
        if args.jobs is not None and args.jobs < 1:
            raise errors.UsageError(f"--jobs must be at least 1, got {args.jobs}")
        names = tuple(n.strip() for n in (args.models or "").split(",") if n.strip())
        plan = Plan(full=args.full, models=names,
                    fuzz_seeds=args.fuzz_seeds or (FULL_SEEDS if args.full else QUICK_SEEDS),
                    jobs=args.jobs or os.cpu_count() or 1, skip=tuple(sorted(set(args.skip))),
                    check_counts=not args.no_check_counts)
        models = choose_models(plan)          # unknown names are an error before anything starts
        log = RunLog(new_run_dir(), console)
        log.write("plan.json", plan.to_json())
    models = choose_models(plan)
    estimates = step_estimates(plan, models)
    print_plan(console, plan, models, estimates, log.dir)
    print_line(f"run directory: {log.dir}")
    progress = Progress({k: v for k, v in estimates.items() if k not in plan.skip})
    results: dict[str, dict | None] = {s: log.read(f"{s}.json") for s in STEPS}
    current = None
    code = errors.OK
    pool, proofs = None, None
    try:
        for step in STEPS:
            if step == "twin" and "prove" not in plan.skip and results["prove"] is None:
                from concurrent.futures import ProcessPoolExecutor

                pool = ProcessPoolExecutor(max_workers=1)
                proofs = pool.submit(prove_in_process)   # beside the twin, on the other core
                log.say("prove: started beside the twin")
            if not runs(step, plan):
                continue
            if results[step] is not None:
                log.say(f"{step}: done in an earlier try ({'as expected' if results[step]['ok'] else 'NOT as expected'})")
                progress.advance(estimates[step])
                continue
            current = step
            start = time.perf_counter()
            log.say(f"{step}: starting ({progress.line()})", "bold")
            try:
                if step == "tlc":
                    result = step_tlc(log, plan, models, progress)
                elif step == "twin":
                    result = step_twin(log, plan, models, progress)
                elif step == "fuzz":
                    result = step_fuzz(log, plan, progress)
                elif step == "slow-tests":
                    result = step_slow_tests(log, plan, progress)
                elif step == "mutate":
                    result = step_mutate(log, plan, progress)
                else:
                    result = step_prove(log, plan, progress, proofs)
            except errors.EnvironmentFailure as err:
                result = {"ok": False, "environment": str(err)}
                code = errors.ENVIRONMENT
            result["step_seconds"] = round(time.perf_counter() - start, 1)
            log.write(f"{step}.json", result)
            results[step] = result
            current = None
    except KeyboardInterrupt:
        from tla.tlc import kill_all

        kill_all()
        if pool is not None:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.kill()           # a z3 search does not stop on a cancelled future
            pool.shutdown(wait=False, cancel_futures=True)
        console.print(verdict_table(results, plan, current))
        log.say(f"interrupted during {current}; finished steps are kept: `ackorder run --resume` continues",
                "bold yellow")
        return errors.INTERRUPTED
    if pool is not None:
        pool.shutdown()
    console.print(verdict_table(results, plan, None))
    ran = [r for s, r in results.items() if runs(s, plan) and r is not None]
    ok = all(r["ok"] for r in ran)
    if code == errors.OK and not ok:
        code = errors.VIOLATION
    elapsed = time.perf_counter() - progress.started
    verdict = {errors.OK: "[green]verdict: everything as expected[/]",
               errors.VIOLATION: "[bold red]verdict: NOT as expected (see the table)[/]",
               errors.ENVIRONMENT: "[bold red]verdict: the environment failed (see the table)[/]"}[code]
    log.say(f"{verdict} in {_duration(elapsed)}; results in {log.dir}")
    final = {"ok": code == errors.OK, "exit_code": code, "seconds": round(elapsed, 1), "plan": plan.to_json(),
             "steps": {s: results.get(s) for s in STEPS}}
    log.write("verdict.json", final)
    if args.json:
        args.json.write_text(json.dumps(final, indent=2, default=str) + "\n")
    return code
