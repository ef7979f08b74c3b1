"""Tables for TLC runs and counterexamples (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from spec.cfgfile import load_cfg, twin_model_from_cfg
from tla.diff import changes
from tla.tlc import TlcRun
from tla.trace import TraceMismatch, replay_in_twin

MAX_VALUE_CHARS = 320


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def results_table(runs: list[TlcRun], title: str = "TLC model checks") -> Table:
    table = Table(title=title, title_justify="left")
    for col, justify in [("model", "left"), ("expected", "left"), ("outcome", "left"),
                         ("distinct states", "right"), ("depth", "right"), ("seconds", "right"),
                         ("states/s", "right")]:
        table.add_column(col, justify=justify)
    for run in runs:
        style = "green" if run.as_expected else "bold red"
        rate = run.states_per_second
        table.add_row(
            run.model.model, run.model.expected, Text(run.outcome, style=style),
            _num(run.distinct_states), _num(run.depth), f"{run.seconds:.1f}",
            "-" if rate is None else f"{rate:,.0f}",
        )
    return table


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def counterexample_table(run: TlcRun) -> Table:
    """One row per step: the action (parameters from the twin) and what changed."""
    labels: list[str] = [s.action for s in run.trace]
    try:
        cfg, bounds = twin_model_from_cfg(load_cfg(run.model.cfg_path))
        labels = [step.label for step in replay_in_twin(cfg, bounds, list(run.trace))]
    except TraceMismatch as err:
        labels = [f"{s.action} (twin: {err})" if i == len(run.trace) - 1 else s.action
                  for i, s in enumerate(run.trace)]
    table = Table(title=f"Counterexample: {run.model.model} violates {run.outcome}",
                  title_justify="left", show_lines=True)
    table.add_column("step", justify="right")
    table.add_column("action")
    table.add_column("variables that changed")
    previous: dict[str, str] = {}
    for step, label in zip(run.trace, labels):
        current = step.as_dict()
        if not current:
            table.add_row(str(step.number or ""), label, "")
            continue
        names = [k for k in current if previous or k not in ("aux_ctrs", "inv_responses")]
        lines = [line for k in names for line in changes(k, previous.get(k), current[k])]
        table.add_row(str(step.number), label, Text("\n".join(_shorten(line) for line in lines)))
        previous = current
    return table


def print_errors(console: Console, run: TlcRun) -> None:
    for error in run.errors:
        console.print(f"[bold red]{run.model.model}: {error}[/]")
    if run.log_path:
        console.print(f"  full TLC output: {run.log_path}")
