"""Console tables of spec coverage (spec/coverage.py): branches of every action and property
antecedents, unreached ones flagged; shared by fuzz-report, stateful, trace-check and tlc."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from cli.ui import GAP


def branch_table(rows, runs_word: str | None, tlc: dict | None = None,
                 title: str = "Spec coverage: branches") -> Table:
    """``tlc``: branch key -> TLC's own count for it (``ackorder tlc --coverage``), shown beside;
    ``runs_word`` None: TLC's column only (no real runs to show)."""
    table = Table(title=title, title_justify="left")
    table.add_column("action")
    table.add_column("branch")
    if runs_word is not None:
        table.add_column(runs_word, justify="right")
        table.add_column("times", justify="right")
    if tlc is not None:
        table.add_column("TLC: times taken", justify="right")
    if runs_word is not None:
        table.add_column("")
    for r in rows:
        cells = [r.group, r.name or "(one branch)"]
        if runs_word is not None:
            cells += [f"{r.runs:,}", f"{r.times:,}"]
        if tlc is not None:
            cells.append(tlc.get(r.key, "-"))
        if runs_word is not None:
            cells.append(Text("" if r.reached else f"unreached: {r.note}", style=GAP))
        table.add_row(*cells)
    return table


def antecedent_table(rows, runs_word: str) -> Table:
    table = Table(title="Spec coverage: property antecedents", title_justify="left")
    for col, justify in [("property", "left"), ("antecedent", "left"), (runs_word, "right"), ("times", "right"),
                         ("", "left")]:
        table.add_column(col, justify=justify)
    for r in rows:
        table.add_row(r.group, r.name, f"{r.runs:,}", f"{r.times:,}",
                      Text("" if r.reached else "unreached", style=GAP))
    return table


def print_coverage(console, branch_rows, antecedent_rows, runs_word: str, tlc: dict | None = None) -> None:
    console.print(branch_table(branch_rows, runs_word, tlc))
    console.print(antecedent_table(antecedent_rows, runs_word))
    unreached = [r.key for r in branch_rows if not r.reached]
    if unreached:
        console.print(f"[bold]{len(unreached)} of {len(branch_rows)} branches unreached:[/] {', '.join(unreached)}")
