"""`ackorder prove [--json FILE]`: the z3 proofs of spec/proofs.py as a table."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import attrs
from rich.table import Table

from spec.ui import console as make_console


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prove", help="z3: the safety invariants are inductive (any number of messages)",
                       description="Prove every safety property inductive for each green configuration "
                                   "and find a reachable counterexample to induction for each bug variant.")
    p.add_argument("--json", type=Path, metavar="FILE", help="write every result as JSON")
    p.add_argument("--verbose", action="store_true", help="one row per strengthening conjunct too")
    p.set_defaults(func=main)


def run() -> tuple[list, list]:
    """Both abstractions: the write path (spec/proofs.py) and failover (spec/failover/proofs.py)."""
    from spec import proofs as write_path
    from spec.failover import proofs as failover

    green, bugs = [], []
    for module, props_of in ((write_path, write_path.properties), (failover, failover.proved_properties)):
        for name, cfg, _ in module.manifest_configs("green"):
            results = module.prove(name, cfg)
            props = set(props_of(module.Abstract(cfg)))
            empty = module.vacuous_actions(cfg)
            green.append((name, results, props, empty))
        for name, cfg, expected in module.manifest_configs("bug"):
            bugs.append(module.bug_cti(name, cfg, expected))
    return green, bugs


def main(args: argparse.Namespace) -> int:
    from spec.proofs import changed

    console = make_console()
    start = time.perf_counter()
    green, bugs = run()
    table = Table(title="ackorder prove: inductive invariants (z3, unbounded offsets)", title_justify="left")
    for col in ("configuration", "invariant", "result", "seconds"):
        table.add_column(col, justify="right" if col == "seconds" else "left")
    ok = True
    for name, results, props, empty in green:
        strong = [r for r in results if r.invariant not in props]
        for r in results:
            if r.invariant in props or args.verbose or r.result != "proved":
                style = "green" if r.result == "proved" else "bold red"
                table.add_row(name, r.invariant, f"[{style}]{r.result}[/]", f"{r.seconds:.2f}")
        if not args.verbose and all(r.result == "proved" for r in strong):
            table.add_row(name, f"strengthening ({len(strong)} conjuncts)", "[green]proved[/]",
                          f"{sum(r.seconds for r in strong):.2f}")
        if empty:
            table.add_row(name, "vacuity: actions never enabled", f"[bold red]{', '.join(empty)}[/]", "")
        ok &= all(r.result == "proved" for r in results) and not empty
    for r in bugs:
        found = r.result == "CTI"
        style = "green" if found else "bold red"
        table.add_row(r.config, r.invariant, f"[{style}]CTI[/]" if found else f"[{style}]{r.result}[/]",
                      f"{r.seconds:.2f}")
        ok &= found
    console.print(table)
    for r in bugs:
        if r.cti:
            c = r.cti
            console.print(f"[bold]{r.config}[/]: {c['action']} breaks {', '.join(c['violated'])} "
                          f"(pre-state reached in {c['reachable_in']} steps from Init; {r.invariant} violated "
                          f"after {c['property_violated_after']})")
            console.print("    pre : " + ", ".join(f"{k}={v}" for k, v in c["pre"].items()
                                                     if k in changed(c["pre"], c["post"])
                                                     or k in ("W", "C", "F", "D", "off", "status", "recv", "agree")))
            console.print("    post: " + ", ".join(f"{k}={a}->{b}" for k, (a, b) in changed(c["pre"], c["post"]).items()))
    console.print(f"{'all proofs hold and every bug has a CTI' if ok else 'NOT all as expected'} "
                  f"({time.perf_counter() - start:.1f} s)")
    if args.json:
        out = {"green": [{"configuration": n, "results": [attrs.asdict(r) for r in rs], "vacuous": e}
                         for n, rs, _, e in green],
               "bugs": [attrs.asdict(r) for r in bugs], "ok": ok}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if ok else 1
