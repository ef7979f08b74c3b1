"""`ackorder twin`: explore the Python twin on the same cfgs TLC checks and
compare with tla/manifest.json (outcome, distinct states, depth)."""

from __future__ import annotations

import argparse

import attrs
from spec.ui import console as make_console
from rich.table import Table
from rich.text import Text

from spec.cfgfile import load_cfg
from spec.explore import explore_cfg
from tla.manifest import ManifestError, Model, load_manifest, select


@attrs.frozen
class TwinCheck:
    model: Model
    outcome: str
    distinct_states: int
    depth: int
    seconds: float
    also_violated: tuple[str, ...] = ()

    @property
    def problems(self) -> list[str]:
        m = self.model
        out = []
        if self.outcome != m.expected:
            out.append(f"outcome {self.outcome}, expected {m.expected}")
        if m.kind == "green":
            if self.distinct_states != m.distinct_states:
                out.append(f"{self.distinct_states} distinct states, TLC {m.distinct_states}")
            if self.depth != m.depth:
                out.append(f"depth {self.depth}, TLC {m.depth}")
        elif self.outcome == m.expected and m.counts_are_stable and self.depth != m.depth:
            out.append(f"counterexample of {self.depth} states, TLC {m.depth}")
        return out


def check(model: Model) -> TwinCheck:
    if model.is_failover:
        from spec.failover.explore import explore_failover_cfg

        result = explore_failover_cfg(load_cfg(model.cfg_path))
    else:
        result = explore_cfg(load_cfg(model.cfg_path))
    also = result.violation.also_violated if result.violation else ()
    depth = len([s for lab, s in result.violation.trace if lab != "Stuttering" and not lab.startswith("Cycle")]) \
        if result.violation else result.depth
    return TwinCheck(model, result.outcome, result.distinct_states, depth, result.seconds, also)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("twin", help="check the Python twin against TLC's recorded results",
                       description="Explore spec/ (the Python twin) on the cfgs (default: the small ones) and "
                                   "compare outcome, distinct states and depth with tla/manifest.json.")
    p.add_argument("models", nargs="*", metavar="MODEL", help="model names (default: every small model)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    console = make_console()
    try:
        size = None if args.models else "small"
        models = select(load_manifest(), args.models, size)
    except ManifestError as err:
        console.print(f"[bold red]error:[/] {err}")
        return 2
    table = Table(title="Python twin vs TLC (tla/manifest.json)", title_justify="left")
    for col in ("model", "expected", "twin outcome", "distinct (twin/TLC)", "depth (twin/TLC)", "seconds"):
        table.add_column(col)
    failures = 0
    with console.status("exploring the twin") as status:
        for m in models:
            status.update(f"exploring the twin: {m.model}")
            c = check(m)
            failures += bool(c.problems)
            table.add_row(m.model, m.expected, Text(c.outcome, style="red" if c.problems else "green"),
                          f"{c.distinct_states:,} / {m.distinct_states or 0:,}", f"{c.depth} / {m.depth}",
                          f"{c.seconds:.1f}")
            for problem in c.problems:
                console.log(f"[red]{m.model}: {problem}[/]")
    console.print(table)
    if failures:
        console.print(f"[bold red]{failures} model(s) differ between the twin and TLC[/]")
        return 1
    console.print(f"[green]the twin agrees with TLC on all {len(models)} models[/]")
    return 0
