"""`ackorder fuzz-report`: a campaign's ledger as Markdown and HTML with PNG plots.

Plots: violations over seed index (cumulative, one line per property),
spec-action coverage per configuration (a heatmap: which actions each
configuration exercised, as a share of its steps), and throughput per
executor (seeds per second of simulation time in each Python worker).
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")            # files only: no display on a build machine
import matplotlib.pyplot as plt  # noqa: E402

from spark_fuzz import ledger  # noqa: E402

CONFIG_KEYS = ("flush_disk_type", "broker_role", "ack_policy")


def _config_key(config_json: str) -> str:
    c = json.loads(config_json or "{}")
    return "/".join(str(c.get(k, "?")) for k in CONFIG_KEYS)


def plot_violations(rows: list[dict], path: Path) -> None:
    rows = sorted(rows, key=lambda r: r["index"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    props = sorted({r["outcome"] for r in rows} - {"ok"})
    for prop in props:
        xs, ys, n = [], [], 0
        for r in rows:
            if r["outcome"] == prop:
                n += 1
                xs.append(r["index"])
                ys.append(n)
        ax.step(xs, ys, where="post", label=prop)
    if not props:
        ax.text(0.5, 0.5, f"no violations in {len(rows):,} seeds", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("seed index")
    ax.set_ylabel("violations so far")
    if props:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def coverage(rows: list[dict]) -> tuple[list[str], list[str], list[list[float]]]:
    per_config: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        per_config[_config_key(r["config"])].update(json.loads(r["actions"] or "{}"))
    configs = sorted(per_config)
    actions = sorted({a for c in per_config.values() for a in c})
    matrix = []
    for config in configs:
        total = sum(per_config[config].values()) or 1
        matrix.append([per_config[config][a] / total for a in actions])
    return configs, actions, matrix


def plot_coverage(rows: list[dict], path: Path) -> None:
    configs, actions, matrix = coverage(rows)
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(actions) + 3), max(3, 0.3 * len(configs) + 1.5)))
    if configs and actions:
        image = ax.imshow(matrix, aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(actions)), actions, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(configs)), configs, fontsize=7)
        fig.colorbar(image, ax=ax, label="share of spec steps")
    ax.set_title("spec-action coverage per configuration", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def throughput_per_worker(rows: list[dict]) -> dict[str, float]:
    seconds: Counter = Counter()
    seeds: Counter = Counter()
    for r in rows:
        seconds[r["worker"]] += r["wall_s"]
        seeds[r["worker"]] += 1
    return {w: seeds[w] / seconds[w] for w in sorted(seeds) if seconds[w] > 0}


def plot_throughput(rows: list[dict], path: Path) -> None:
    rates = throughput_per_worker(rows)
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.barh(list(rates), list(rates.values()))
    ax.set_xlabel("seeds per second of task time")
    ax.set_title("throughput per executor (Python worker)", fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(out: Path, summary: dict) -> list[Path]:
    rows = ledger.read_ledger(out, summary["campaign"]).to_pylist()
    plots = {"violations": out / "violations.png", "coverage": out / "coverage.png",
             "throughput": out / "throughput.png"}
    plot_violations(rows, plots["violations"])
    plot_coverage(rows, plots["coverage"])
    plot_throughput(rows, plots["throughput"])
    lines = [f"# Fuzz campaign {summary['campaign']}", "",
             f"{summary['seeds']:,} seeds, {summary['steps']:,} simulated steps"
             + (f", bug switch `{summary['bug']}`" if summary.get("bug") else "") + ".", "",
             "| outcome | seeds |", "|---|---:|"]
    lines += [f"| {k} | {v:,} |" for k, v in summary["outcomes"].items()]
    lines += ["", "## Faults injected", "", "| fault | count |", "|---|---:|"]
    lines += [f"| {k} | {v:,} |" for k, v in summary.get("faults", {}).items()] or ["| none | 0 |"]
    lines += ["", "## Failures (deduplicated by signature)", ""]
    if summary["reproducers"]:
        lines += ["| signature | seeds | reproducer |", "|---|---:|---|"]
        for rep in summary["reproducers"]:
            lines.append(f"| {rep['signature']} | {rep['count']} | `{rep.get('reproducer', rep['message'][:80])}` |")
    else:
        lines.append("none")
    lines += ["", "## Plots", ""] + [f"![{name}]({p.name})" for name, p in plots.items()]
    md = out / "report.md"
    md.write_text("\n".join(lines) + "\n")
    page = out / "report.html"
    body = "".join(f"<p>{html.escape(line)}</p>" if not line.startswith("![") else
                   f"<img src=\"{html.escape(line[line.index('(') + 1:-1])}\">" for line in lines if line)
    page.write_text(f"<!doctype html><meta charset=utf-8><title>{html.escape(summary['campaign'])}</title>"
                    f"<body style='font-family:sans-serif'>{body}</body>\n")
    return [md, page, *plots.values()]
