"""`ackorder sim`: one deterministic simulation of the reference store."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.table import Table

from reference.sim.params import draw
from reference.sim.world import World
from spec.config import BUG_NAMES, ConfigError
from spec.ui import console as make_console


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim", help="run one seeded simulation of the reference store",
        description="Simulate a master and its slaves on a virtual clock with a simulated disk, network "
                    "and faults, all drawn from the seed; check every step against the spec.")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--steps", type=int, default=10_000, help="events with faults (then a liveness phase)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="pin a store knob, a fault rate or 'replicas' (repeatable)")
    p.add_argument("--bug", choices=BUG_NAMES, metavar="NAME", help="switch on a seeded defect")
    p.add_argument("--trace", type=Path, metavar="FILE", help="write the spec-level trace as NDJSON")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the summary as JSON")
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


def main(args: argparse.Namespace) -> int:
    console = make_console()
    try:
        overrides = parse_overrides(args.config)
        if args.bug:
            overrides["bug"] = args.bug
        params = draw(args.seed, overrides)
    except ConfigError as err:
        console.print(f"[bold red]error:[/] {err}")
        return 2
    trace = open(args.trace, "w") if args.trace else None
    try:
        world = World(params, check=not args.no_check, trace=trace)
        start = time.perf_counter()
        outcome = world.run(args.steps, liveness=not args.no_liveness)
        seconds = time.perf_counter() - start
    finally:
        if trace:
            trace.close()
    summary = {
        "seed": args.seed, "config": params.describe(), "outcome": outcome.violation or "ok",
        "steps": outcome.steps, "spec_steps": outcome.spec_steps, "sim_ms": outcome.sim_ms,
        "seconds": round(seconds, 3), "steps_per_second": round(outcome.steps / seconds) if seconds else None,
        "statuses": outcome.statuses, "actions": outcome.actions, "trace_hash": outcome.trace_hash,
    }
    table = Table(title=f"simulation, seed {args.seed}", title_justify="left", show_header=False)
    for key in ("outcome", "steps", "spec_steps", "sim_ms", "seconds", "steps_per_second", "trace_hash"):
        table.add_row(key, str(summary[key]))
    table.add_row("config", ", ".join(f"{k}={v}" for k, v in params.describe().items() if k != "seed"))
    table.add_row("statuses", ", ".join(f"{k} {v}" for k, v in outcome.statuses.items()))
    table.add_row("spec actions", ", ".join(f"{k} {v}" for k, v in outcome.actions.items()))
    console.print(table)
    if outcome.message:
        console.print(f"[bold red]{outcome.violation}[/]: {outcome.message}")
        console.print(f"reproduce: ackorder sim --seed {args.seed} --steps {args.steps}"
                      + "".join(f" --config {k}={v}" for k, v in overrides.items() if k != "bug")
                      + (f" --bug {args.bug}" if args.bug else ""))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    expected = getattr(args, "expect_hash", None)
    if expected and expected != outcome.trace_hash:
        console.print(f"[bold red]trace hash {outcome.trace_hash} differs from the expected {expected}[/]")
        return 3
    return 0 if outcome.ok else 1
