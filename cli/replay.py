"""`ackorder replay`: run a failure again — a step program Hypothesis printed
(``--program FILE``), or one simulation seed (``--seed``, optionally checking that
it gives the expected trace hash).  Exit 1: the failure reproduced (a violation),
0: it ran clean, 2: the program or arguments are malformed."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.argtypes import output_file, trace_hash
from cli import errors
from cli.sim import add_seed_arguments, natural_int, parse_overrides, report, run_sim
from cli.ui import console as make_console
from reference.refinement import PropertyViolation, RefinementError
from stateful_tests.replay import ProgramError, replay_program


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a failing Hypothesis program or a simulation seed",
                       description=__doc__.split("\n\n")[0].replace("\n", " ").split(": ", 1)[1])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--program", type=Path, metavar="FILE", help="a step program Hypothesis printed")
    what.add_argument("--seed", type=natural_int, help="a simulation seed")
    add_seed_arguments(p)
    p.add_argument("--expect-hash", metavar="HASH", type=trace_hash,
                   help="exit 1 unless the run reproduces this trace hash")
    p.add_argument("--failover", action="store_true",
                   help="the seed is a failover campaign's (reference/failover/drive.py), not the write path's")
    p.add_argument("--controllers", action="store_true",
                   help="the seed is a controllers campaign's (reference/failover/controllers_sim.py)")
    p.add_argument("--emit-test", type=output_file, metavar="FILE",
                   help="write the failure's spec behaviour as a pytest file driving the reference cores")
    p.set_defaults(func=main, steps=None)      # None: not given (a program has no steps to count)


SEED_STEPS = 10_000      # --steps when a seed is replayed and none is given (as `ackorder sim`)
SEED_ONLY = ("steps", "config", "bug", "expect_hash", "json")   # what a program, which pins its own, cannot take


def replay_file(path: Path, trace: Path | None = None) -> tuple[str | None, str]:
    """(the property violated or None, what to say); ProgramError on a malformed program."""
    try:
        text = path.read_text()
    except OSError as err:
        raise errors.UsageError(f"{path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise errors.UsageError(f"{path}: not a text file") from None
    from stateful_tests.failover_machine import FailoverViolation

    try:
        replay_program(text, trace)
    except (PropertyViolation, RefinementError, FailoverViolation) as err:
        return getattr(err, "prop", "refinement"), str(err)
    return None, "the program ran to the end without a violation"


def main(args: argparse.Namespace) -> int:
    import tempfile

    if args.emit_test and args.trace is None:
        # the trace only feeds the emitted test: written to a directory that goes with the command
        with tempfile.TemporaryDirectory(prefix="ackorder-emit-") as scratch:
            return _main(args, Path(scratch) / "failure.ndjson")
    return _main(args, args.trace)


def _main(args: argparse.Namespace, trace: Path | None) -> int:
    if args.program is not None:
        given = [f"--{flag.replace('_', '-')}" for flag in SEED_ONLY if getattr(args, flag) not in (None, [])]
        if given or args.failover or args.controllers:
            model = ["--failover"] if args.failover else ["--controllers"]
            raise errors.UsageError(f"{', '.join(given or model)}: a seed's, not a program's (a program "
                                    "pins its machine, configuration and steps itself)")
    elif args.steps is None:
        args.steps = SEED_STEPS
    if args.failover and args.controllers:
        raise errors.UsageError("--failover and --controllers: one model at a time")
    if args.failover:
        return replay_failover(args)
    if args.controllers:
        return replay_controllers(args)
    if args.seed is not None:
        run = run_sim(args.seed, args.steps, parse_overrides(args.config), args.bug, trace=trace)
        code = report(run, args.json, args.expect_hash)
        what = f"ackorder replay --seed {args.seed} --steps {args.steps}" + (f" --bug {run.bug}" if run.bug else "")
    else:
        console = make_console()
        try:
            prop, message = replay_file(args.program, trace)
        except ProgramError as err:
            raise errors.UsageError(f"{args.program}: {err}") from None
        if prop is None:
            console.print(f"[green]{message}[/]")
            code = errors.OK
        else:
            console.print(f"[bold red]reproduced: {prop}[/]\n{message}")
            code = errors.VIOLATION
        what = f"ackorder replay --program {args.program}"
    if args.emit_test and code == errors.VIOLATION and args.program is not None and _is_failover_program(args.program):
        args.emit_test.write_text(failover_program_test_text(args.program.read_text(), prop,
                                                             f"{what} --emit-test {args.emit_test}"))
        make_console().print(f"{args.emit_test}: a pytest that replays the program to {prop}, and its trace "
                             "out of the spec")
    elif args.emit_test and code == errors.VIOLATION:
        emit(args.emit_test, trace, f"{what} --emit-test {args.emit_test}")
    elif args.emit_test:
        raise errors.UsageError("--emit-test: the run did not fail, there is no counterexample to write")
    return code


def seed_verdict(console, run, expect_hash: str | None) -> int:
    """A replayed failover or controllers seed: its last actions, its hash, and the exit code."""
    for label in run.labels[-12:]:
        console.print(f"  {label}")
    console.print(f"seed {run.seed}: {run.steps} steps, trace hash {run.trace_hash}, counts {run.counts}")
    if expect_hash and expect_hash != run.trace_hash:
        console.print(f"[bold red]trace hash {run.trace_hash}, expected {expect_hash}[/]")
        return errors.VIOLATION
    if run.violation:
        console.print(f"[bold red]reproduced: {run.violation}[/]\n{run.detail}")
        return errors.VIOLATION
    console.print("[green]no violation[/]")
    return errors.OK


def replay_controllers(args: argparse.Namespace) -> int:
    """One controllers seed again: its outcome, the last actions, the trace hash."""
    from reference.failover.controllers_sim import simulate
    from spec.config import resolve_bug
    from spec.controllers.config import CONTROLLERS_BUG_NAMES

    if args.seed is None:
        raise errors.UsageError("--controllers replays a seed: give --seed")
    if args.config or args.trace is not None or args.emit_test is not None or args.json is not None:
        raise errors.UsageError("--controllers takes --seed, --steps, --bug and --expect-hash only")
    bug = resolve_bug(args.bug, CONTROLLERS_BUG_NAMES) if args.bug else None
    run = simulate(args.seed, args.steps, (bug,) if bug else ())
    console = make_console()
    return seed_verdict(console, run, args.expect_hash)


def replay_failover(args: argparse.Namespace) -> int:
    """One failover seed again: its outcome, the last actions, the trace hash."""
    from reference.failover.drive import simulate
    from spec.config import resolve_bug
    from spec.failover.config import FAILOVER_BUG_NAMES

    from reference.failover.drive import trace_lines

    if args.seed is None:
        raise errors.UsageError("--failover replays a seed: give --seed")
    if args.config:
        raise errors.UsageError("--failover takes --seed, --steps, --bug, --expect-hash, --trace and --emit-test only")
    bug = resolve_bug(args.bug, FAILOVER_BUG_NAMES) if args.bug else None
    states: list = []
    run = simulate(args.seed, args.steps, (bug,) if bug else (), states=states)
    command = f"ackorder replay --failover --seed {args.seed} --steps {args.steps}" + (f" --bug {bug}" if bug else "")
    console = make_console()
    if args.trace is not None:
        args.trace.write_text("".join(trace_lines(run, states, command)))
        console.print(f"{args.trace}: the failover trace ({len(run.labels)} steps; `ackorder trace-check` reads it)")
    if args.emit_test is not None:
        if not (bug and run.violation):
            raise errors.UsageError("--emit-test: a failover seed becomes a test when it fails with a --bug switch")
        args.emit_test.write_text(failover_test_text(args.seed, args.steps, bug, run, command))
        console.print(f"{args.emit_test}: a pytest that reproduces {run.violation} with {bug} and none without it")
    return seed_verdict(console, run, args.expect_hash)


def _is_failover_program(path: Path) -> bool:
    return path.read_text().lstrip().startswith("state = FailoverMachine")


def failover_program_test_text(program: str, prop: str, command: str) -> str:
    """A failing failover machine program (`ackorder stateful --machine failover`) as a standalone
    pytest: the program replayed through the reference's FailoverMachine reaches ``prop``, and the
    spec with every switch off rejects its trace (a liveness property aside)."""
    return f'''"""A FailoverMachine program that violates {prop}, replayed through the reference.

Generated by `{command}`: regenerate rather than edit.
"""

import pytest

from spec.failover.tracecheck import check_failover_lines
from stateful_tests.failover_machine import FailoverViolation
from stateful_tests.replay import replay_program

PROGRAM = {program!r}
PROPERTY = {prop!r}


def test_the_program_violates_the_property_and_its_trace_leaves_the_spec(tmp_path):
    trace = tmp_path / "trace.ndjson"
    with pytest.raises(FailoverViolation) as caught:
        replay_program(PROGRAM, trace)
    assert caught.value.prop == PROPERTY, caught.value
    if PROPERTY not in ("MasterEventuallyStable", "EveryRequestAnswered"):   # no finite trace shows liveness
        with open(trace) as f:
            assert not check_failover_lines(f, str(trace)).ok
'''


def failover_test_text(seed: int, steps: int, bug: str, run, command: str) -> str:
    """A failing failover seed as a standalone pytest against the reference: with the switch the
    seed's schedule drives the cores to the violation, and its trace is rejected by the spec with every
    switch off; without the switch the same seed keeps every property."""
    return f'''"""{bug} violates {run.violation}: failover seed {seed}, driven through the reference cores.

Generated by `{command} --emit-test FILE`: regenerate rather than edit.  With the switch on, the
seeded schedule (reference/failover/drive.py) reaches {run.violation} in {len(run.labels)} steps, and the
spec with every switch off rejects the trace; with it off, the same seed keeps every property.
"""

from reference.failover.drive import simulate, trace_lines
from spec.failover.tracecheck import check_failover_lines

SEED, STEPS, BUG, PROPERTY = {seed!r}, {steps!r}, {bug!r}, {run.violation!r}


def test_the_bug_reproduces_and_its_trace_leaves_the_spec():
    states = []
    run = simulate(SEED, STEPS, (BUG,), states=states)
    assert run.violation == PROPERTY, (run.violation, run.detail)
    if PROPERTY not in ("MasterEventuallyStable", "EveryRequestAnswered"):   # no finite trace shows liveness
        assert not check_failover_lines(trace_lines(run, states), "seed").ok


def test_without_the_bug_the_same_seed_keeps_every_property():
    run = simulate(SEED, STEPS)
    assert run.violation is None, (run.violation, run.detail)
'''


def emit(path: Path, trace: Path, command: str) -> None:
    from cli.emit import emit_for_trace
    from reference.sim.drive import DriveError

    console = make_console()
    try:
        emitted = emit_for_trace(trace, command)
    except (DriveError, ValueError) as err:
        console.print(f"[bold red]the failure could not be driven through the cores as a test:[/] {err}")
        return
    path.write_text(emitted.text)
    console.print(f"{path}: {len(emitted.run.program)} environment steps drive {len(emitted.driven)} spec steps "
                  f"to {emitted.run.violation}")
