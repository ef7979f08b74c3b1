"""`ackorder trace-check`: is a trace (or the per-process traces of one run, merged by causality) a
behaviour of the spec?  TLC decides by default; `--twin` asks the Python twin (faster on long traces).

Exit codes: 0 valid, 1 a step no spec step explains (or a complete trace ending with work left, a
checkpoint the steps do not reach, a step no order of the files can place), 2 a malformed trace (one
line naming the file and line; with --strict also a gap in seq or a clock going back), 3 no Java/TLC."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from cli.argtypes import output_file
from cli import errors
from cli.sim import positive_int
from cli.ui import console as make_console
from spec.tracecheck import mismatches, state_table
from tla.tlc import TlcOptions

MAX_VALUE_CHARS = 400


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace-check", help="validate implementation traces against the spec (TLC, or --twin)",
                       description="Check one trace, or the files of one run's processes (merged by causality), "
                                   "against the bound-free spec with every bug switch off. Exit 0 valid, 1 a step "
                                   "no spec step explains, 2 a malformed trace. A failover trace (its header says "
                                   "\"model\": \"failover\", as `fuzz --model failover` writes them) is checked by "
                                   "TLC against AckOrderFailover and by the failover twin, which must agree.")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="NDJSON trace files (docs/traces.md)")
    p.add_argument("--twin", action="store_true", help="check with the Python twin instead of TLC")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="TLC workers (default 1); a trace with checkpoints: TLC processes, each checking "
                        "a batch of its segments")
    p.add_argument("--keep", type=Path, metavar="DIR", help="keep the generated TLA+ module and cfg there, and TLC's logs")
    p.add_argument("--json", type=output_file, metavar="FILE", help="write the verdict as JSON")
    p.add_argument("--merged", type=output_file, metavar="FILE", help="write the merged steps as one trace file")
    p.add_argument("--coverage", action="store_true",
                   help="show which branches of the spec and which property antecedents the trace reached "
                        "(failover traces: which of AckOrderFailover's actions their explained steps took)")
    p.add_argument("--strict", action="store_true",
                   help="a gap in seq (a dropped line) or a t_ms going back within a process is malformed input "
                        "(exit 2), not a warning")
    p.set_defaults(func=main)


def _short(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _failover_kind(path: Path) -> str | None:
    """"failover" (one trace of the spec's steps), "process" (one process's file of a real run,
    reference/failover/proctrace.py), or None (a write-path trace, or unreadable)."""
    from spec.failover.procmerge import MODEL as PROCESS_MODEL
    from spec.failover.tracecheck import MAX_LINE_CHARS, is_failover_header

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline(MAX_LINE_CHARS)
    except OSError:
        return None                 # the write-path reader names the problem
    if is_failover_header(first):
        return "failover"
    try:
        head = json.loads(first)
    except ValueError:
        return None
    return "process" if isinstance(head, dict) and head.get("model") == PROCESS_MODEL else None


def _is_failover_trace(path: Path) -> bool:
    return _failover_kind(path) is not None


def _merged_process_files(args: argparse.Namespace) -> list[tuple[str, object]]:
    """The process files of one real run, merged into one failover trace (spec/failover/procmerge.py)."""
    from spec.failover.procmerge import ProcTraceError, merge_files
    from spec.failover.tracecheck import read_failover_trace

    if not all(_failover_kind(p) == "process" for p in args.files):
        raise errors.UsageError("process files of a real run and other traces: check them apart")
    try:
        merged = merge_files(list(args.files))
    except ProcTraceError as err:
        raise errors.UsageError(str(err)) from None
    text = merged.text(f"merged from {len(args.files)} process files")
    if args.merged is not None:
        args.merged.write_text(text, encoding="utf-8")
    name = f"{len(args.files)} process files (merged)"
    return [(name, read_failover_trace(text.splitlines(keepends=True), name))]


def check_failover(args: argparse.Namespace, console) -> int:
    """Failover traces (spec/failover/tracecheck.py): each checked by TLC (tla/failovertrace.py, a
    trace module over AckOrderFailover) and by the twin, which must agree (``--twin``: the twin
    only); with --coverage, which of AckOrderFailover's actions their explained steps took."""
    import time

    from spec.failover.tracecheck import action_coverage, check_failover_trace, read_failover_trace
    from tla.failovertrace import check_failover_tlc
    from tla.tlc import TlcUnavailable
    from tla.tracecheck import TraceCheckError

    processes = any(_failover_kind(p) == "process" for p in args.files)
    for flag in ("strict",) if processes else ("merged", "strict"):
        if getattr(args, flag):
            raise errors.UsageError(f"--{flag}: not for failover traces (yet)")
    traces = _merged_process_files(args) if processes else []
    for path in args.files if not processes else ():
        if not _is_failover_trace(path):
            try:
                open(path, "rb").close()
            except OSError as err:
                raise errors.UsageError(f"{path}: cannot read: {err.strerror}") from None
            raise errors.UsageError(f"{path}: a write-path trace among failover traces: check them apart")
    start = time.perf_counter()
    verdicts, disagree = [], []
    names = [name for name, _ in traces] if processes else list(args.files)
    for k, path in enumerate(names):
        if processes:
            trace = traces[k][1]
        else:
            with open(path, encoding="utf-8", errors="strict") as f:
                try:
                    trace = read_failover_trace(f, str(path))
                except UnicodeDecodeError as err:
                    raise errors.UsageError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
        v = check_failover_trace(trace, str(path))
        if not args.twin:
            keep = None if args.keep is None else (args.keep if len(names) == 1 else args.keep / f"{k:04d}")
            try:
                tlc = check_failover_tlc(trace.cfg, [(label, state) for label, state, _ in trace.steps],
                                         TlcOptions(workers=args.workers, short=True), keep=keep)
            except (TlcUnavailable, TraceCheckError) as err:
                raise errors.EnvironmentFailure(str(err)) from None
            if tlc.ok != v.ok or (not v.ok and tlc.explained + 1 != v.steps):
                disagree.append(f"{path}: TLC explains {tlc.explained} of {tlc.steps} steps, the twin "
                                + ("all" if v.ok else f"{v.steps - 1}"))
        verdicts.append((path, v))
    seconds = time.perf_counter() - start
    checker = "the twin" if args.twin else "TLC and the twin"
    steps = sum(v.steps for _, v in verdicts)
    where = escape(str(names[0])) if len(names) == 1 else f"{len(names)} traces"
    console.print(f"{steps:,} failover step(s) from {where}, checked by {checker} in {seconds:.2f} s "
                  "(liveness is not judged on a finite trace)")
    bugs = sorted({b for _, v in verdicts for b in v.bugs})
    if bugs:
        console.print(f"[dim]the writers ran with {', '.join(bugs)}; the check uses the spec with no switch on[/]")
    coverage = action_coverage(v for _, v in verdicts) if args.coverage else None
    if coverage is not None:
        table = Table(title="AckOrderFailover actions the explained steps took", title_justify="left")
        for column in ("action", "steps", "traces"):
            table.add_column(column, justify="left" if column == "action" else "right")
        for name, (n, traces) in coverage.items():
            table.add_row(name if n else f"[yellow]{name}[/]", f"{n:,}", f"{traces:,}")
        console.print(table)
        never = [name for name, (n, _) in coverage.items() if not n]
        console.print(f"{len(coverage) - len(never)} of {len(coverage)} actions taken"
                      + (f"; never: {', '.join(never)}" if never else ""))
    bad = [(p, v) for p, v in verdicts if not v.ok]
    if args.json:
        first = bad[0][1] if bad else None
        args.json.write_text(json.dumps({
            "valid": not bad and not disagree, "checker": checker, "model": "failover",
            "files": [str(p) for p in args.files], "steps": steps, "failed_file": str(bad[0][0]) if bad else None,
            "failed_line": first.line if first else None, "failed_action": first.label if first else None,
            "rejected": [str(p) for p, _ in bad], "disagreements": disagree, "bugs": bugs,
            "seconds": round(seconds, 3),
            **({"coverage": {k: {"steps": n, "traces": t} for k, (n, t) in coverage.items()}} if coverage else {}),
        }, indent=2) + "\n")
    for problem in disagree:
        console.print(f"[bold red]TLC and the twin disagree[/]: {escape(problem)}")
    if not bad and not disagree:
        console.print("[green]valid[/]: a behaviour of AckOrderFailover (every switch off) explains every step"
                      + (f" of all {len(verdicts)} traces" if len(verdicts) > 1 else ""))
        return errors.OK
    for path, v in bad[:10]:
        console.print(f"[bold red]invalid[/]: step {v.steps} ({escape(str(path))}:{v.line}, {escape(v.label)}): no "
                      "state of AckOrderFailover the steps before it reach can take it")
    if len(bad) > 10:
        console.print(f"[bold red]{len(bad) - 10} more trace(s) rejected[/]")
    return errors.VIOLATION


def main(args: argparse.Namespace) -> int:
    from tla.tlc import TlcUnavailable
    from tla.tracecheck import TraceCheckError, check_files

    console = make_console()
    if any(_is_failover_trace(p) for p in args.files):
        return check_failover(args, console)
    from spec.coverage import Coverage

    coverage = Coverage() if args.coverage else None
    try:
        result = check_files(args.files, twin=args.twin, options=TlcOptions(workers=args.workers), keep=args.keep,
                             log_dir=args.keep, coverage=coverage, strict=args.strict,
                             keep_steps=args.merged is not None)
    except TlcUnavailable as err:
        raise errors.EnvironmentFailure(str(err)) from None
    except TraceCheckError as err:
        raise errors.EnvironmentFailure(str(err)) from None
    v = result.verdict
    checker = "the twin" if args.twin else "TLC"
    per_k = result.per_thousand_steps_s
    # a rate over a handful of steps is the checker's start-up (a JVM for TLC), not its speed
    rate = f" ({per_k:.2f} s per 1,000 steps)" if per_k is not None and result.step_count >= 1_000 else ""
    for warning in result.warnings:        # stamps the check does not rely on (--strict: exit 2)
        sys.stderr.write(f"ackorder trace-check: warning: {warning}\n")
    console.print(f"{result.step_count:,} step(s) from {len(result.paths)} file(s), checked by {checker} in "
                  f"{result.check_seconds:.2f} s{rate}")
    for path, prop, message in result.writer_verdicts:
        console.print(f"[dim]{escape(path)}: the writer reported {escape(prop)}: "
                      f"{escape(message.splitlines()[0]) if message else ''}[/]")
    if args.merged:
        write_merged(args.merged, result)
    if coverage is not None:
        from cli.coverage import print_coverage
        from spec.coverage import antecedent_table, branch_table

        print_coverage(console, branch_table([(result.config, coverage.branches)]),
                       antecedent_table([coverage.antecedents]), "traces")
    if args.json:
        args.json.write_text(json.dumps(verdict_json(result, checker), indent=2) + "\n")
    if v.valid:
        console.print(f"[green]valid[/]: a behaviour of the spec explains every step"
                      + (" and ends with nothing left waiting" if result.complete else ""))
        return errors.OK
    if v.failed is not None:
        # (escaped: a reason quotes TLA+ records, [off |-> 1, ...], which rich would take for markup)
        console.print(f"[bold red]invalid[/]: step {v.first_unexplained} of {v.steps} ({escape(v.failed.where())}, "
                      f"{v.failed.label}): {escape(v.reason)}")
        if v.conflict is not None:      # a step no order of the files places: the spec's successors say nothing
            console.print(f"  conflicts with {escape(_where(v.conflict))}")
        else:
            for line in (mismatches(result.config, v.failed, v.states[0]) if v.states else []):
                console.print(f"  {escape(_short(line))}")
        console.print(f"  observed: {escape(_short(json.dumps(v.failed.obs, separators=(',', ':'))))}")
    else:
        console.print(f"[bold red]invalid[/]: {escape(v.reason)}")
    if v.states:
        title = ("the state before it" if v.failed is not None
                 else f"the state the steps before {v.checkpoint.where()} reach" if v.checkpoint is not None
                 else "the state at the end")
        if len(v.states) > 1:
            title += f" (one of {len(v.states)} the trace leaves possible)"
        table = Table(title=title, title_justify="left", show_lines=False)
        table.add_column("variable")
        table.add_column("value", overflow="fold")
        for name, value in state_table(result.config, v.states[0]):
            table.add_row(name, Text(_short(value)))
        console.print(table)
    return errors.VIOLATION


def _where(x) -> str:
    return f"{x.file}:{x.line} ({x.label if hasattr(x, 'label') else x.note})"


def verdict_json(result, checker: str) -> dict:
    v = result.verdict
    out = {"valid": v.valid, "checker": checker, "files": list(result.paths), "steps": v.steps,
           "explained": v.explained, "first_unexplained": v.first_unexplained, "reason": v.reason,
           "failed": None, "seconds": round(result.check_seconds, 3),
           "seconds_per_1000_steps": None if result.per_thousand_steps_s is None
           else round(result.per_thousand_steps_s, 3), "complete": result.complete}
    if v.failed is not None:
        out["failed"] = {"file": v.failed.file, "line": v.failed.line, "action": v.failed.label, "obs": v.failed.obs}
    if v.conflict is not None:
        out["conflict"] = {"file": v.conflict.file, "line": v.conflict.line,
                           "action": getattr(v.conflict, "label", None)}
    if v.checkpoint is not None:
        out["checkpoint"] = {"file": v.checkpoint.file, "line": v.checkpoint.line}
    if result.warnings:
        out["warnings"] = list(result.warnings)
    if v.states:
        out["state"] = dict(state_table(result.config, v.states[0]))
    return out


def write_merged(path: Path, result) -> None:
    from spec import traceformat as tf

    lines = [json.dumps(tf.header("merged", result.config, [], source=" + ".join(result.paths)))]
    for n, step in enumerate(result.steps, 1):
        observes = [f"{var}[{r}]" if r else var for var, r in sorted(step.observes, key=lambda p: (p[0], p[1] or ""))]
        labels = [tf.label_text(a, p) for a, p in step.actions]
        lines.append(json.dumps({"seq": n, "proc": step.proc, "action": labels[0] if len(labels) == 1 else labels,
                                 "obs": step.obs, "observes": observes, "t_ms": step.t_ms,
                                 "what": f"{step.where()}"}, separators=(",", ":")))
    if result.complete:
        lines.append(json.dumps({"end": "complete"}))
    path.write_text("\n".join(lines) + "\n")
