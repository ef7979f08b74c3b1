"""`ackorder prove [--json FILE]`: the z3 proofs of spec/proofs.py, for the manifest's
configurations, as a table."""

from __future__ import annotations

import argparse
import json
import signal

import attrs
from rich.console import Console
from rich.table import Table

from cli.argtypes import output_file
from cli import errors
from cli.ui import console as make_console
from spec.proofs import STOP, ProofReport, changed, prove_all
from tla.manifest import CONTROLLERS_MODULE, FAILOVER_MODULE, SPEC_MODULE, spec_configs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prove", help="z3: the safety invariants are inductive (any number of messages)",
                       description="Prove every safety property inductive for each green configuration "
                                   "and find a reachable counterexample to induction for each bug variant.")
    p.add_argument("--json", type=output_file, metavar="FILE", help="write every result as JSON")
    p.add_argument("--verbose", action="store_true", help="one row per strengthening conjunct too")
    p.set_defaults(func=main)


def prove_manifest(on_done=lambda name: None) -> ProofReport:
    """The library call behind the command: every configuration of tla/manifest.json, the write
    path's abstraction (spec/proofs.py), the failover one (spec/failover/proofs.py, which pins
    each failover bug's path from the twin's counterexample) and the controllers one
    (spec/controllers/proofs.py, likewise)."""
    from spec.controllers import proofs as controllers
    from spec.failover import proofs as failover

    failover_bugs = spec_configs("bug", FAILOVER_MODULE)
    controllers_bugs = spec_configs("bug", CONTROLLERS_MODULE)
    write_path = prove_all(spec_configs("green"), spec_configs("bug", SPEC_MODULE), on_done)
    fail_over = failover.prove_all(spec_configs("green", FAILOVER_MODULE), failover_bugs, on_done,
                                   failover_twin_paths([name for name, _, _ in failover_bugs]))
    several = controllers.prove_all(spec_configs("green", CONTROLLERS_MODULE), controllers_bugs, on_done,
                                    failover_twin_paths([name for name, _, _ in controllers_bugs]))
    return ProofReport(write_path.green + fail_over.green + several.green,
                       write_path.bugs + fail_over.bugs + several.bugs,
                       round(write_path.seconds + fail_over.seconds + several.seconds, 2))


def failover_twin_paths(names: list[str]) -> dict[str, tuple[str, ...]]:
    """The twin's counterexample of each failover (or controllers) bug model, for z3 to pin
    (tla/twincheck.py)."""
    from tla.manifest import load_manifest, resolve
    from tla.twincheck import twin_counterexample

    manifest = load_manifest()
    paths = {name: twin_counterexample(resolve(manifest, name)) for name in names}
    return {name: path for name, path in paths.items() if path is not None}


def report_json(report: ProofReport) -> dict:
    return {"green": [{"configuration": g.configuration, "results": [attrs.asdict(r) for r in g.results],
                       "vacuous": list(g.vacuous)} for g in report.green],
            "bugs": [attrs.asdict(r) for r in report.bugs], "ok": report.ok, "seconds": report.seconds}


def print_report(console: Console, report: ProofReport, verbose: bool = False) -> None:
    table = Table(title="ackorder prove: inductive invariants (z3, unbounded offsets)", title_justify="left")
    for col in ("configuration", "invariant", "result", "seconds"):
        table.add_column(col, justify="right" if col == "seconds" else "left")
    for g in report.green:
        strong = [r for r in g.results if r.invariant not in g.properties]
        for r in g.results:
            if r.invariant in g.properties or verbose or r.result != "proved":
                style = "green" if r.result == "proved" else "bold red"
                table.add_row(g.configuration, r.invariant, f"[{style}]{r.result}[/]", f"{r.seconds:.2f}")
        if not verbose and all(r.result == "proved" for r in strong):
            table.add_row(g.configuration, f"strengthening ({len(strong)} conjuncts)", "[green]proved[/]",
                          f"{sum(r.seconds for r in strong):.2f}")
        if g.vacuous:
            table.add_row(g.configuration, "vacuity: actions never enabled", f"[bold red]{', '.join(g.vacuous)}[/]", "")
    for r in report.bugs:
        style = "green" if r.result == "CTI" else "bold red"
        table.add_row(r.config, r.invariant, f"[{style}]{r.result}[/]", f"{r.seconds:.2f}")
    console.print(table)
    for r in report.bugs:
        if r.cti:
            c = r.cti
            console.print(f"[bold]{r.config}[/]: {c['action']} breaks {', '.join(c['violated'])} "
                          f"(pre-state reached in {c['reachable_in']} steps from Init; {r.invariant} violated "
                          f"after {c['property_violated_after']}" + (f"; path: {c['path_from']}" if "path_from" in c else "")
                          + ")")
            console.print("    pre : " + ", ".join(f"{k}={v}" for k, v in c["pre"].items()
                                                     if k in changed(c["pre"], c["post"])
                                                     or k in ("W", "C", "F", "D", "off", "status", "recv", "agree")))
            console.print("    post: " + ", ".join(f"{k}={a}->{b}" for k, (a, b) in changed(c["pre"], c["post"]).items()))


def _record_stop(signum, frame) -> None:
    errors.STOP_REQUESTED.set()
    STOP.set()


def main(args: argparse.Namespace) -> int:
    console = make_console()
    if errors.STOP_REQUESTED.is_set():      # a Ctrl-C while the command was being imported, dropped there
        raise KeyboardInterrupt
    STOP.clear()
    # A Ctrl-C or a SIGTERM is only recorded, and raised at the next check: raised where the signal lands,
    # it may land in a z3 object's finalizer, where Python prints it and drops it (the proofs then ran on
    # to their verdict).
    # (not where a signal is ignored: a shell's background job ignores SIGINT, as cli/main.py leaves it)
    stops = [sig for sig in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, _record_stop) for sig in stops}
    try:
        with console.status("proving") as status:
            report = prove_manifest(lambda name: status.update(f"proving: {name} done"))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stopped = STOP.is_set()
        STOP.clear()                        # else every check after, in this process, would raise it
    if stopped:                             # after the last check: no verdict from an interrupted run
        raise KeyboardInterrupt
    print_report(console, report, args.verbose)
    console.print(f"{'all proofs hold and every bug has a CTI' if report.ok else '[bold red]NOT all as expected[/]'} "
                  f"({report.seconds:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(report_json(report), indent=2) + "\n")
    return errors.OK if report.ok else errors.VIOLATION
