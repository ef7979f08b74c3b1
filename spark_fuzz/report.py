"""`ackorder fuzz-report`: a campaign's ledger as Markdown and HTML with PNG plots.

Plots: violations over seed index (cumulative, one line per property),
spec-action coverage per configuration (a heatmap of how often each
configuration took each action, on a log scale), and throughput per
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


def coverage(rows: list[dict]) -> tuple[list[str], list[str], list[list[int]]]:
    """(configurations, spec actions, how often each configuration took each action)."""
    per_config: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        per_config[_config_key(r["config"])].update(json.loads(r["actions"] or "{}"))
    configs = sorted(per_config)
    actions = sorted({a for c in per_config.values() for a in c})
    return configs, actions, [[per_config[c][a] for a in actions] for c in configs]


def plot_coverage(rows: list[dict], path: Path) -> None:
    """Counts on a log scale, so that a fault taken 30 times shows beside 300,000 puts; an
    action a configuration never took is left blank (and is named in the report)."""
    from matplotlib.colors import LogNorm
    import numpy as np

    configs, actions, matrix = coverage(rows)
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(actions) + 3), max(3, 0.3 * len(configs) + 1.5)))
    if configs and actions:
        data = np.ma.masked_equal(np.array(matrix, dtype=float), 0)
        top = max(1.0, float(data.max()))
        image = ax.imshow(data, aspect="auto", cmap="viridis", norm=LogNorm(vmin=1, vmax=max(top, 10)))
        ax.set_facecolor("white")
        ax.set_xticks(range(len(actions)), actions, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(configs)), configs, fontsize=7)
        fig.colorbar(image, ax=ax, label="times taken (log; blank = never)")
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


def never_taken(rows: list[dict]) -> dict[str, list[str]]:
    """Per configuration, the spec actions other configurations took and it never did."""
    configs, actions, matrix = coverage(rows)
    return {c: [a for a, n in zip(actions, counts) if n == 0] for c, counts in zip(configs, matrix)
            if any(n == 0 for n in counts)}


def run_config(config_json: str):
    """A seed's spec configuration (for which spec branches it could reach), or None."""
    from spec.config import Config, ConfigError

    c = json.loads(config_json or "{}")
    try:
        return Config(replicas=tuple(f"r{i + 1}" for i in range(c["replicas"])), flush_mode=c["flush_disk_type"],
                      repl_mode=c["broker_role"], transient_store_pool=c["transient_store_pool_enable"],
                      ack_policy=c["ack_policy"], in_sync_replicas=min(c["in_sync_replicas"], c["replicas"] + 1),
                      bugs=frozenset(c.get("bugs", ())))
    except (KeyError, TypeError, ConfigError):
        return None


def spec_coverage(rows: list[dict], bug: str | None = None):
    """(branch rows, antecedent rows) of spec/coverage.py for a campaign's seeds."""
    from spec.coverage import antecedent_table, branch_table

    branches = [(run_config(r["config"]), json.loads(r.get("branches") or "{}")) for r in rows]
    antecedents = [json.loads(r.get("antecedents") or "{}") for r in rows]
    return branch_table(branches, bug), antecedent_table(antecedents)


def coverage_markdown(branch_rows, antecedent_rows, runs_word: str = "seeds") -> list[str]:
    """The coverage tables: every branch of every action, every property antecedent; unreached
    ones flagged in bold with the reason."""
    lines = [f"| action | branch | {runs_word} | times | |", "|---|---|---:|---:|---|"]
    for r in branch_rows:
        flag = "" if r.reached else f"**unreached**: {r.note}"
        lines.append(f"| {r.group} | {r.name or '(one branch)'} | {r.runs:,} | {r.times:,} | {flag} |")
    lines += ["", f"| property | antecedent | {runs_word} | times | |", "|---|---|---:|---:|---|"]
    for r in antecedent_rows:
        flag = "" if r.reached else f"**unreached**: {r.note}"
        lines.append(f"| {r.group} | {r.name} | {r.runs:,} | {r.times:,} | {flag} |")
    return lines


def failover_actions_markdown(rows: list[dict]) -> list[str]:
    """A failover campaign's coverage: every action of tla/AckOrderFailover.tla, how many seeds
    took it and how often (the write path's branch tables do not apply)."""
    from spec.failover.actions import FAIR_ACTIONS

    every = sorted(set(FAIR_ACTIONS) | {"Put", "ShrinkSyncStateSet", "ExpandSyncStateSet", "ReplicaDisconnect",
                                          "BrokerCrash", "BrokerPowerLoss", "CutFromController"})
    seeds: dict[str, int] = dict.fromkeys(every, 0)
    times: dict[str, int] = dict.fromkeys(every, 0)
    for r in rows:
        for action, n in json.loads(r.get("actions") or "{}").items():
            seeds[action] = seeds.get(action, 0) + 1
            times[action] = times.get(action, 0) + n
    lines = ["", "## Failover spec actions taken", "",
             "Every action of tla/AckOrderFailover.tla, with the seeds that took it and how often.", "",
             "| action | seeds | times |", "|---|---:|---:|"]
    lines += [f"| {a} | {seeds[a]:,} | {times[a]:,} |" + ("" if times[a] else " **never taken**")
              for a in sorted(seeds)]
    return lines


def controllers_actions_markdown(rows: list[dict], summary: dict) -> list[str]:
    """A controllers campaign's reach: each step of reference/failover/controllers_sim.py, and what
    the runtime's code did with the commits (settled by ShardTable.settle)."""
    from reference.failover.controllers_sim import KINDS

    every = {"Survey", "LeaseExpires", "KeepAliveStalls", "KeepAliveResumes", "Rejoin", "Heartbeat", "BrokerCrash",
             "BrokerRestart", "Tick", "AlterSyncStateSet", "Commit", "CommitAnswerLost", "CommitRetried"}
    assert len(every) >= len(KINDS)
    seeds: dict[str, int] = dict.fromkeys(sorted(every), 0)
    times: dict[str, int] = dict.fromkeys(sorted(every), 0)
    for r in rows:
        for action, n in json.loads(r.get("actions") or "{}").items():
            action = action.split("[")[0]
            seeds[action] = seeds.get(action, 0) + 1
            times[action] = times.get(action, 0) + n
    lines = ["", "## Controllers steps taken", "",
             "Every step of reference/failover/controllers_sim.py (the actions of tla/AckOrderControllers.tla, "
             "and commits reaching etcd), with the seeds that took it and how often.", "",
             "| step | seeds | times |", "|---|---:|---:|"]
    lines += [f"| {a} | {seeds[a]:,} | {times[a]:,} |" + ("" if times[a] else " **never taken**") for a in seeds]
    done = summary.get("faults", {})
    lines += ["", "What the world counted (decisions, commits written or refused, how the runtime settled "
              "them): " + ", ".join(f"{k} {v:,}" for k, v in sorted(done.items())) + "."]
    return lines


def per_cpu_hour_markdown(summary: dict, out: Path) -> list[str]:
    """This campaign's bugs found per CPU-hour, and every campaign run into the same directory
    (short and long mode side by side, when both were run there)."""
    from spark_fuzz.campaign import read_history

    if "cpu_seconds" not in summary:          # a summary written before campaigns measured CPU time
        return []
    lines = ["", "## Bugs found per CPU-hour", "",
             f"{summary['mode']} mode, {summary['steps_per_seed']:,} steps per seed: {summary['cpu_seconds']:,.1f} "
             f"CPU-seconds in the tasks (each seed's own process CPU time), {summary['bugs_found']} distinct "
             f"propert{'y' if summary['bugs_found'] == 1 else 'ies'} violated = "
             f"**{summary['bugs_per_cpu_hour']:,.1f} bugs found per CPU-hour**."]
    if first := summary.get("first_violation"):
        lines[-1] += (f" The first violation ({first['outcome']}) came at seed index {first['index']}, step "
                      f"{first['step']:,}, after {summary['cpu_s_to_first_violation']:,.1f} CPU-seconds "
                      "(the seeds in index order).")
    history = read_history(out)
    modes = sorted({h["mode"] for h in history})
    lines += ["", f"Campaigns run into this directory ({', '.join(modes) or 'none'} mode):", "",
              "| campaign | mode | bug | seeds | steps/seed | CPU-s | bugs found | per CPU-hour | CPU-s to first |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for h in history:
        first_s = h.get("cpu_s_to_first_violation")
        lines.append(f"| {h['campaign']} | {h['mode']} | {h.get('bug') or '-'} | {h['seeds']:,} | "
                     f"{h['steps_per_seed']:,} | {h['cpu_seconds']:,.1f} | {h['bugs_found']} | "
                     f"{h['bugs_per_cpu_hour']:,.1f} | {'-' if first_s is None else f'{first_s:,.1f}'} |")
    return lines


def markdown(summary: dict, rows: list[dict], plots: dict[str, Path], out: Path) -> str:
    lines = [f"# Fuzz campaign {summary['campaign']}", "",
             f"{summary['seeds']:,} seeds, {summary['steps']:,} simulated steps"
             + (f", bug switch `{summary['bug']}`" if summary.get("bug") else "") + ".", "",
             "| outcome | seeds |", "|---|---:|"]
    lines += [f"| {k} | {v:,} |" for k, v in summary["outcomes"].items()]
    lines += per_cpu_hour_markdown(summary, out)
    lines += ["", "## Faults injected", "", "| fault | count |", "|---|---:|"]
    lines += [f"| {k} | {v:,} |" for k, v in summary.get("faults", {}).items()] or ["| none | 0 |"]
    lines += ["", "## Failures (deduplicated by signature)", ""]
    if summary["reproducers"]:
        lines += ["| signature | seeds | first seed index | reproducer | trace |", "|---|---:|---:|---|---|"]
        for rep in summary["reproducers"]:
            trace = rep.get("trace")
            link = f"[trace]({Path(trace).relative_to(out)})" if trace and Path(trace).is_relative_to(out) else "-"
            lines.append(f"| {rep['signature']} | {rep['count']:,} | {rep['index']} | "
                         f"`{rep.get('reproducer') or '-'}` | {link} |")
        if summary.get("reproducers_file"):
            lines += ["", f"Every reproducer, one per line: [reproducers.txt]({Path(summary['reproducers_file']).name})."]
    else:
        lines.append("None.")
    if summary.get("model") in ("failover", "controllers"):
        lines += failover_actions_markdown(rows) if summary["model"] == "failover" else \
            controllers_actions_markdown(rows, summary)
        lines += ["", "## Plots", ""] + [f"![{name}]({p.name})" for name, p in plots.items()]
        return "\n".join(lines) + "\n"
    branch_rows, antecedent_rows = spec_coverage(rows, summary.get("bug"))
    unreached = [r for r in branch_rows if not r.reached]
    lines += ["", "## Spec coverage: branches and property antecedents", "",
              f"Every labelled branch of tla/AckOrder.tla and every property antecedent of spec/coverage.py, "
              f"with the seeds that reached it and how often; {len(unreached)} of {len(branch_rows)} branches "
              "unreached.", ""]
    lines += coverage_markdown(branch_rows, antecedent_rows)
    gaps = never_taken(rows)
    lines += ["", "## Spec actions never taken", ""]
    if gaps:
        lines += ["| configuration | actions it never took |", "|---|---|"]
        lines += [f"| {c} | {', '.join(a)} |" for c, a in gaps.items()]
    else:
        lines.append("Every configuration took every action some configuration took.")
    lines += ["", "## Plots", ""] + [f"![{name}]({p.name})" for name, p in plots.items()]
    return "\n".join(lines) + "\n"


def html_page(title: str, md: str) -> str:
    """The Markdown rendered by a real Markdown library (tables included)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(md)
    style = ("body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em}"
             "code{font-size:85%;word-break:break-all}img{max-width:100%}")
    return (f"<!doctype html>\n<html><head><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n{body}</body></html>\n")


def write_report(out: Path, summary: dict) -> list[Path]:
    rows = ledger.read_ledger(out, summary["campaign"]).to_pylist()
    plots = {"violations": out / "violations.png", "coverage": out / "coverage.png",
             "throughput": out / "throughput.png"}
    plot_violations(rows, plots["violations"])
    plot_coverage(rows, plots["coverage"])
    plot_throughput(rows, plots["throughput"])
    md_text = markdown(summary, rows, plots, out)
    md = out / "report.md"
    md.write_text(md_text)
    page = out / "report.html"
    page.write_text(html_page(f"Fuzz campaign {summary['campaign']}", md_text))
    return [md, page, *plots.values()]
