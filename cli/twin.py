"""`ackorder twin`: the Python twin explored on the same cfgs as TLC, compared with the
manifest's record (`ackorder run` compares it with the TLC run it just made)."""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from cli import errors
from cli.ui import console as make_console
from tla.manifest import load_manifest, select
from tla.twincheck import TwinCheck, twin_check


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("twin", help="explore the Python twin and compare it with TLC's recorded results",
                       description="Explore spec/ (the Python twin) on the cfgs (default: the small ones) and "
                                   "compare outcome, distinct states and depth with tla/manifest.json.")
    p.add_argument("models", nargs="*", metavar="MODEL", help="model names (default: every small model)")
    p.set_defaults(func=main)


def table(checks: list[TwinCheck], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for col in ("model", "twin outcome", "distinct: twin", "TLC", "depth: twin", "TLC", "seconds", "agrees"):
        t.add_column(col, justify="left" if col in ("model", "twin outcome", "agrees") else "right")
    for c in checks:
        style = "green" if c.agrees else "bold red"
        tlc_distinct = "-" if c.tlc_distinct_states is None else f"{c.tlc_distinct_states:,}"
        t.add_row(c.model.model, Text(c.outcome, style=style),
                  f"{c.distinct_states:,}", tlc_distinct if c.compares_distinct else f"({tlc_distinct})",
                  str(c.depth), str(c.tlc_depth), f"{c.seconds:.1f}",
                  Text("yes" if c.agrees else "; ".join(c.problems), style=style))
    t.caption = "(n): not compared — at a violation, the states found depend on the order within a level"
    return t


def main(args: argparse.Namespace) -> int:
    console = make_console()
    models = select(load_manifest(), args.models, None if args.models else "small")
    checks = []
    with console.status("exploring the twin") as status:
        for m in models:
            status.update(f"exploring the twin: {m.model}")
            checks.append(twin_check(m))
    console.print(table(checks, "Python twin vs tla/manifest.json"))
    bad = [c for c in checks if not c.agrees]
    if bad:
        console.print(f"[bold red]{len(bad)} of {len(checks)} model(s) differ between the twin and TLC:[/] "
                      + ", ".join(c.model.model for c in bad))
        return errors.VIOLATION
    console.print(f"[green]the twin agrees with TLC on all {len(checks)} models[/]")
    return errors.OK
