"""`bench goals` (issue 39): each goal as a ratio measured side by side in one run, the median of
``runs`` runs, for this tree and (with ``--baseline DIR``) the tree before, every point beside the
bound it is measured against, probed in the same run.

A run measures every point once from each tree, the trees alternating, so that a machine whose
speed drifts during the benchmark drifts for both; each goal's ratio is computed within a run,
and the median of the runs' ratios is the figure.  The bounds (the round trip through the
delaying proxy alone and directly, this disk's fdatasync latency) are probed at the start of
each run.  Where a request's time goes is the timeline breakdown of this tree's median run.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from reference.bench.bounds import nearer_bound, round_trip
from reference.bench.scenarios import _fresh, _point, raw_disk

DELAY_MS = 2.0
POOL = 4
ACK = ["--broker-role", "SYNC_MASTER", "--replicas", "r1", "--send-message-thread-pool-nums", str(POOL),
       "--slave-timeout-ms", "10000", "--sync-flush-timeout-ms", "10000", "--wait-time-in-send-queue-ms", "60000",
       "--flush-disk-type", "ASYNC_FLUSH"]
FLUSH = ["--broker-role", "ASYNC_MASTER", "--sync-flush-timeout-ms", "60000", "--wait-time-in-send-queue-ms", "60000"]
TSP = ["--flush-disk-type", "ASYNC_FLUSH", "--broker-role", "SYNC_MASTER", "--replicas", "r1",
       "--wait-time-in-send-queue-ms", "200"]
# name: (flags, producers, slave delay each way or None, the delay in a proxy (else the slave holds the
# ACK), only this tree's (a flag the tree before has not), TSP's smaller count)
POINTS: dict[str, tuple[list[str], int, float | None, bool, bool, bool]] = {
    "blocking_64": ([*ACK, "--ack-mode", "BLOCKING"], 64, DELAY_MS, True, False, False),
    "decoupled_64": ([*ACK, "--ack-mode", "DECOUPLED"], 64, DELAY_MS, True, False, False),
    "decoupled_256": ([*ACK, "--ack-mode", "DECOUPLED"], 256, DELAY_MS, True, False, False),
    "slave_lag_64": ([*ACK, "--ack-mode", "DECOUPLED"], 64, DELAY_MS, False, True, False),
    "slave_lag_256": ([*ACK, "--ack-mode", "DECOUPLED"], 256, DELAY_MS, False, True, False),
    "group_commit_64": ([*FLUSH, "--flush-disk-type", "SYNC_FLUSH"], 64, None, True, False, False),
    "group_commit_thread_64": ([*FLUSH, "--flush-disk-type", "SYNC_FLUSH", "--flush-engine", "thread"], 64, None,
                               True, True, False),
    "fsync_per_message_64": ([*FLUSH, "--flush-disk-type", "SYNC_FLUSH", "--flush-one-message-per-fsync", "true"],
                             64, None, True, False, False),
    "async_flush_64": ([*FLUSH, "--flush-disk-type", "ASYNC_FLUSH"], 64, None, True, False, False),
    "tsp_off_4": ([*TSP, "--transient-store-pool-enable", "false"], 4, None, True, False, True),
    "tsp_fixed_4": ([*TSP, "--transient-store-pool-enable", "true", "--commit-on-replica-wait", "true"], 4, None,
                    True, False, True),
    "tsp_off_64": ([*TSP, "--transient-store-pool-enable", "false"], 64, None, True, False, True),
    "tsp_fixed_64": ([*TSP, "--transient-store-pool-enable", "true", "--commit-on-replica-wait", "true"], 64, None,
                     True, False, True),
}
BREAKDOWN_POINTS = ("async_flush_64", "group_commit_64", "group_commit_thread_64", "decoupled_64", "slave_lag_64",
                    "decoupled_256", "slave_lag_256")


def _x(p: dict) -> float:
    return p["msgs_per_s"]


def _applied_rtt_ms(p: dict, direct_ms: float) -> float | None:
    """The round trip as the run applied it: the slave's hold of each ACK as its timeline measured it
    (the delay asked for and the slave timer's lateness under load) and the loopback round trip probed
    alone; none of the master's own time (its reading the ACK late is the broker's share)."""
    held = p.get("breakdown", {}).get("phases_ms", {}).get("slave's ACK out", {}).get("avg")
    return held + direct_ms if held is not None else None


# Each goal: (name, how it is computed from one run's points and bounds, the target, higher is better)
Goal = tuple[str, Callable[[dict, dict], float | None], float, bool, str]


def _goals() -> list[Goal]:
    def of_rtt(name: str, producers: int, proxy: bool):
        def f(pts: dict, b: dict) -> float | None:
            if name not in pts:
                return None
            rtt = b["through_proxy_ms"] if proxy else 2 * DELAY_MS + b["direct_ms"]
            return _x(pts[name]) / (producers * 1000 / rtt)
        return f

    def of_applied(name: str, producers: int):
        def f(pts: dict, b: dict) -> float | None:
            rtt = _applied_rtt_ms(pts[name], b["direct_ms"]) if name in pts else None
            return _x(pts[name]) / (producers * 1000 / rtt) if rtt else None
        return f

    def of_nearer(name: str, producers: int, proxy: bool):
        def f(pts: dict, b: dict) -> float | None:
            if name not in pts:
                return None
            rtt = b["through_proxy_ms"] if proxy else 2 * DELAY_MS + b["direct_ms"]
            return nearer_bound(_x(pts[name]), producers, rtt, pts[name]["cpu_us_per_msg"])["of_nearer_bound"]
        return f

    def ratio(a: str, b_: str):
        return lambda pts, b: _x(pts[a]) / _x(pts[b_]) if a in pts and b_ in pts and _x(pts[b_]) else None

    def sync_latency(name: str):
        def f(pts: dict, b: dict) -> float | None:
            if name not in pts or "async_flush_64" not in pts:
                return None
            return pts[name]["avg_ms"] / (pts["async_flush_64"]["avg_ms"] + 2 * b["fdatasync_p50_ms"])
        return f

    def latency_ratio(a: str, b_: str):
        return lambda pts, b: pts[a]["avg_ms"] / pts[b_]["avg_ms"] if a in pts and b_ in pts and pts[b_]["avg_ms"] \
            else None

    return [
        ("DECOUPLED 64 producers / (64 / round trip through the proxy alone)", of_rtt("decoupled_64", 64, True),
         0.85, True, "the proxy's round trip, probed alone"),
        ("DECOUPLED 64, the slave holding each ACK / (64 / (delay + loopback round trip))",
         of_rtt("slave_lag_64", 64, False), 0.85, True, "the delay asked for and the direct round trip"),
        ("DECOUPLED 64, the slave holding each ACK / (64 / the round trip as applied)",
         of_applied("slave_lag_64", 64), 0.85, True, "the slave's measured hold and the direct round trip"),
        ("DECOUPLED 64 / BLOCKING 64 throughput", ratio("decoupled_64", "blocking_64"), 16, True,
         "4 slots vs 64 producers"),
        ("DECOUPLED 256 through the proxy / the nearer bound", of_nearer("decoupled_256", 256, True), 0.8, True,
         "the round trip or the CPU, whichever is lower"),
        ("DECOUPLED 256, the slave holding each ACK / the nearer bound", of_nearer("slave_lag_256", 256, False),
         0.8, True, "the round trip or the CPU, whichever is lower"),
        ("SYNC_FLUSH latency / (ASYNC_FLUSH latency + 2 fdatasync p50), 64 producers",
         sync_latency("group_commit_64"), 1.0, False, "this disk's fdatasync, probed in the run"),
        ("the same, fdatasync on the flush thread (no io_uring)", sync_latency("group_commit_thread_64"), 1.0,
         False, "this disk's fdatasync, probed in the run"),
        ("SYNC_FLUSH / ASYNC_FLUSH throughput, 64 producers", ratio("group_commit_64", "async_flush_64"), 0.7,
         True, "ASYNC_FLUSH of the same master"),
        ("group commit / one fsync per message, 64 producers", ratio("group_commit_64", "fsync_per_message_64"),
         10, True, "one fsync per message"),
        ("TSP fix / pool off latency, 4 producers", latency_ratio("tsp_fixed_4", "tsp_off_4"), 1.2, False,
         "pool off"),
        ("TSP fix / pool off latency, 64 producers", latency_ratio("tsp_fixed_64", "tsp_off_64"), 1.2, False,
         "pool off"),
    ]


def _bounds(work: Path, run: int) -> dict:
    network = round_trip(DELAY_MS)
    disk = raw_disk(_fresh(work, f"raw-{run}"))
    return {"through_proxy_ms": network["through_proxy_ms"]["avg"], "direct_ms": network["direct_ms"]["avg"],
            "proxy_added_ms": network["proxy_added_ms"], "fdatasync_p50_ms": disk["fdatasync_ms"]["p50"],
            "fdatasyncs_per_s": disk["fdatasyncs_per_s"]}


def _measure(work: Path, tree: Path | None, name: str, count: int, tsp_count: int, size: int,
             timeline: bool) -> dict:
    flags, producers, delay, proxy, _, small = POINTS[name]
    if name.startswith("tsp_"):
        delay = 0.0              # a slave connected through the proxy with no delay, as `bench tsp` runs it
    return _point(_fresh(work, name), flags, producers, min(count, tsp_count) if small else count, size, delay,
                  tree, proxy_delay=proxy, timeline=timeline)


def _median_run(rows: list[dict]) -> dict:
    """The run of a point with the median throughput (its figures kept together)."""
    return sorted(rows, key=_x)[len(rows) // 2]


def _median(values: list[float | None]) -> float | None:
    have = [v for v in values if v is not None]
    return round(statistics.median(have), 3) if have else None


def goals(work: Path, count: int, runs: int = 3, baseline: Path | None = None, tsp_count: int = 1000,
          size: int = 256, progress: Callable[[str], None] = print) -> dict:
    assert runs >= 1 and count >= 1
    trees = (("before", baseline), ("after", None)) if baseline is not None else (("after", None),)
    points: dict[str, dict[str, list[dict]]] = {t: {} for t, _ in trees}
    bounds = []
    for run in range(runs):
        progress(f"goals run {run + 1}/{runs}: the bounds")
        bounds.append(_bounds(work, run))
        for name, spec in POINTS.items():
            # the trees alternate which goes first, run by run: neither always finds the disk or the
            # page cache as the other left them
            for tree_name, tree in (trees if run % 2 == 0 else trees[::-1]):
                if tree is not None and spec[4]:
                    continue
                progress(f"goals run {run + 1}/{runs}: {name} ({tree_name})")
                run_dir = work / f"run{run}-{tree_name}"
                run_dir.mkdir(parents=True, exist_ok=True)
                # a point both trees run goes without timelines (the tree before has none to pay for);
                # one only this tree runs, or any with no tree before, keeps them (a slave's hold is a bound)
                points[tree_name].setdefault(name, []).append(
                    _measure(run_dir, tree, name, count, tsp_count, size, timeline=spec[4] or baseline is None))
    rows = []
    for name, compute, target, higher, bound in _goals():
        row = {"goal": name, "target": target, "higher_is_better": higher, "bound": bound}
        for tree_name, _ in trees:
            per_run = []
            for run in range(runs):
                pts = {p: v[run] for p, v in points[tree_name].items()}
                value = compute(pts, bounds[run])
                per_run.append(round(value, 3) if value is not None else None)
            row[tree_name] = _median(per_run)
            row[f"{tree_name}_runs"] = per_run
        after = row["after"]
        row["met"] = None if after is None else (after >= target if higher else after <= target)
        rows.append(row)
    medians = {}
    for tree_name, _ in trees:
        for name, runs_rows in points[tree_name].items():
            mid = _median_run(runs_rows)
            medians.setdefault(tree_name, {})[name] = {k: mid[k] for k in ("producers", "msgs_per_s", "avg_ms", "p99_ms",
                                                                           "cpu_us_per_msg", "statuses")}
    # where the time goes: this tree's median run of a point that kept its timelines, else one more
    # measurement of it with them (after the runs: their figures are not taken from it)
    breakdowns = {}
    for name in BREAKDOWN_POINTS:
        runs_rows = points["after"].get(name)
        if not runs_rows:
            continue
        row = _median_run(runs_rows)
        if not row.get("breakdown"):
            progress(f"goals: {name} once more, with timelines")
            row = _measure(work / "timelines", None, name, count, tsp_count, size, timeline=True)
        breakdowns[name] = {"msgs_per_s": row["msgs_per_s"], "client_avg_ms": row["avg_ms"], **row["breakdown"]}
    return {"scenario": "goals", "runs": runs, "count": count, "baseline": str(baseline) if baseline else None,
            "delay_ms_each_way": DELAY_MS, "bounds": bounds, "rows": rows, "medians": medians,
            "breakdowns": breakdowns}
