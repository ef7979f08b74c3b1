"""TLC's own coverage of the spec's branches: `-coverage` counts, mapped to the labels of
tla/AckOrder.tla (spec/coverage.py names the same branches for real runs).

TLC reports, per action it split Next into, the distinct and total states it generated
("<AO!Flush line ...>: 12:340", message 2772/2773), and under it how often each expression was
evaluated ("line 99, col 13 to ... of module AckOrder: 57", message 2221).  A label's branch body is
evaluated exactly when TLC takes that branch, so the count of the expression a label names is how
often TLC took the branch; a one-branch action gets its distinct:total.
"""

from __future__ import annotations

import re
from pathlib import Path

from spec.coverage import BRANCHES
from tla.manifest import TLA_DIR

_LABEL = re.compile(r"\b([A-Z]\w*)(?:\([\w, ]*\))?::")
_EXPR = re.compile(r"^[ |]*line (\d+), col (\d+) to line \d+, col \d+ of module (\w+): (\d+)$")


def label_spans(path: Path = TLA_DIR / "AckOrder.tla") -> dict[str, tuple[tuple[int, int], int]]:
    """label -> ((line, column) where the expression it names starts, last line of that expression),
    as TLC counts them; the expression ends before the next line indented no deeper than the
    label's own line (THEN/ELSE/CASE arm/conjunct layout, as the spec is written)."""
    lines = path.read_text().split("\n")

    def indent(text: str) -> int:
        return len(text) - len(text.lstrip())

    out: dict[str, tuple[tuple[int, int], int]] = {}
    for n, line in enumerate(lines):
        code = line.split("\\*", 1)[0]
        for m in _LABEL.finditer(code):
            row, col = n, m.end()
            while not lines[row][col:].strip() or lines[row][col:].lstrip().startswith("\\*"):
                row, col = row + 1, 0         # the expression starts on a later line
            start = (row + 1, col + indent(lines[row][col:]) + 1)
            last = row
            while last + 1 < len(lines):
                following = lines[last + 1]
                if following.strip() and (indent(following) <= indent(line)
                                          or following.strip().startswith(("[]", "ELSE"))):
                    break                     # the next branch, arm or conjunct
                last += 1
            out[m.group(1)] = (start, last + 1)
    return out


def branch_counts(log_text: str, module: str = "AckOrder") -> dict[str, str]:
    """branch key -> how often TLC took it, from a -tool log of a run with -coverage (its last
    report): the evaluations of the last conjunct TLC reports inside the labelled expression
    (TLC reports the conjuncts of a list, not the list; the last one is evaluated once for each
    state the branch generates).  Expression counts are keyed by place in the
    module, so a branch is counted wherever TLC listed it (2.15 lists the actions of an INSTANCE
    under one heading).  A
    one-branch action is counted by its last conjunct, labelled ``<Action>Taken``; the branches of
    TakeReport are shared by ReplicaAck and ForgedAck, and counted for both together."""
    spans = label_spans(TLA_DIR / f"{module}.tla")
    counts: dict[tuple[int, int], int] = {}
    nested: set[tuple[int, int]] = set()          # sub-expressions TLC lists under another ("|line ...")
    for line in _coverage_lines(log_text):
        if (m := _EXPR.match(line)) and m.group(3) == module:
            where = (int(m.group(1)), int(m.group(2)))
            counts[where] = max(counts.get(where, 0), int(m.group(4)))
            if line.lstrip(" ").startswith("|"):
                nested.add(where)
    out: dict[str, str] = {}
    for action, labels in BRANCHES.items():
        shared = " (with ForgedAck)" if action == "ReplicaAck" and labels else \
            " (with ReplicaAck)" if action == "ForgedAck" else ""
        for label in labels or (f"{action}Taken",):
            if label not in spans:
                continue
            (start, last) = spans[label]
            inside = [w for w in counts if start <= w and w[0] <= last]
            top = [w for w in inside if w not in nested] or inside
            key = f"{action}/{label}" if labels else action
            out[key] = f"{counts[max(top)] if top else 0:,}{shared}"
    return out


def _coverage_lines(log_text: str) -> list[str]:
    """The lines of the last coverage report in a -tool log (tags stripped)."""
    lines = [ln for ln in log_text.split("\n") if not ln.startswith("@!@!@")]
    starts = [i for i, ln in enumerate(lines) if ln.startswith("The coverage statistics at")]
    if not starts:
        return []
    out = []
    for ln in lines[starts[-1] + 1:]:
        if ln.startswith("End of statistics"):
            break
        out.append(ln)
    return out
