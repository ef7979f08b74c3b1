"""`ackorder sim`: one deterministic simulation of the reference store (and the seed
half of `ackorder replay`)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import attrs
from rich.table import Table

from cli.argtypes import natural_int, output_file, positive_int  # noqa: F401  (others import them from here)
from cli import errors
from cli.ui import console as make_console, print_line
from reference.sim.params import draw
from reference.sim.world import Outcome, World
from spec.config import ConfigError, resolve_bug




def add_seed_arguments(p: argparse.ArgumentParser, default_steps: int = 10_000) -> None:
    p.add_argument("--steps", type=positive_int, default=default_steps,
                   help=f"events with faults, then a liveness phase (default {default_steps:,})")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="pin a store knob, a fault rate or 'replicas' (1 to 32 slaves) (repeatable)")
    p.add_argument("--bug", metavar="NAME", help="switch on a seeded defect (BugAckOnWrote or ack_on_wrote_bug)")
    p.add_argument("--trace", type=output_file, metavar="FILE",
                   help="write the spec-level trace as NDJSON (the violating step included)")
    p.add_argument("--json", type=output_file, metavar="FILE", help="write the summary as JSON")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim", help="run one seeded simulation of the reference store",
        description="Simulate a master and its slaves on a virtual clock with a simulated disk, network "
                    "and faults, all drawn from the seed; check every step against the spec. "
                    "Exit 1 on a violation.")
    p.add_argument("--seed", type=natural_int, required=True)
    add_seed_arguments(p)
    p.add_argument("--no-check", action="store_true", help="skip the refinement check (faster)")
    p.add_argument("--no-liveness", action="store_true", help="skip the final liveness phase")
    p.set_defaults(func=main)


def parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--config {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


@attrs.frozen
class SimRun:
    """One simulation as a command reports it."""
    seed: int
    steps: int
    overrides: tuple[tuple[str, str], ...]
    bug: str | None
    outcome: Outcome
    config: dict
    seconds: float

    def reproducer(self) -> str:
        config = "".join(f" --config {k}={v}" for k, v in self.overrides)
        bug = f" --bug {self.bug}" if self.bug else ""
        return (f"ackorder replay --seed {self.seed} --steps {self.steps}{config}{bug} "
                f"--expect-hash {self.outcome.trace_hash}")

    def summary(self) -> dict:
        o = self.outcome
        return {"seed": self.seed, "config": self.config, "outcome": o.violation or "ok", "message": o.message,
                "steps": o.steps, "spec_steps": o.spec_steps, "sim_ms": o.sim_ms, "seconds": round(self.seconds, 3),
                "steps_per_second": round(o.steps / self.seconds) if self.seconds else None,
                "statuses": o.statuses, "actions": o.actions, "faults": o.faults, "guards": o.guards,
                "trace_hash": o.trace_hash,
                "reproducer": self.reproducer()}


def run_sim(seed: int, steps: int, overrides: dict[str, str], bug: str | None = None, check: bool = True,
            liveness: bool = True, trace: Path | None = None) -> SimRun:
    """One seed, run to its end (a violation ends it early)."""
    bug = resolve_bug(bug) if bug else None
    params = draw(seed, {**overrides, **({"bug": bug} if bug else {})})
    out = open(trace, "w") if trace else None
    try:
        world = World(params, check=check, trace=out)
        start = time.perf_counter()
        outcome = world.run(steps, liveness=liveness)
        seconds = time.perf_counter() - start
    finally:
        if out:
            out.close()
    return SimRun(seed, steps, tuple(sorted(overrides.items())), bug, outcome, params.describe(), seconds)


def report(run: SimRun, json_path: Path | None, expect_hash: str | None = None) -> int:
    """Print a run and map it to an exit code: 1 a violation (or another trace than expected)."""
    console = make_console()
    s = run.summary()
    table = Table(title=f"simulation, seed {run.seed}", title_justify="left", show_header=False)
    for key in ("outcome", "steps", "spec_steps", "sim_ms", "seconds", "steps_per_second", "trace_hash"):
        table.add_row(key, str(s[key]))
    table.add_row("config", ", ".join(f"{k}={v}" for k, v in run.config.items() if k != "seed"))
    table.add_row("statuses", ", ".join(f"{k} {v}" for k, v in run.outcome.statuses.items()))
    table.add_row("spec actions", ", ".join(f"{k} {v}" for k, v in run.outcome.actions.items()))
    if run.outcome.faults:
        table.add_row("faults", ", ".join(f"{k} {v}" for k, v in run.outcome.faults.items()))
    if run.outcome.guards:
        table.add_row("bounds reached", ", ".join(f"{k} {v}" for k, v in run.outcome.guards.items()))
    console.print(table)
    if json_path:
        json_path.write_text(json.dumps(s, indent=2) + "\n")
    hash_differs = expect_hash is not None and expect_hash != run.outcome.trace_hash
    if hash_differs:
        console.print(f"[bold red]not the expected run:[/] trace hash {run.outcome.trace_hash} differs from "
                      f"{expect_hash} (another version of ackorder, or another configuration)")
    if run.outcome.violation:
        console.print(f"[bold red]{run.outcome.violation}[/]: {run.outcome.message}")
        console.print("reproduce:")
        print_line(run.reproducer())
        return errors.VIOLATION
    return errors.VIOLATION if hash_differs else errors.OK


def main(args: argparse.Namespace) -> int:
    if args.trace and args.no_check:
        raise ConfigError("--trace needs the refinement check: the trace is the spec steps it replays (drop --no-check)")
    run = run_sim(args.seed, args.steps, parse_overrides(args.config), args.bug, check=not args.no_check,
                  liveness=not args.no_liveness, trace=args.trace)
    return report(run, args.json)
