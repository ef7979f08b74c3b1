"""A mutation campaign's report: Markdown, and HTML through markdown-it (spark_fuzz/report.py)."""

from __future__ import annotations

import json
from pathlib import Path

from spark_fuzz.mutation.killsuite import STAGES as STAGE_NAMES
from spark_fuzz.report import html_page

SURVIVORS_SHOWN = 50


def markdown(summary: dict) -> str:
    out = summary["outcomes"]
    lines = [f"# Mutation campaign {summary['campaign']}", "",
             f"{summary['mutants']} mutants of {len(summary['modules'])} module(s), operators "
             f"`{summary['operators']}`" + (f", a sample of {summary['sample']} (seed {summary['sample_seed']})"
                                          if summary["sample"] else "") +
             f"; kill suite: the module's unit tests, then {summary['suite']['fuzz_seeds']} seeds of "
             f"{summary['suite']['fuzz_steps']} steps per simulation model, then the Hypothesis machines under `ci`, "
             f"then (the real runtime's) chaos runs. {summary['seconds']} s of wall time "
             f"this run, {summary['cpu_wall_s']} s of mutant time in all.", "",
             "| outcome | mutants |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(out.items())]
    lines += ["", "Killed by: " + (", ".join(f"{k} {v}" for k, v in sorted(summary["killed_by"].items())) or "none"),
              "", "## Score per module (killed / (mutants - equivalent - error))", "",
              "| module | mutants | killed | survived | equivalent | error | score % |", "|---|---|---|---|---|---|---|"]
    for module, s in summary["scores"].items():
        lines.append(f"| `{module}` | {s['mutants']} | {s['killed']} | {s['survived']} | {s['equivalent']} | "
                     f"{s['error']} | {s['score'] if s['score'] is not None else '-'} |")
    ack = summary.get("ack_deciding")
    if ack and ack["mutants"]:
        lines += ["", f"The functions that decide an acknowledgement (`mutants.ACK_DECIDING`: release, deadlines, "
                  f"the ack check, confirmOffset, SyncStateSet membership): {ack['mutants']} mutants, {ack['killed']} "
                  f"killed, {ack['survived']} survived, {ack['equivalent']} equivalent, {ack['error']} error; "
                  f"score {ack['score'] if ack['score'] is not None else '-'}% (the goal is 100)."]
    lines += ["", f"## Survivors ({len(summary['survivors'])})", ""]
    for s in summary["survivors"][:SURVIVORS_SHOWN]:
        closest = json.loads(s["closest"]) if s["closest"] else {}
        lines += [f"`{s['key']}` in `{s['definition']}` (line {s['line']}); every stage passed: "
                  + ", ".join(f"{k} {v['s']} s" for k, v in closest.items()), "", "```diff", s["diff"].rstrip(), "```", ""]
    if len(summary["survivors"]) > SURVIVORS_SHOWN:
        lines.append(f"... and {len(summary['survivors']) - SURVIVORS_SHOWN} more (summary.json).")
    if summary.get("contradicted"):
        lines += ["", f"## Reviewed as equivalent, yet killed ({len(summary['contradicted'])})", "",
                  "The review in `spark_fuzz/mutation/equivalent.json` is wrong about these (or the checks got "
                  "better): remove the claims.", ""]
        lines += [f"- `{c['key']}` killed by {c['killed_by']}; the claim was: {c['reason']}" for c in summary["contradicted"]]
    if summary.get("guards"):
        lines += ["", f"## Which checks reach each guard ({len(summary['guards'])} conditions negated, every stage run)",
                  "", "A guard whose negation only the unit tests fail is one no simulator or machine drives the "
                  "input of (issue 36).", "", "| guard | " + " | ".join(STAGE_NAMES) + " |",
                  "|---|" + "---|" * len(STAGE_NAMES)]
        for g in sorted(summary["guards"], key=lambda g: (g["module"], g["line"])):
            cells = [_cell(g["stages"].get(stage)) for stage in STAGE_NAMES]
            lines.append(f"| `{g['module']}:{g['line']}` `{g['definition']}` | " + " | ".join(cells) + " |")
    lines += ["", f"## Equivalent mutants ({len(summary['equivalents'])}, reviewed in "
                  "`spark_fuzz/mutation/equivalent.json`)", ""]
    for e in summary["equivalents"]:
        lines += [f"`{e['key']}`: {e['reason']}", "", "```diff", e["diff"].rstrip(), "```", ""]
    return "\n".join(lines) + "\n"


def _cell(stage: dict | None) -> str:
    if stage is None:
        return "-"
    return {"fail": "**kills**", "timeout": "**kills** (timeout)", "pass": "passes"}[stage["verdict"]]


def write_report(out: Path, summary: dict) -> list[Path]:
    text = markdown(summary)
    md, page = out / "mutation-report.md", out / "mutation-report.html"
    md.write_text(text)
    page.write_text(html_page(f"Mutation campaign {summary['campaign']}", text))
    return [md, page]
