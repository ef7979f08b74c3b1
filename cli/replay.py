"""`ackorder replay`: run a failure again — a step program Hypothesis printed
(``--program FILE``), or one simulation seed (``--seed``, optionally checking that
it gives the expected trace hash).  Exit 1: the failure reproduced (a violation),
0: it ran clean, 2: the program or arguments are malformed."""

from __future__ import annotations

import argparse
from pathlib import Path

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
    p.add_argument("--expect-hash", metavar="HASH", help="exit 1 unless the run reproduces this trace hash")
    p.set_defaults(func=main)


def replay_file(path: Path, trace: Path | None = None) -> tuple[str | None, str]:
    """(the property violated or None, what to say); ProgramError on a malformed program."""
    try:
        text = path.read_text()
    except OSError as err:
        raise errors.UsageError(f"{path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise errors.UsageError(f"{path}: not a text file") from None
    try:
        replay_program(text, trace)
    except (PropertyViolation, RefinementError) as err:
        return getattr(err, "prop", "refinement"), str(err)
    return None, "the program ran to the end without a violation"


def main(args: argparse.Namespace) -> int:
    if args.seed is not None:
        run = run_sim(args.seed, args.steps, parse_overrides(args.config), args.bug, trace=args.trace)
        return report(run, args.json, args.expect_hash)
    console = make_console()
    try:
        prop, message = replay_file(args.program, args.trace)
    except ProgramError as err:
        raise errors.UsageError(f"{args.program}: {err}") from None
    if prop is None:
        console.print(f"[green]{message}[/]")
        return errors.OK
    console.print(f"[bold red]reproduced: {prop}[/]\n{message}")
    return errors.VIOLATION
