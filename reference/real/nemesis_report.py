"""The report of a nemesis run (reference/real/nemesis_chaos.py): report.json, report.md, report.html
and latency.png, a latency-over-time plot with each fault's window shaded, as OpenChaos draws its
latency-point graph.  matplotlib draws the plot (Agg, no display); markdown-it-py renders the HTML
from the same Markdown, so the two never disagree."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from reference.real.nemesis import NEMESES

COLOURS = dict(zip(NEMESES, ("#d62728", "#1f77b4", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f",
                             "#bcbd22")))
MAX_POINTS = 200_000      # the plot thins a long run's PUT_OKs to this many points


def plot(report, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(14, 5), dpi=100)
    step = max(1, len(report.latency) // MAX_POINTS)
    points = report.latency[::step]
    ax.scatter([t for t, _, _ in points], [max(ms, 0.1) for _, ms, _ in points], s=1, c="#2ca02c", alpha=0.4,
               label="PUT_OK latency")
    seen = set()
    for f in report.faults:
        ax.axvspan(f.start_s, f.heal_s, color=COLOURS.get(f.kind, "#cccccc"), alpha=0.25, lw=0)
        seen.add(f.kind)
    for a, b in report.unavailable:
        ax.axvspan(a, b, ymin=0, ymax=0.03, color="black", lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the start")
    ax.set_ylabel("latency ms (first send to PUT_OK)")
    ax.set_title("PUT_OK latency; fault windows shaded; black ticks: no PUT_OK for longer than "
                 f"{report.options.get('unavailable_ms')} ms")
    handles = [Patch(color=COLOURS[k], alpha=0.4, label=k) for k in NEMESES if k in seen]
    ax.legend(handles=handles, loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def markdown(report, out_json: dict, image: str) -> str:
    o = out_json
    lines = [f"# ackorder chaos --failover --nemesis {','.join(report.options['nemesis'])} "
             f"--seed {report.options['seed']}", "",
             f"**{'valid' if report.valid else 'INVALID'}**: {o['faults']} faults in {o['seconds']} s, "
             f"{o['acked']} PUT_OK, lost {o['lost']}, corrupt {o['corrupt']}, diverged {o['diverged']}, "
             f"consumed then lost {o['consumed_lost']}, epoch violations {len(o['epoch_violations'])}, "
             f"controller violations {len(o['controller_violations'])} in {o['controller_polls']} polls"
             + (f", stuck: {o['stuck']}" if o["stuck"] else "") + ".", "",
             f"Failovers {o['failovers']}: p50 {o['failover_ms_p50']} ms, p99 {o['failover_ms_p99']} ms. "
             f"Unavailability windows (no PUT_OK for over {report.options['unavailable_ms']} ms): "
             f"{o['unavailable_windows']}, the longest {o['unavailable_max_s']} s.", "",
             "| nemesis | faults | acked | lost | failovers | failover p50 / p99 ms | unavailable windows | "
             "unavailable s (max) | not settled |", "|---|---|---|---|---|---|---|---|---|"]
    for kind, row in o["per_nemesis"].items():
        lines.append(f"| {kind} | {row['faults']} | {row['acked']} | {row['lost']} | {row['failovers']} | "
                     f"{row['failover_ms_p50']} / {row['failover_ms_p99']} | {row['unavailable_windows']} | "
                     f"{row['unavailable_s']} ({row['unavailable_max_s']}) | {row['not_settled']} |")
    lines += ["", f"![latency over time]({image})", "", "## Faults", "",
              "| # | nemesis | what | start s | healed s | settled s | master before → after | failover ms |",
              "|---|---|---|---|---|---|---|---|"]
    for f in report.faults[:500]:
        lines.append(f"| {f.n} | {f.kind} | {f.what.replace('|', chr(92) + '|')} | {f.start_s} | {f.heal_s} | {f.settled_s} | "
                     f"b{f.master_before} → b{f.master_after} | {f.failover_ms if f.failover else ''} |")
    for title, items in (("Epoch violations", report.epoch_violations),
                         ("Controller violations", report.controller_violations)):
        if items:
            lines += ["", f"## {title}", ""] + [f"- {v}" for v in items[:50]]
    return "\n".join(lines) + "\n"


def write_report(report, directory: Path) -> None:
    from markdown_it import MarkdownIt

    directory.mkdir(parents=True, exist_ok=True)
    out = report.to_json()
    (directory / "report.json").write_text(json.dumps(out, indent=2) + "\n")
    plot(report, directory / "latency.png")
    md = markdown(report, out, "latency.png")
    (directory / "report.md").write_text(md)
    png = base64.b64encode((directory / "latency.png").read_bytes()).decode()
    html = MarkdownIt("commonmark").enable("table").render(md.replace("(latency.png)",
                                                                      f"(data:image/png;base64,{png})"))
    (directory / "report.html").write_text("<!doctype html><meta charset=utf-8><title>ackorder nemesis run</title>"
                                           "<style>body{font-family:sans-serif;max-width:75em;margin:auto}"
                                           "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
                                           "img{max-width:100%}</style>\n" + html)
