"""`ackorder bench all` writes docs/benchmarks.md (tables + plots) from fresh measurements."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

GOALS = {
    "ack": "DECOUPLED/BLOCKING throughput >= 16.7x at 64 producers, 4 processor slots, 2 ms each way (seed 000), "
           "goal 20x; DECOUPLED average latency near the slave round trip",
    "groupcommit": "group commit >= 5x one-fsync-per-message at 64 producers, and SYNC_FLUSH >= 0.8x the "
                   "ASYNC_FLUSH throughput of the same master (group commit makes the fsync nearly free)",
    "tsp": "the pathology reproduced (p50 about the commit interval with the pool on) and the fix within 1.2x of "
           "pool-off",
    "goals": "issue 39's goals, each a ratio within one run, the median of the runs' ratios, this tree beside the "
             "tree before (--baseline), every point beside the bound it is measured against",
    "sim": "simulated steps/s of the core on one core, checked against the spec and not",
    "rss": "peak resident memory of the master and of the slave under 150 MiB each while 2 GiB go through them "
           "(SYNC_FLUSH + SYNC_MASTER), independent of how much was written",
    "cpu": "CPU per message of the master (and the slave), before and after issue 12, side by side, with a "
           "profile of this master",
}


def _cpu(r: dict) -> str:
    c = r.get("cpu_us_per_msg")
    return f"{c['master']} / {c['replica']} / {c['load']}" if c else ""


def _rows_table(result: dict) -> list[str]:
    extra = result["scenario"] == "groupcommit"
    head = "| mode | producers | msgs/s | avg ms | p50 ms | p99 ms | statuses | CPU µs/msg master / slave / load |" + (
        " fsyncs/msg | mean batch | fsync bound msgs/s | of bound |" if extra else "")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in result["rows"]:
        statuses = ", ".join(f"{k} {v}" for k, v in r["statuses"].items())
        line = (f"| {r['mode']} | {r['producers']} | {r['msgs_per_s']:,.0f} | {r['avg_ms']} | {r['p50_ms']} | "
                f"{r['p99_ms']} | {statuses} | {_cpu(r)} |")
        if extra:
            line += (f" {r['fsyncs_per_msg']} | {r['mean_batch']} | {r['fsync_bound_msgs_per_s']:,.0f} | "
                     f"{r['of_fsync_bound']} |")
        lines.append(line)
    return lines


def _met(value: float, goal: float) -> str:
    return "met" if value >= goal else "**not met**"


def bounds_table(results: dict) -> list[str]:
    """Each figure beside the bound it is measured against, both from this run (reference/bench/bounds.py)."""
    lines = ["## Each figure beside its bound", "",
             "Every bound is probed by the same run on the same machine: the round trip through the delaying "
             "proxy alone (an echo server behind it, no broker), this disk's fdatasync latency, and the CPU "
             "every process spent per message (the cores over their sum).", "",
             "| figure | measured | bound | of the bound | the bound, measured |", "|---|---|---|---|---|"]
    if "ack" in results and "network" in results["ack"]:
        r = results["ack"]
        n = r["network"]
        for row in r["rows"]:
            if "nearer_bound" not in row:
                continue
            bound = min(row["round_trip_bound_msgs_per_s"], row["cpu_bound_msgs_per_s"])
            spent = sum(v for v in row["cpu_us_per_msg"].values() if v)
            slots = f"{r['pool']} processor slots" if row["mode"] == "BLOCKING" else f"{row['producers']} producers"
            trip = (f"{row['rtt_ms']} ms round trip (the slave holds each ACK for the delay, no proxy)" if "rtt_ms" in row
                    else f"{n['through_proxy_ms']['avg']} ms round trip (the proxy's own {n['proxy_added_ms']} ms of it)")
            lines.append(f"| {row['mode']}, {row['producers']} producers | {row['msgs_per_s']:,.0f} msgs/s | "
                         f"{bound:,.0f} msgs/s ({row['nearer_bound']}) | {row['of_nearer_bound']:.0%} | {slots} / "
                         f"{trip}; CPU {spent:,.0f} µs/msg on {os.cpu_count()} cores |")
    if "groupcommit" in results and "sync_latency_bound_ms" in results["groupcommit"]["ratios"][0]:
        r = results["groupcommit"]
        d = r["disk"]
        for ratio in r["ratios"]:
            g = next(x for x in r["rows"] if x["mode"] == "group_commit" and x["producers"] == ratio["producers"])
            a = next(x for x in r["rows"] if x["mode"] == "async_flush" and x["producers"] == ratio["producers"])
            lines.append(f"| SYNC_FLUSH latency, {ratio['producers']} producers | {g['avg_ms']} ms | "
                         f"{ratio['sync_latency_bound_ms']} ms | {ratio['sync_latency_over_bound']:.2f}x | "
                         f"ASYNC_FLUSH {a['avg_ms']} ms + 2 x fdatasync p50 {d['fdatasync_ms']['p50']} ms |")
    return lines + [""]


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.3g}"


def goals_section(result: dict) -> list[str]:
    """Issue 39's goals, before and after, medians of the runs (reference/bench/goals.py)."""
    trees = ("before", "after") if result["baseline"] else ("after",)
    b = result["bounds"]
    lines = [f"## The goals of issue 39: medians of {result['runs']} runs, side by side", "",
             f"`ackorder bench goals --goal-runs {result['runs']} --count {result['count']}"
             + (f" --baseline {result['baseline']}`" if result["baseline"] else "`")
             + ". Each run measured every point of both trees once, alternating, and probed its bounds first: "
             "the round trip through the delaying proxy alone "
             + ", ".join(f"{x['through_proxy_ms']} ms" for x in b) + " (directly "
             + ", ".join(f"{x['direct_ms']} ms" for x in b) + "), this disk's fdatasync p50 "
             + ", ".join(f"{x['fdatasync_p50_ms']} ms" for x in b) + ". A goal's figure is the median of the "
             "runs' ratios; — is a point the tree before cannot run (a flag it has not).", "",
             "| goal | bound | " + " | ".join(trees) + " | target | | runs (after) |",
             "|---|---|" + "---|" * len(trees) + "---|---|---|"]
    for r in result["rows"]:
        met = {True: "met", False: "**not met**", None: "—"}[r["met"]]
        lines.append(f"| {r['goal']} | {r['bound']} | " + " | ".join(_fmt(r[t]) for t in trees)
                     + f" | {'≥' if r['higher_is_better'] else '≤'} {r['target']} | {met} | "
                     + ", ".join(_fmt(v) for v in r["after_runs"]) + " |")
    lines += ["", "The points of the median run (msgs/s, average latency, CPU µs per message master / slave / load / "
                  "proxy):", "", "| point | " + " | ".join(trees) + " |", "|---|" + "---|" * len(trees)]
    for name in result["medians"]["after"]:
        cells = []
        for t in trees:
            m = result["medians"].get(t, {}).get(name)
            cells.append("—" if m is None else f"{m['msgs_per_s']:,.0f} msgs/s, {m['avg_ms']} ms, "
                         + " / ".join(str(v) for v in m["cpu_us_per_msg"].values()))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "### Where a request's time goes", "",
              "From the master's and the slave's timelines (`broker master|replica --timeline`, one request in "
              "8 sampled; reference/bench/breakdown.py): the mean of each phase in ms, from this tree's median "
              "run of a point only this tree runs, else from one more measurement of the point with timelines "
              "(the goals' runs of a point both trees run go without them: the tree before has none to pay "
              "for). Under io_uring the fsync phase ends when the loop reaps its completion (no worker "
              "returns: 'worker to loop' is 0); on the flush thread it ends when the thread has the GIL back. "
              "A phase between two processes (the network legs) is good to a few tens of µs: a sender marks "
              "after its send returned, and the receiver may have read it first. "
              "The client's latency less the broker's (arrival to answer drained) is the load generator's "
              "own loop and the loopback.", ""]
    names = list(result["breakdowns"])
    phases: list[str] = []
    for n in names:
        phases += [p for p in result["breakdowns"][n]["phases_ms"] if p not in phases]
    lines += ["| phase | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for p in phases:
        lines.append(f"| {p} | " + " | ".join(_fmt(result["breakdowns"][n]["phases_ms"].get(p, {}).get("avg"))
                                               for n in names) + " |")
    for label, key in (("broker (arrival to answer drained)", "broker"), ("outside the broker", "outside"),
                       ("client's average", "client"), ("msgs/s", "x")):
        cells = []
        for n in names:
            d = result["breakdowns"][n]
            cells.append({"broker": _fmt(d["broker_ms"]["avg"]), "outside": _fmt(d["outside_broker_ms"]),
                          "client": _fmt(d["client_avg_ms"]), "x": f"{d['msgs_per_s']:,.0f}"}[key])
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines + [""]


def headline(results: dict) -> list[str]:
    """The issue's ratios, measured in this run, each against its goal."""
    lines = ["## The ratios", "", "| figure | measured | goal | |", "|---|---|---|---|"]
    if "ack" in results:
        h = results["ack"]["headline"]
        lines.append(f"| DECOUPLED / BLOCKING throughput, SYNC_MASTER, {h['producers']} producers, "
                     f"{results['ack']['pool']} slots, {results['ack']['delay_ms_each_way']} ms each way | "
                     f"{h['throughput_ratio']}x | >= 16.7x (goal 20x) | {_met(h['throughput_ratio'], 16.7)} |")
    if "groupcommit" in results:
        h = results["groupcommit"]["headline"]
        lines.append(f"| group commit / one fsync per message, {h['producers']} producers | "
                     f"{h['throughput_ratio']}x | >= 5x | {_met(h['throughput_ratio'], 5)} |")
        lines.append(f"| SYNC_FLUSH / ASYNC_FLUSH throughput, same master, {h['producers']} producers | "
                     f"{h['sync_over_async_flush']}x | >= 0.8x | {_met(h['sync_over_async_flush'], 0.8)} |")
    if "rss" in results:
        r = results["rss"]
        worst = max(r["master_peak_rss_mib"], r["replica_peak_rss_mib"])
        lines.append(f"| peak RSS, master / slave, {r['written_gib']} GiB written | {r['master_peak_rss_mib']} / "
                     f"{r['replica_peak_rss_mib']} MiB | < 150 MiB each | "
                     f"{'met' if worst < r['goal_mib'] else '**not met**'} |")
    if "tsp" in results:
        for x in results["tsp"]["ratios"]:
            lines.append(f"| TSP, {x['producers']} producers: pool-on p50 / fixed over pool-off latency | "
                         f"{x['pool_on_p50_ms']} ms / {x['fixed_over_off_avg_latency']}x | about "
                         f"{x['commit_interval_ms']} ms / <= 1.2x | "
                         f"{_met(1.2, x['fixed_over_off_avg_latency'] or 0)} |")
    return lines + [""]


def bounds(results: dict) -> list[str]:
    """What limits the figures of this run, computed from them (why a goal may be missed)."""
    lines = ["## What bounds these figures", ""]
    if "ack" in results:
        r = results["ack"]
        blocking = [x for x in r["rows"] if x["mode"] == "BLOCKING"]
        decoupled = {x["producers"]: x for x in r["rows"] if x["mode"] == "DECOUPLED"}
        slot_ms = max(blocking, key=lambda x: x["producers"])
        per_request = r["pool"] * 1000 / slot_ms["msgs_per_s"] if slot_ms["msgs_per_s"] else 0
        p = r["headline"]["producers"]
        d = decoupled.get(p)
        lines.append(
            f"- BLOCKING holds each of its {r['pool']} processor slots for a whole round trip: "
            f"{per_request:.2f} ms per request here against a {r['rtt_ms']} ms network round trip, so it "
            f"is bounded by {r['pool']} / {per_request:.2f} ms = {slot_ms['msgs_per_s']:,.0f} msgs/s. DECOUPLED "
            f"with {p} synchronous producers is bounded by {p} / (round trip + processing): the round trip alone "
            f"allows {p * 1000 / r['rtt_ms']:,.0f} msgs/s, i.e. {p / r['pool']:.0f}x BLOCKING when both pay the "
            f"same overhead per round trip. The seeds' 16.7x (and 20x) needs BLOCKING's per-request time to "
            f"exceed DECOUPLED's per-wave time by 4-25%; here DECOUPLED averaged {d['avg_ms'] if d else '?'} ms "
            f"per request ({(d['avg_ms'] - r['rtt_ms']) if d else 0:.2f} ms over the round trip asked for; the "
            f"load average was {d['load_average'] if d else '?'} on {os.cpu_count()} cores during the point)."
            + (_where_it_went(d) if d and d.get("breakdown") else ""))
        if d:
            c = d["cpu_us_per_msg"]
            lines.append(f"- CPU per message at that point: master {c['master']} µs, slave {c['replica']} µs, load "
                         f"generator {c['load']} µs; most of the master's is the kernel's loopback TCP send of "
                         "each response (see the profile under `cpu`).")
    if "groupcommit" in results:
        r = results["groupcommit"]
        d = r["disk"]
        lines.append(
            f"- This disk: {d['fdatasyncs_per_s']:,.0f} fdatasyncs/s, p50 {d['fdatasync_ms']['p50']} ms, p90 "
            f"{d['fdatasync_ms']['p90']} ms. One fsync per message is bounded by that latency (plus the loop's "
            "noticing it: io_uring posts to an eventfd, the flush thread had to take the GIL back first); group "
            "commit pays one fsync per round, so SYNC_FLUSH adds about 1.5 fsync "
            "latencies to each request against ASYNC_FLUSH: with 64 synchronous producers its throughput is "
            "ASYNC_FLUSH's times processing / (processing + 1.5 x fsync). On a disk whose fsync is slow next to "
            "the master's processing (a shared virtual disk here) the 0.8x goal cannot be met.")
    if "tsp" in results:
        lines.append("- With the pool on, a message waits until 4 pages (commit_commit_log_least_pages) are "
                     "written or 200 ms pass: few producers wait the full interval, many fill the pages sooner "
                     "(p50 falls) but the tail still waits for the interval.")
    if "rss" in results:
        r = results["rss"]
        lines.append(f"- Memory: the master keeps the segments from the one holding the oldest of the flushed "
                     f"offset and the in-sync slaves' acks (one or two 16 MiB segments), their compact index "
                     f"(about 40 bytes a record), and the requests not yet answered; the slave keeps one segment. "
                     f"The samples at a quarter, half, three quarters and all of the {r['written_gib']} GiB: "
                     + ", ".join(f"{s['written_mib']:.0f} MiB written -> master {s['master_rss_mib']} / slave "
                                 f"{s['replica_rss_mib']} MiB" for s in r["at_quarters"]) + ".")
    return lines + [""]


def _where_it_went(row: dict) -> str:
    """One sentence from a point's timeline breakdown: the phases beyond the network, largest first."""
    phases = {k: v["avg"] for k, v in row["breakdown"]["phases_ms"].items() if v["avg"] is not None}
    network = sum(phases.pop(k, 0) for k in ("network to the slave", "network back"))
    rest = sorted(phases.items(), key=lambda kv: -kv[1])
    return (f" Its timeline: {network:.2f} ms in the network legs (the proxy's delay, its own time and its "
            "lateness under load), then " + ", ".join(f"{k} {v:.2f}" for k, v in rest)
            + f" ms, and {_fmt(row['breakdown']['outside_broker_ms'])} ms outside the broker (the load "
            "generator's loop, loopback).")


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = result["scenario"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    if name == "rss":
        samples = result.get("samples", [])
        xs = [s["written_mib"] / 1024 for s in samples]
        for key, label in (("master_rss_mib", "master"), ("replica_rss_mib", "slave")):
            axes[0].plot(xs, [s[key] for s in samples], label=label)
        axes[0].axhline(result["goal_mib"], linestyle="--", color="grey", label="goal")
        axes[0].set_xlabel("GiB written")
        axes[0].set_ylabel("resident MiB")
        axes[0].legend(fontsize=7)
        axes[1].axis("off")
    elif name == "goals":
        rows = result["rows"]
        labels = [r["goal"][:48] for r in rows]
        for i, tree in enumerate(t for t in ("before", "after") if t in rows[0]):
            # each figure over its target, so that 1 is the goal for all of them (lower-is-better inverted)
            vals = [(r[tree] / r["target"] if r["higher_is_better"] else r["target"] / r[tree]) if r[tree] else 0
                    for r in rows]
            axes[0].barh([y + 0.4 * i for y in range(len(rows))], vals, height=0.4, label=tree)
        axes[0].axvline(1.0, color="grey", linestyle="--")
        axes[0].set_yticks([y + 0.2 for y in range(len(rows))], labels, fontsize=6)
        axes[0].set_xlabel("figure / goal (1 = met)")
        axes[0].legend(fontsize=7)
        axes[1].axis("off")
    elif name == "cpu":
        modes = [r["mode"] for r in result["rows"]]
        axes[0].barh(modes, [r["cpu_us_per_msg"]["master"] for r in result["rows"]])
        axes[0].set_xlabel("master CPU µs per message")
        axes[1].barh(modes, [r["msgs_per_s"] for r in result["rows"]])
        axes[1].set_xlabel("messages/s")
    elif name == "sim":
        for tree in ("before", "after"):
            rows = [r for r in result["rows"] if r["tree"] == tree and r["kind"] == "checked"]
            if rows:
                axes[0].plot([r["steps"] for r in rows], [r["steps_per_s"] for r in rows], marker="o",
                             label=f"checked, {tree}")
        axes[0].set_xscale("log")
        axes[0].set_xlabel("run length (steps)")
        axes[0].set_ylabel("steps per CPU-second")
        axes[0].legend(fontsize=7)
        unchecked = [r for r in result["rows"] if r["kind"] == "unchecked"]
        axes[1].bar([r["tree"] for r in unchecked], [r["steps_per_s"] for r in unchecked])
        axes[1].set_ylabel("unchecked steps per CPU-second")
    else:
        for mode in sorted({r["mode"] for r in result["rows"]}):
            rows = [r for r in result["rows"] if r["mode"] == mode]
            xs = [r["producers"] for r in rows]
            axes[0].plot(xs, [r["msgs_per_s"] for r in rows], marker="o", label=mode)
            axes[1].plot(xs, [r["avg_ms"] for r in rows], marker="o", label=f"{mode} avg")
            axes[1].plot(xs, [r["p99_ms"] for r in rows], marker="x", linestyle=":", label=f"{mode} p99")
        if name == "groupcommit":
            rows = [r for r in result["rows"] if r["mode"] == "group_commit"]
            axes[0].plot([r["producers"] for r in rows], [r["fsync_bound_msgs_per_s"] for r in rows],
                         linestyle="--", color="grey", label="fsync bound × batch")
        for ax, label in ((axes[0], "messages/s"), (axes[1], "latency ms")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("producers")
            ax.set_ylabel(label)
            ax.legend(fontsize=7)
    fig.suptitle(f"ackorder bench {name}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replace_section(docs: Path, heading: str, lines: list[str]) -> Path:
    """Put ``lines`` (a section starting with ``heading``) into docs/benchmarks.md in place of the
    section with that heading (or at the end)."""
    out = docs / "benchmarks.md"
    text = out.read_text() if out.exists() else "# Benchmarks\n"
    before, found, after = text.partition(heading)
    end = after.find("\n## ") if found else -1
    rest = after[end + 1:] if end >= 0 else ""
    out.write_text(before.rstrip("\n") + "\n\n" + "\n".join(lines) + ("\n" + rest if rest else ""))
    return out


def write_docs(results: dict, docs: Path) -> Path:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "benchmarks").mkdir(exist_ok=True)
    lines = ["# Benchmarks", "",
             f"Written by `ackorder bench all` on {time.strftime('%Y-%m-%d')} ({platform.machine()}, "
             f"{os.cpu_count()} cores shared with other jobs, {platform.python_implementation()} "
             f"{platform.python_version()}). Every figure comes from one run, side by side; the master and the "
             "slave are separate processes on 127.0.0.1 with real files and fdatasync; the slave sits behind a "
             "delaying TCP proxy (its own process); the load generator is `reference/real/load.py` (synchronous "
             "producers, one request in flight each, sharing one TCP connection as a RocketMQ client's sending "
             "threads share one channel per broker; one thread and one selector). CPU per message is user + "
             "system time from /proc over the measured load, divided by the messages.", ""]
    lines += bounds_table(results)
    if "goals" in results:
        lines += goals_section(results["goals"])
    lines += headline(results)
    for name, result in results.items():
        png = docs / "benchmarks" / f"{name}.png"
        plot(result, png)
        if name != "sim":
            lines += [f"## `{name}`", "", f"Goal: {GOALS[name]}.", ""]
        if name == "goals":
            lines += ["The table is at the top of this page."]
        elif name == "sim":
            from reference.bench.simrates import section

            # the section `bench sim` writes (its goals, the event costs, what bounds the simulator), so that
            # `bench all` leaves no thinner one in its place
            lines += section(result, result.get("command", "ackorder bench all"))
            lines += [f"The refinement check costs {result['check_cost']}x."]
        elif name == "rss":
            lines += ["| written | seconds | msgs/s | statuses | master peak RSS | slave peak RSS |",
                      "|---|---|---|---|---|---|",
                      f"| {result['written_gib']} GiB ({result['messages']:,} messages of {result['size_bytes']:,} "
                      f"bytes) | {result['seconds']} | {result['msgs_per_s']:,} | "
                      + ", ".join(f"{k} {v}" for k, v in result["statuses"].items())
                      + f" | {result['master_peak_rss_mib']} MiB | {result['replica_peak_rss_mib']} MiB |"]
        else:
            lines += _rows_table(result)
            lines += ["", "Ratios: `" + json.dumps(result["ratios"]) + "`"]
            if name == "ack":
                lines += ["", f"Slave delay {result['delay_ms_each_way']} ms each way (round trip "
                              f"{result['rtt_ms']} ms) through a delaying TCP proxy; {result['pool']} processor "
                              "slots. Flush and replication in sequence (BLOCKING) vs in parallel (DECOUPLED), "
                              "SYNC_FLUSH + SYNC_MASTER:", ""]
                for r in result["sync_flush_sync_master"]:
                    lines.append(f"- {r['flush_then_replica']} ({r['mode']}), {r['producers']} producers: "
                                 f"{r['msgs_per_s']:,.0f} msgs/s, avg {r['avg_ms']} ms, p99 {r['p99_ms']} ms")
            if name == "groupcommit":
                d = result["disk"]
                lines += ["", f"This disk: {d['fdatasyncs_per_s']:,} fdatasyncs/s (4 KiB appends; p50 "
                              f"{d['fdatasync_ms']['p50']} ms, p90 {d['fdatasync_ms']['p90']} ms), "
                              f"{d['write_mib_per_s']:,} MiB/s sequential writes."]
            if name == "cpu" and result.get("profile"):
                lines += ["", "The master's profile at the SYNC_MASTER DECOUPLED point (cProfile, top functions "
                              "by own time; `benchmarks/master-profile.txt`):", "", "```",
                          *result["profile"].rstrip().splitlines()[:32], "```"]
        lines += ["", f"![{name}](benchmarks/{png.name})", ""]
    out = docs / "benchmarks.md"
    if out.exists():                 # `bench controller` writes its own section: keep it
        from reference.bench.controller import kept_section

        lines += kept_section(out.read_text())
    lines += bounds(results)
    out.write_text("\n".join(lines) + "\n")
    return out
