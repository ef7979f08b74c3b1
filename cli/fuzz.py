"""`ackorder fuzz` and `ackorder fuzz-report`.

Exit codes: a clean campaign exits 1 on any violation (an internal error of the
simulator included); a `--bug` campaign exits 0 only if the bug was found as the
property its model names — that is its expectation.  A Spark master that cannot
be reached is an environment failure (3), found before Spark starts."""

from __future__ import annotations

import argparse
import builtins
import json
import re
import socket
import sys
import typing
from pathlib import Path

from rich.table import Table

from cli import errors
from cli.sim import natural_int, positive_int
from cli.ui import FAILED, FOUND_AS_EXPECTED, bar_column, console as make_console, print_line
from spec.config import ConfigError, resolve_bug

REACH_TIMEOUT_S = 3.0
# re.ASCII: \d is 0-9 only (else 'local[١]' or '١g' passed, and Spark or the JVM refused them: exit 3)
LOCAL_MASTER = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?", re.ASCII)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fuzz", help="a campaign of seeded simulations on Spark",
                       description="Run the deterministic simulator over many seeds on Spark, one Parquet "
                                   "ledger row per seed; deduplicate, shrink and audit the failures. "
                                   "Exit 1 on any violation (with --bug: unless the bug was found).")
    p.add_argument("--seeds", type=positive_int, required=True, help="number of seeds (row indices)")
    p.add_argument("--first-seed", type=natural_int, default=0, help="first row index (default 0)")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    p.add_argument("--out", type=Path, default=Path(".ackorder/fuzz"), help="ledger and summary directory")
    p.add_argument("--config-matrix", type=Path, metavar="FILE",
                   help="JSON list of objects pinning `ackorder sim --config` knobs; row i uses entry i mod n")
    p.add_argument("--bug", metavar="NAME", help="switch on a seeded defect (either spelling)")
    p.add_argument("--model", choices=("write-path", "failover", "controllers"), default="write-path",
                   help="what each seed simulates: the write path (default), a broker group under "
                        "controller-driven failover (reference/failover, checked against spec/failover), or two "
                        "controllers' shard tables over an in-memory etcd (reference/failover/controllers_sim.py, "
                        "checked against tla/AckOrderControllers.tla's properties)")
    p.add_argument("--long", action="store_true",
                   help="long-run mode: few seeds of very long runs (default 1,000,000 steps each), one Spark "
                        "task per seed, each stopping at its first violation")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="events with faults per seed (default 400; with --long 1,000,000)")
    p.add_argument("--batch-seeds", type=positive_int, default=None,
                   help="seeds per Spark job and ledger batch (default 2,000; with --long as many as run at once)")
    p.add_argument("--resume", action="store_true", help="run only the seeds the ledger lacks")
    p.add_argument("--max-failures", type=positive_int, metavar="K", help="stop after the batch that reaches K failures")
    p.add_argument("--no-audit", action="store_true", help="skip the determinism audit")
    p.set_defaults(func=main)

    r = sub.add_parser("fuzz-report", help="render a campaign's ledger as Markdown and HTML with plots")
    r.add_argument("--out", type=Path, default=Path(".ackorder/fuzz"), help="the campaign's directory")
    r.set_defaults(func=report_main)


def parse_conf(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not key.strip().startswith("spark."):
            raise ConfigError(f"--conf {item!r}: expected spark.KEY=VALUE")
        if key.strip() in JVM_OPTIONS and re.search(r"(^|\s)-Xmx", value):
            # Spark's launcher refuses it, and the JVM never starts: bad input, not a broken machine
            raise ConfigError(f"--conf {key.strip()}: Spark does not take -Xmx among a JVM's options; "
                              f"set {JVM_OPTIONS[key.strip()]} instead")
        if key.strip() in HEAPS and not heap_ok(key.strip(), value.strip()):
            # the JVM would not start (the driver's -Xmx takes it as written) or Spark would refuse the
            # heap, with a page of Java stack trace, and it would look like exit 3
            raise ConfigError(f"--conf {key.strip()}={value.strip()!r}: expected {HEAPS[key.strip()]}, "
                              f"at least 450m (Spark's minimum)")
        if key.strip().endswith((".memory", ".memoryOverhead")) and not SPARK_SIZE.fullmatch(value.strip()):
            raise ConfigError(f"--conf {key.strip()}={value.strip()!r}: expected a size such as 512m or 2g")
        out[key.strip()] = value.strip()
    return out


SPARK_SIZE = re.compile(r"\d+(?:[kmgtp]b?|b)?", re.IGNORECASE | re.ASCII)     # Spark's byte strings: 1024, 512m, 2g, 4gb
HEAPS = {"spark.driver.memory": "a JVM heap size such as 512m or 2g (a number and k, m, g or t: -Xmx takes it)",
         "spark.executor.memory": "a size such as 512m or 2g, with its unit"}
SPARK_MIN_HEAP_MIB = 450        # Spark refuses a driver or executor below 1.5 x its 300 MiB reserve


def heap_ok(key: str, value: str) -> bool:
    """Whether Spark starts with ``value`` as the heap ``key`` sets: the driver's goes to its JVM's -Xmx
    as written (no bare number, no 'gb'); the executor's Spark reads as a byte string ('4gb' too), but a
    bare number as MiB in one place and bytes in another (its minimum's check: 4096 is 4 KiB there)."""
    # at most 18 digits: int() of a longer run was a ValueError (4,300 digits), and no heap is that big
    found = re.fullmatch(r"(\d{1,18})([kmgt])" if key == "spark.driver.memory" else r"(\d{1,18})([kmgtp])b?", value,
                         re.IGNORECASE | re.ASCII)
    return found is not None and int(found[1]) * 1024 ** "kmgtp".index(found[2].lower()) >= SPARK_MIN_HEAP_MIB * 1024


JVM_OPTIONS = {"spark.driver.extraJavaOptions": "spark.driver.memory",
               "spark.executor.extraJavaOptions": "spark.executor.memory"}


EXCEPTION_LINE = re.compile(r"([A-Za-z_][\w.]*)(?:: (.*))?")


def _an_os_error(name: str) -> bool:
    """``OSError``, ``FileNotFoundError``, ``socket.gaierror``, ...: a builtin, or a class of a module
    this process has loaded (nothing is imported for it)."""
    module, _, cls = name.rpartition(".")
    value = getattr(sys.modules.get(module) if module else builtins, cls, None)
    return isinstance(value, type) and issubclass(value, OSError)


def task_os_error(err: Exception) -> str | None:
    """The OSError that failed a Spark task (a full disk under --out, say), from the worker's traceback
    that Spark's exception carries; None for any other failure.  The seeds' simulator never raises one:
    a crash of it is a row (spark_fuzz/seeds.py), so an OSError is the machine's, writing the ledger.
    What failed the task is the exception of the last traceback in the text (an earlier one is what it
    was handling): the first line after that traceback's header that is not a frame."""
    if type(err).__name__ not in ("PythonException", "Py4JJavaError"):
        return None
    text = str(err)
    header = text.rfind("Traceback (most recent call last):")
    if header < 0:
        return None
    for line in text[header:].splitlines()[1:]:
        if not line or line[0].isspace():          # a frame, its source line, its ^^^ markers
            continue
        raised = EXCEPTION_LINE.fullmatch(line)
        if raised is None or not _an_os_error(raised[1]):
            return None
        return line
    return None


def raise_task_failure(err: Exception) -> typing.NoReturn:
    """A campaign's exception, raised again as what it is: the machine's (a task's OSError, exit 3), or
    a defect of the tasks' own code (its traceback, exit 1)."""
    if (failed := task_os_error(err)) is None:
        raise err
    raise errors.EnvironmentFailure(f"a Spark task failed: {failed}") from None


def preflight(master: str, out: Path) -> None:
    """What can be known before Spark starts (which takes seconds and fails with pages of traces)."""
    from spark_fuzz.standalone import ClusterStartError, find_java

    if out.exists() and not out.is_dir():
        raise errors.UsageError(f"--out {out}: exists and is not a directory")
    try:
        find_java()           # else spark-class's "JAVA_HOME is not set" lines, then Spark's own error
    except ClusterStartError as err:
        raise errors.EnvironmentFailure(str(err)) from None
    if LOCAL_MASTER.fullmatch(master):
        return
    m = re.fullmatch(r"spark://([^:/]+):(\d{1,5})", master, re.ASCII)
    if m is None:
        if master.startswith("local"):
            raise errors.UsageError(f"--master {master!r}: expected local, local[N] or local[*]")
        if not master.startswith(("yarn", "k8s://", "mesos://")):
            raise errors.UsageError(f"--master {master!r}: expected local[*] or spark://HOST:PORT")
        return
    host, port = m.group(1), int(m.group(2))
    if not 0 < port <= 65535:           # the resolver took 99999 as 99999 % 65536, and tried that port
        raise errors.UsageError(f"--master {master!r}: the port must be 1..65535")
    from reference.real.options import host_problem

    if (problem := host_problem(host)) is not None:     # a UnicodeError from the connect before
        raise errors.UsageError(f"--master {master!r}: {problem}")
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            pass
    except OSError as err:
        raise errors.EnvironmentFailure(f"Spark master {master} is not reachable ({err.strerror or err}); "
                                        f"is it running? (`spark-class org.apache.spark.deploy.master.Master`)") from None


def verdict(summary: dict, bug: str | None) -> tuple[int, str]:
    """The exit code of a finished campaign and why."""
    from spark_fuzz.campaign import campaign_verdict

    as_expected, why = campaign_verdict(summary, bug)
    return (errors.OK if as_expected else errors.VIOLATION), why


def main(args: argparse.Namespace) -> int:
    from spark_fuzz.campaign import CampaignSpec, DeterminismError, run_campaign, spark_session
    from spark_fuzz.ledger import LedgerError
    from spark_fuzz.seeds import DEFAULT_STEPS, LONG_STEPS, load_matrix

    console = make_console()
    if args.model == "failover":
        from spec.failover.config import FAILOVER_BUG_NAMES

        bug = resolve_bug(args.bug, FAILOVER_BUG_NAMES) if args.bug else None
        if args.config_matrix is not None:
            raise errors.UsageError("--config-matrix pins write-path knobs; a failover campaign has none")
        if args.long:
            raise errors.UsageError("--long: a failover seed's schedule is bounded by its fault budget (a few hundred "
                                    "actions), so it has no long runs; --long is for the write path")
    elif args.model == "controllers":
        from spec.controllers.config import CONTROLLERS_BUG_NAMES

        bug = resolve_bug(args.bug, CONTROLLERS_BUG_NAMES) if args.bug else None
        if bug == "BugOwnerSkipsMetadataCompare":
            raise errors.UsageError("--bug BugOwnerSkipsMetadataCompare: the runtime never decides twice from one "
                                    "read, so no seed can show it (the spec does: `ackorder tlc "
                                    "BugOwnerSkipsMetadataCompare`; docs/model.md)")
        if args.config_matrix is not None or args.long:
            raise errors.UsageError("--config-matrix and --long are the write path's; a controllers seed has neither")
    else:
        bug = resolve_bug(args.bug) if args.bug else None
    conf = parse_conf(args.conf)
    load_matrix(args.config_matrix)          # a bad matrix is reported before Spark starts
    preflight(args.master, args.out)
    steps = args.steps or (LONG_STEPS if args.long else DEFAULT_STEPS)
    spec = CampaignSpec(seeds=args.seeds, first_seed=args.first_seed, out=args.out,
                        matrix_path=args.config_matrix, bug=bug, steps=steps,
                        batch_seeds=args.batch_seeds, max_failures=args.max_failures, resume=args.resume,
                        audit=not args.no_audit, model=args.model, mode="long" if args.long else "short")
    try:
        spark = spark_session(args.master, {"spark.ui.enabled": "true", **conf})
    except Exception as err:         # noqa: BLE001  (Py4J and JVM start-up errors have many types)
        raise errors.EnvironmentFailure(f"Spark did not start on {args.master}: "
                                        f"{str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}")
    try:
        if ui := spark.sparkContext.uiWebUrl:
            console.print(f"Spark UI: {ui}")
        summary = with_progress_bar(console, lambda on_batch: run_campaign(spark, spec, on_batch))
    except DeterminismError as err:
        console.print(f"[bold red]determinism audit failed:[/] {err}")
        return errors.VIOLATION
    except LedgerError as err:               # --resume over an --out whose ledger is not a campaign's
        raise errors.UsageError(str(err)) from None
    except Exception as err:                 # noqa: BLE001  (a task's failure reaches the driver as Spark's)
        raise_task_failure(err)
    finally:
        spark.stop()
    print_summary(console, summary)
    from spark_fuzz.campaign import read_history

    print_per_cpu_hour(console, read_history(args.out))
    code, why = verdict(summary, bug)
    console.print(("[green]" if code == errors.OK else "[bold red]") + why + "[/]")
    return code


def with_progress_bar(console, run):
    """Run a campaign with a progress bar fed by its batches."""
    from rich.progress import MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("campaign"), bar_column(), MofNCompleteColumn(), TextColumn("{task.fields[rate]} seeds/s"),
               TextColumn("violations {task.fields[bad]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("campaign", total=None, rate="-", bad=0)

        def on_batch(p) -> None:
            rate = "-" if p.seeds_per_second is None else f"{p.seeds_per_second:,.1f}"
            bar.update(task, total=p.total, completed=p.done, rate=rate, bad=p.failures)

        return run(on_batch)


def print_summary(console, summary: dict) -> None:
    table = Table(title=f"fuzz campaign {summary['campaign']}" + (f" (--bug {summary['bug']})" if summary["bug"]
                                                                  else ""), title_justify="left")
    outcomes = sorted({o for c in summary["by_config"].values() for o in c})
    for col in ("configuration", "seeds", *outcomes):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for config, counts in summary["by_config"].items():
        table.add_row(config, f"{sum(counts.values()):,}", *[f"{counts.get(o, 0):,}" for o in outcomes])
    console.print(table)
    console.print(f"{summary['seeds']:,} seeds, {summary['steps']:,} steps; this run: "
                  f"{summary['seeds_run_now']:,} seeds in {summary['seconds']:.1f} s = "
                  f"{summary['seeds_per_second']:,.1f} seeds/s, {summary['steps_per_second']:,.0f} steps/s"
                  + ("; stopped early (--max-failures)" if summary["stopped_early"] else ""))
    console.print("outcomes: " + ", ".join(f"{k} {v:,}" for k, v in summary["outcomes"].items()))
    if "cpu_seconds" in summary:
        first = summary.get("first_violation")
        console.print(f"{summary['mode']} mode, {summary['steps_per_seed']:,} steps per seed: "
                      f"{summary['cpu_seconds']:,.1f} CPU-s in tasks, {summary['bugs_found']} distinct "
                      f"violation(s) = {summary['bugs_per_cpu_hour']:,.1f} bugs found per CPU-hour"
                      + ("" if first is None else
                         f"; first at seed index {first['index']}, step {first['step']:,}, after "
                         f"{summary['cpu_s_to_first_violation']:,.1f} CPU-s"))
    if summary.get("faults"):
        console.print("faults injected: " + ", ".join(f"{k} {v:,}" for k, v in summary["faults"].items()))
    if "audit" in summary:
        console.print(f"determinism audit: {summary['audit']['seeds']} seeds re-run, same trace hashes")
    from tla.manifest import expected_violations

    expected = expected_violations(summary["bug"]) if summary["bug"] else frozenset()
    for rep in summary["reproducers"]:
        last = rep["message"].strip().splitlines()[-1] if rep["message"].strip() else ""
        style = FOUND_AS_EXPECTED if rep["outcome"] in expected else FAILED
        console.print(f"[{style}]{rep['signature']}[/] ×{rep['count']} (first at seed index {rep['index']}): {last}")
        if rep.get("reproducer"):
            print_line(rep["reproducer"])
        if rep.get("trace"):
            console.print(f"  trace: {rep['trace']}")
    if summary.get("reproducers_file"):
        console.print(f"reproducers: {summary['reproducers_file']}")


def print_per_cpu_hour(console, history: list[dict]) -> None:
    """Every campaign run into this --out, both modes side by side, when there is more than one."""
    if len(history) < 2:
        return
    table = Table(title="bugs found per CPU-hour, campaigns in this --out", title_justify="left")
    for col in ("campaign", "mode", "bug", "seeds", "steps/seed", "CPU-s", "bugs", "per CPU-hour",
                "CPU-s to first"):
        table.add_column(col, justify="left" if col in ("campaign", "mode", "bug") else "right")
    for h in history:
        first = h.get("cpu_s_to_first_violation")
        table.add_row(h["campaign"], h["mode"], h.get("bug") or "-", f"{h['seeds']:,}",
                      f"{h['steps_per_seed']:,}", f"{h['cpu_seconds']:,.1f}", str(h["bugs_found"]),
                      f"{h['bugs_per_cpu_hour']:,.1f}", "-" if first is None else f"{first:,.1f}")
    console.print(table)


def report_main(args: argparse.Namespace) -> int:
    from spark_fuzz.report import write_report

    from spark_fuzz import ledger

    console = make_console()
    summary_path = args.out / "summary.json"
    try:
        summary = ledger.load_summary(args.out)
        rows = ledger.read_ledger(args.out, summary["campaign"]).to_pylist()
    except FileNotFoundError:
        raise errors.UsageError(f"{summary_path}: no campaign there (run `ackorder fuzz --out {args.out}`)") from None
    except ledger.LedgerError as err:
        raise errors.UsageError(str(err)) from None
    from cli.coverage import print_coverage
    from spark_fuzz.report import spec_coverage

    paths = write_report(args.out, summary)
    print_coverage(console, *spec_coverage(rows, summary.get("bug")), "seeds")
    console.print("wrote " + ", ".join(str(p) for p in paths))
    return errors.OK
