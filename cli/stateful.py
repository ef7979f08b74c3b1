"""`ackorder stateful`: one Hypothesis state machine from the command line.  A failing
program is saved to a file that `ackorder replay --program` takes."""

from __future__ import annotations

import argparse
import datetime
import gc
import re
import time
from pathlib import Path

from cli.argtypes import output_file, output_file_in_new_directory
from cli import errors
from cli.sim import positive_int
from cli.ui import FAILED, FOUND_AS_EXPECTED, console as make_console, print_line
from spec.config import bug_alias, resolve_bug

MACHINES = ("SpecMachine", "RefinementMachine", "RealStoreMachine", "FailoverMachine")
PROFILES = ("ci", "dev", "thorough")
SAVE_DIR = Path(".ackorder") / "stateful"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stateful", help="run one Hypothesis state machine; save a failing program",
                       description="Run one of the Hypothesis state machines (stateful_tests/machines.py). "
                                   "Exit 1 when it fails (with --bug: 0 when the bug is caught with the "
                                   "property its model names, 1 when it is not).")
    p.add_argument("--machine", default="RefinementMachine", type=machine_name,
                   help=f"{', '.join(MACHINES)} (or spec, refinement, real); default RefinementMachine")
    p.add_argument("--bug", metavar="NAME", help="the refinement machine with this bug switch on (with "
                                                  "--machine failover: a failover switch)")
    p.add_argument("--profile", choices=PROFILES, default="ci", help="Hypothesis profile (default ci)")
    p.add_argument("--examples", type=positive_int, help="test cases (default: the profile's)")
    p.add_argument("--steps", type=positive_int, help="steps per test case (default: the profile's)")
    p.add_argument("--save", type=output_file_in_new_directory, metavar="FILE", help=f"where a failing program goes (default {SAVE_DIR}/...)")
    p.add_argument("--coverage", action="store_true",
                   help="show which branches of the spec and which property antecedents the test cases reached")
    p.add_argument("--trace", type=output_file, metavar="FILE",
                   help="write each test case's spec-level trace there (the last one stays); a failing case's "
                        f"trace is always kept in {SAVE_DIR}/<machine>-failure.ndjson")
    p.set_defaults(func=main)


def machine_name(text: str) -> str:
    """A machine's class name, or its first word (``spec``, ``refinement``, ``real``), any case."""
    for name in MACHINES:
        short = name.lower().removesuffix("machine")
        if text.lower() in (name.lower(), short, short.removesuffix("store")):
            return name
    raise argparse.ArgumentTypeError(f"unknown machine {text!r}; known: {', '.join(MACHINES)}")


def extract_program(lines: list[str]) -> str | None:
    """The step program in what Hypothesis reported ("state = ..." to "state.teardown()")."""
    text = "\n".join(lines)
    m = re.search(r"^state = \w+\(\)$.*?^state\.teardown\(\)$", text, flags=re.S | re.M)
    return m.group(0) + "\n" if m else None


def main(args: argparse.Namespace) -> int:
    import os

    os.environ["HYPOTHESIS_PROFILE"] = args.profile
    from hypothesis import settings
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import run_state_machine_as_test

    from reference.refinement import PropertyViolation, RefinementError
    from stateful_tests import profiles  # noqa: F401  (registers the profiles)
    from stateful_tests import machines
    from stateful_tests.bug_machines import bug_hunt, machine_for
    from tla.manifest import expected_violations

    console = make_console()
    settings.load_profile(args.profile)
    failover = args.machine == "FailoverMachine"
    if failover:
        from spec.failover.config import FAILOVER_BUG_NAMES
        from stateful_tests.failover_machine import failover_machine_for

        bug = resolve_bug(args.bug, FAILOVER_BUG_NAMES) if args.bug else None
        machine = failover_machine_for(bug)
        if args.coverage:
            raise errors.UsageError("--coverage: not for the failover machine (trace-check --coverage counts the "
                                    "actions of its --trace)")
    else:
        from spec.failover.config import FAILOVER_BUG_NAMES

        if args.bug and any(args.bug in (b, bug_alias(b)) for b in FAILOVER_BUG_NAMES):
            raise errors.UsageError(f"--bug {args.bug}: a failover switch, for --machine failover")
        bug = resolve_bug(args.bug) if args.bug else None
        if bug and args.machine != "RefinementMachine":
            raise errors.UsageError("--bug runs the refinement machine (or --machine failover with a failover "
                                    "switch); leave --machine out or name RefinementMachine")
        machine = machine_for(bug) if bug else getattr(machines, args.machine)
    runs: list = []
    if args.trace or args.coverage:
        if not hasattr(machine, "trace_to"):
            raise errors.UsageError(f"--trace/--coverage: {machine.__name__} drives the twin alone, not the "
                                    "implementation")
        machine = type(machine.__name__, (machine,), {"trace_to": args.trace,
                                                      "coverage_runs": runs if args.coverage else None})
    base = bug_hunt() if bug and not failover else settings()
    chosen = settings(base, **{k: v for k, v in (("max_examples", args.examples),
                                                   ("stateful_step_count", args.steps)) if v is not None})
    reported: list[str] = []
    failure: BaseException | None = None
    # Everything is imported: out of the collector's generations with it (gc.freeze), so the full
    # collections during the run scan the machine's own objects, not the ~33k of the imports that
    # stay alive anyway (RefinementMachine, 200 programs, 3 alternate runs: 1.49 -> 1.35 CPU-s,
    # its full collections 0.14 -> 0.05 s; FailoverMachine 2.01 -> 1.96).  A cycle among them that
    # dies later is never freed: this process ends with the run.
    gc.collect()
    gc.freeze()
    start = time.perf_counter()
    start_wall = time.time()
    with console.status(f"{machine.__name__}: {chosen.max_examples} test cases ({args.profile} profile)"):
        with with_reporter(lambda value: reported.extend(str(value).splitlines())):
            try:
                run_state_machine_as_test(machine, settings=chosen)
            except (PropertyViolation, RefinementError, AssertionError) as err:
                failure = err
    seconds = time.perf_counter() - start
    if args.coverage:
        from cli.coverage import print_coverage
        from spec.coverage import antecedent_table, branch_table

        print_coverage(console, branch_table([(c, b) for c, b, _ in runs], bug),
                       antecedent_table([a for _, _, a in runs]), "test cases")
    if failure is None:
        console.print(f"{machine.__name__}: no failure in {chosen.max_examples} test cases ({seconds:.1f} s)")
        if bug:
            console.print(f"[bold red]{bug} was not caught[/]")
            return errors.VIOLATION
        return errors.OK
    prop = getattr(failure, "prop", "refinement" if isinstance(failure, RefinementError) else "assertion")
    as_expected = bool(bug) and prop in expected_violations(bug)
    console.print(f"[{FOUND_AS_EXPECTED if as_expected else FAILED}]{machine.__name__} failed: {prop}[/] "
                  f"({seconds:.1f} s)\n{failure}")
    # Hypothesis attaches the failing program to the exception as notes (older versions report it).
    notes = [line for note in getattr(failure, "__notes__", []) for line in str(note).splitlines()]
    program = extract_program(notes + reported)
    if program is not None:
        path = args.save or SAVE_DIR / f"{machine.__name__}-{datetime.datetime.now():%Y%m%d-%H%M%S}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(program)
        console.print("the failing program, to replay:")
        print_line(f"ackorder replay --program {path}")
    trace = machines.TRACE_DIR / f"{machine.__name__}-failure.ndjson"
    if hasattr(machine, "trace_to") and trace.exists() and trace.stat().st_mtime >= start_wall:
        console.print(f"the failing case's spec-level trace (`ackorder trace-check {trace}`):")
        print_line(str(trace))
    if as_expected:
        console.print(f"[green]{bug} caught as {prop}, as expected[/]")
        return errors.OK
    if bug:
        console.print(f"[bold red]{bug} caught as {prop}, expected {' or '.join(sorted(expected_violations(bug)))}[/]")
    return errors.VIOLATION
