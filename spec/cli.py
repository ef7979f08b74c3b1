"""The `ackorder` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spec import twin
from tla import commands as tlc_commands
from tla.manifest import MANIFEST_PATH


def cmd_run(args: argparse.Namespace) -> int:
    """The main job of `make run`: every TLC model, the twin cross-check, a
    short fuzz campaign of the simulator on local[*], then the z3 proofs."""
    tlc_args = argparse.Namespace(models=[], list=False, manifest=MANIFEST_PATH, workers=args.workers, size=None, kind=None,
                                  json=args.json, traces="auto", check_counts=False, update_manifest=False)
    status = tlc_commands.main(tlc_args)
    twin_status = twin.main(argparse.Namespace(models=[]))
    from spark_fuzz import cli as fuzz_cli

    fuzz_args = build_parser().parse_args(["fuzz", "--seeds", str(args.fuzz_seeds), "--out", str(args.fuzz_out)])
    fuzz_status = fuzz_cli.main(fuzz_args)
    from spec import prove_cli

    prove_status = prove_cli.main(argparse.Namespace(json=None, verbose=False))
    return status or twin_status or fuzz_status or prove_status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ackorder",
        description="Formal model and reference implementation of a RocketMQ-style broker's write path: "
                    "an acknowledgement never runs ahead of the data it vouches for.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    tlc_commands.add_parser(sub)
    twin.add_parser(sub)
    from reference.real import cli as real_cli
    from reference.sim import cli as sim_cli

    sim_cli.add_parser(sub)
    real_cli.add_parsers(sub)
    from reference.real import chaos_cli

    chaos_cli.add_parser(sub)
    from stateful_tests import replay

    replay.add_parser(sub)
    from spark_fuzz import cli as fuzz_cli

    fuzz_cli.add_parser(sub)
    from reference.bench import cli as bench_cli

    bench_cli.add_parser(sub)
    from spec import prove_cli

    prove_cli.add_parser(sub)
    run = sub.add_parser("run", help="the main job: every TLC model, the twin cross-check, a fuzz campaign, the proofs")
    run.add_argument("--workers", type=int, default=None)
    run.add_argument("--fuzz-seeds", type=int, default=2_000, help="seeds of the closing fuzz campaign")
    run.add_argument("--fuzz-out", type=Path, default=Path(".ackorder/fuzz-run"))
    run.add_argument("--json", default=None, type=Path, metavar="FILE")
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
