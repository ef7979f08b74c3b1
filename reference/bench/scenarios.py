"""The benchmark scenarios: each runs real master and slave processes (files,
fdatasync, TCP on 127.0.0.1) side by side in one run and returns rows and
the ratios between them.  Nothing here asserts a speed: it measures.

* ``ack`` (seed 000): SYNC_MASTER, BLOCKING vs DECOUPLED ack mode with the
  same processor pool, a slave behind a delaying proxy; and flush +
  replication in sequence (BLOCKING) vs in parallel (DECOUPLED) under
  SYNC_FLUSH + SYNC_MASTER.
* ``groupcommit`` (seed 003): SYNC_FLUSH with group commit vs one fsync per
  message, against this disk's raw fdatasync rate and write bandwidth.
* ``sim``: in reference/bench/simrates.py (one process per run, CPU time).
* ``rss``: peak resident memory of a master and a slave while 2 GiB go through them.
* ``cpu``: CPU per message of the master and the slave, before (a baseline source tree) and
  after, side by side, with a profile of this master.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from reference.bench.bounds import nearer_bound, round_trip
from reference.bench.breakdown import breakdown
from reference.bench.procs import cpu_seconds, start_master, start_replica
from reference.bench.proxy import DelayProxy
from reference.real.load import run_load

Progress = Callable[[str], None]
WARM_UP_MESSAGES = 20
# The producers share one connection, as a RocketMQ client's sending threads share one channel per
# broker (NettyRemotingClient): the broker reads many requests and answers many per system call.
CONNECTIONS = 1
SLAVE_LAG = "DECOUPLED_SLAVE_LAG"     # bench ack: the round trip's delay in the slave's loop, no proxy


def _point(work: Path, flags: list[str], producers: int, count: int, size: int, delay_ms: float | None,
           tree: Path | None = None, profile: Path | None = None, connections: int | None = CONNECTIONS,
           proxy_delay: bool = True, timeline: bool = True) -> dict:
    """One measurement: a fresh master (and slave behind the proxy, or connected directly when
    ``proxy_delay`` is off and the slave holds each ACK for the round trip), a warm-up, the load; with the CPU each
    process spent per message (user + system, from /proc), the load average, and where a request's
    time went (the processes' timelines: ``timeline`` off where the point is compared with a baseline
    tree, which has no --timeline, so that only one side would pay for the marking)."""
    prefix = ["-m", "cProfile", "-o", str(profile)] if profile else []
    timelines = timeline and tree is None
    master = start_master(work / "master", [*flags, *(["--timeline", str(work / "master.timeline")]
                                                      if timelines else [])], tree, prefix)
    proxy = replica = None
    try:
        if delay_ms is not None:
            proxy = DelayProxy(("127.0.0.1", master.ha_port), delay_ms) if proxy_delay else None
            lag = [] if proxy else ["--inject-ack-lag-ms", str(round(2 * delay_ms))]
            replica = start_replica(work / "r1", proxy.port if proxy else master.ha_port, "r1",
                                    [*lag, *(["--timeline", str(work / "r1.timeline")] if timelines else [])], tree)
            master.wait_for(r"slave r1 connected")
        target = ("127.0.0.1", master.port)
        warm = run_load(target, 1, WARM_UP_MESSAGES, size, first_key=10_000_000)   # connections, page cache
        cpu_before = (master.cpu_seconds(), replica.cpu_seconds() if replica else 0.0, time.process_time(),
                      cpu_seconds(proxy.popen.pid) if proxy else 0.0)
        before = time.perf_counter()
        load_started_ns = time.monotonic_ns()
        result = run_load(target, producers, count, size, connections=connections)
        seconds = time.perf_counter() - before
        cpu_after = (master.cpu_seconds(), replica.cpu_seconds() if replica else 0.0, time.process_time(),
                     cpu_seconds(proxy.popen.pid) if proxy else 0.0)
    finally:
        if replica:
            replica.stop()
        if proxy:
            proxy.close()
        stats = master.stop()
    ok = result.statuses.get("PUT_OK", 0)
    per_msg = [round(1e6 * (b - a) / max(result.sent, 1), 1) for a, b in zip(cpu_before, cpu_after)]
    return {"producers": producers, "messages": result.sent, "seconds": round(seconds, 3),
            "msgs_per_s": round(result.sent / seconds, 1), "avg_ms": result.latency_ms["avg"],
            "p50_ms": result.latency_ms["p50"], "p99_ms": result.latency_ms["p99"], "statuses": result.statuses,
            "put_ok": ok, "fsyncs": stats.get("fsyncs", 0), "warm_up_ok": warm.statuses.get("PUT_OK", 0),
            "cpu_us_per_msg": {"master": per_msg[0], "replica": per_msg[1], "load": per_msg[2], "proxy": per_msg[3]},
            "load_average": round(os.getloadavg()[0], 2),
            **({"breakdown": _breakdown(work, flags, replica is not None, load_started_ns, result)} if timelines else {})}


def _breakdown(work: Path, flags: list[str], replicated: bool, since_ns: int, result) -> dict:
    """The point's phases (reference/bench/breakdown.py): the flush leg under SYNC_FLUSH, the replica
    leg under SYNC_MASTER (neither: admission, write, release, send); and what the client saw beyond
    the broker's own time (its loop, loopback)."""
    flush = flags[flags.index("--flush-disk-type") + 1] == "SYNC_FLUSH" if "--flush-disk-type" in flags else False
    sync_master = "SYNC_MASTER" in flags and replicated
    out = breakdown(work / "master.timeline", work / "r1.timeline" if replicated else None, since_ns,
                    flush_leg=flush, replica_leg=sync_master)
    broker = out["broker_ms"]["avg"]
    out["outside_broker_ms"] = round(result.latency_ms["avg"] - broker, 3) if broker is not None else None
    return out


def _fresh(work: Path, name: str) -> Path:
    path = work / name
    path.mkdir(parents=True, exist_ok=False)
    return path


def ack(work: Path, producers: list[int], count: int, size: int = 256, delay_ms: float = 2.0, pool: int = 4,
        progress: Progress = print) -> dict:
    common = ["--broker-role", "SYNC_MASTER", "--replicas", "r1", "--send-message-thread-pool-nums", str(pool),
              "--slave-timeout-ms", "10000", "--sync-flush-timeout-ms", "10000",
              # RocketMQ's 200 ms would reject BLOCKING's queue as OS_PAGE_CACHE_BUSY, which is the
              # point of flow control but hides the throughput; the rejections are counted anyway.
              "--wait-time-in-send-queue-ms", "60000"]
    progress("ack: the round trip through the proxy alone")
    network = round_trip(delay_ms)
    rtt = network["through_proxy_ms"]["avg"]
    rows = []
    for mode in ("BLOCKING", "DECOUPLED"):
        for p in producers:
            progress(f"ack {mode} {p} producers")
            row = _point(_fresh(work, f"ack-{mode}-{p}"), [*common, "--flush-disk-type", "ASYNC_FLUSH",
                                                           "--ack-mode", mode], p, count, size, delay_ms)
            # BLOCKING holds a processor slot a round trip per request; DECOUPLED a producer
            slots = pool if mode == "BLOCKING" else p
            rows.append({"mode": mode, **row, **nearer_bound(row["msgs_per_s"], slots, rtt, row["cpu_us_per_msg"])})
    # the same round trip without the proxy's process: the slave connected directly holds each ACK for
    # it (--inject-ack-lag-ms, in its lightly loaded loop), so each DATA and ACK wakes no proxy
    lag_ms = round(2 * delay_ms)
    if lag_ms:
        lag_rtt = lag_ms + network["direct_ms"]["avg"]
        for p in producers:
            progress(f"ack DECOUPLED {p} producers, the delay in the slave's loop")
            row = _point(_fresh(work, f"ack-lag-{p}"), [*common, "--flush-disk-type", "ASYNC_FLUSH", "--ack-mode",
                                                        "DECOUPLED"], p, count, size, delay_ms, proxy_delay=False)
            rows.append({"mode": SLAVE_LAG, **row, "rtt_ms": round(lag_rtt, 3),
                         **nearer_bound(row["msgs_per_s"], p, lag_rtt, row["cpu_us_per_msg"])})
    ratios = []
    for p in producers:
        b = next(r for r in rows if r["mode"] == "BLOCKING" and r["producers"] == p)
        d = next(r for r in rows if r["mode"] == "DECOUPLED" and r["producers"] == p)
        lag = next((r for r in rows if r["mode"] == SLAVE_LAG and r["producers"] == p), None)
        ratios.append({"producers": p, "throughput_ratio": round(d["msgs_per_s"] / b["msgs_per_s"], 2),
                       "avg_latency_ratio": round(b["avg_ms"] / d["avg_ms"], 2) if d["avg_ms"] else None,
                       "decoupled_avg_over_rtt": round(d["avg_ms"] / (2 * delay_ms), 2) if delay_ms else None,
                       **({"slave_lag_over_proxy": round(lag["msgs_per_s"] / d["msgs_per_s"], 2)} if lag else {})})
    p_seq = 16 if 16 in producers else producers[len(producers) // 2]
    both = []
    for mode, name in (("BLOCKING", "sequence"), ("DECOUPLED", "parallel")):
        progress(f"ack flush+replication in {name}")
        row = _point(_fresh(work, f"seq-{name}"), [*common, "--flush-disk-type", "SYNC_FLUSH", "--ack-mode", mode],
                     p_seq, count, size, delay_ms)
        both.append({"flush_then_replica": name, "mode": mode, **row})
    return {"scenario": "ack", "delay_ms_each_way": delay_ms, "rtt_ms": 2 * delay_ms, "pool": pool, "network": network,
            "size_bytes": size, "rows": rows, "ratios": ratios, "sync_flush_sync_master": both,
            "headline": _headline(ratios, "throughput_ratio")}


def _headline(ratios: list[dict], key: str) -> dict:
    """The ratio at 64 producers (the seeds' figure), or at the largest count measured."""
    at = next((r for r in ratios if r["producers"] == 64), ratios[-1])
    return {"producers": at["producers"], key: at[key]}


def tsp(work: Path, producers: list[int], count: int, size: int = 256, delay_ms: float = 0.0,
        progress: Progress = print) -> dict:
    """Seed 001 / RocketMQ #1372: ASYNC_FLUSH + SYNC_MASTER with the transient store pool off, on
    (slaves wait for the commit interval: they can only read committed data), and on with the fix
    (``commit_on_replica_wait``).  RocketMQ's defaults otherwise, including
    wait_time_in_send_queue_ms = 200, so flow-control rejections are counted."""
    common = ["--flush-disk-type", "ASYNC_FLUSH", "--broker-role", "SYNC_MASTER", "--replicas", "r1",
              "--wait-time-in-send-queue-ms", "200"]
    variants = (("pool_off", ["--transient-store-pool-enable", "false"]),
                ("pool_on", ["--transient-store-pool-enable", "true"]),
                ("pool_on_fixed", ["--transient-store-pool-enable", "true", "--commit-on-replica-wait", "true"]))
    rows = []
    for name, flags in variants:
        for p in producers:
            progress(f"tsp {name} {p} producers")
            row = _point(_fresh(work, f"tsp-{name}-{p}"), [*common, *flags], p, count, size, delay_ms)
            row["rejected_busy"] = row["statuses"].get("OS_PAGE_CACHE_BUSY", 0)
            rows.append({"mode": name, **row})
    ratios = []
    for p in producers:
        by = {r["mode"]: r for r in rows if r["producers"] == p}
        ratios.append({"producers": p,
                       "pool_on_p50_ms": by["pool_on"]["p50_ms"], "commit_interval_ms": 200,
                       "fixed_over_off_avg_latency": round(by["pool_on_fixed"]["avg_ms"] / by["pool_off"]["avg_ms"], 2)
                       if by["pool_off"]["avg_ms"] else None,
                       "fixed_over_off_throughput": round(by["pool_on_fixed"]["msgs_per_s"] / by["pool_off"]["msgs_per_s"],
                                                          2)})
    return {"scenario": "tsp", "delay_ms_each_way": delay_ms, "size_bytes": size, "rows": rows, "ratios": ratios}


def raw_disk(directory: Path, seconds: float = 1.5, write_mib: int = 64) -> dict:
    """This disk's fdatasync rate (4 KiB append + fdatasync) and sequential write bandwidth."""
    path = directory / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        block = b"\0" * 4096
        n, start = 0, time.perf_counter()
        latencies = []
        while time.perf_counter() - start < seconds:
            os.write(fd, block)
            t = time.perf_counter()
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - t)
            n += 1
        fsync_rate = n / (time.perf_counter() - start)
        latencies.sort()
        os.ftruncate(fd, 0)
        chunk = b"\1" * (1 << 20)
        start = time.perf_counter()
        for _ in range(write_mib):
            os.write(fd, chunk)
        os.fdatasync(fd)
        bandwidth = write_mib / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    return {"fdatasyncs_per_s": round(fsync_rate, 1), "write_mib_per_s": round(bandwidth, 1),
            "fdatasync_ms": {"p50": round(1000 * latencies[len(latencies) // 2], 3),
                             "p90": round(1000 * latencies[int(len(latencies) * 0.9)], 3)}}


def groupcommit(work: Path, producers: list[int], count: int, size: int = 256,
                progress: Progress = print) -> dict:
    progress("groupcommit: raw disk")
    disk = raw_disk(_fresh(work, "raw"))
    common = ["--flush-disk-type", "SYNC_FLUSH", "--broker-role", "ASYNC_MASTER", "--sync-flush-timeout-ms", "60000",
              "--wait-time-in-send-queue-ms", "60000"]
    rows = []
    for name, flag in (("group_commit", "false"), ("fsync_per_message", "true"), ("async_flush", None)):
        for p in producers:
            progress(f"groupcommit {name} {p} producers")
            flags = ([*common, "--flush-one-message-per-fsync", flag] if flag else
                     [*[c if c != "SYNC_FLUSH" else "ASYNC_FLUSH" for c in common]])
            row = _point(_fresh(work, f"gc-{name}-{p}"), flags, p, count, size, None)
            fsyncs = max(row["fsyncs"], 1)               # the warm-up's fsyncs are in the master's count
            batch = (row["put_ok"] + row["warm_up_ok"]) / fsyncs
            limit = disk["fdatasyncs_per_s"] * batch
            rows.append({"mode": name, **row, "fsyncs_per_msg": round(1 / batch, 3) if batch else None,
                         "mean_batch": round(batch, 2), "fsync_bound_msgs_per_s": round(limit, 1),
                         "of_fsync_bound": round(row["msgs_per_s"] / limit, 2) if limit else None})
    ratios = []
    for p in producers:
        g = next(r for r in rows if r["mode"] == "group_commit" and r["producers"] == p)
        f = next(r for r in rows if r["mode"] == "fsync_per_message" and r["producers"] == p)
        a = next(r for r in rows if r["mode"] == "async_flush" and r["producers"] == p)
        # issue 39's bound: SYNC_FLUSH's latency against ASYNC_FLUSH's plus two fsyncs of this disk
        bound_ms = a["avg_ms"] + 2 * disk["fdatasync_ms"]["p50"]
        ratios.append({"producers": p, "throughput_ratio": round(g["msgs_per_s"] / f["msgs_per_s"], 2),
                       "sync_over_async_flush": round(g["msgs_per_s"] / a["msgs_per_s"], 2),
                       "sync_latency_bound_ms": round(bound_ms, 3),
                       "sync_latency_over_bound": round(g["avg_ms"] / bound_ms, 3) if bound_ms else None})
    return {"scenario": "groupcommit", "disk": disk, "size_bytes": size, "rows": rows, "ratios": ratios,
            "headline": {**_headline(ratios, "throughput_ratio"),
                         "sync_over_async_flush": _headline(ratios, "sync_over_async_flush")["sync_over_async_flush"]}}


def rss(work: Path, gib: float = 2.0, size: int = 16 * 1024, producers: int = 16, tree: Path | None = None,
        progress: Progress = print) -> dict:
    """Issue 12's memory bound: write ``gib`` GiB through a real master and slave under SYNC_FLUSH +
    SYNC_MASTER and sample both processes' resident set as the log grows; the peak (VmHWM) of
    each is the figure.  Memory that grows with the log would show in the samples."""
    flags = ["--flush-disk-type", "SYNC_FLUSH", "--broker-role", "SYNC_MASTER", "--replicas", "r1",
             "--slave-timeout-ms", "20000", "--sync-flush-timeout-ms", "20000",
             "--wait-time-in-send-queue-ms", "60000", "--max-message-size", str(2 * max(size, 4096))]
    master = start_master(work / "master", flags, tree)
    replica = None
    samples = []
    try:
        replica = start_replica(work / "r1", master.ha_port, "r1", [], tree)
        master.wait_for(r"slave r1 connected")
        record = size + 20
        count = int(gib * (1 << 30)) // record + 1
        acked = [0]
        stop = threading.Event()
        box: dict = {}

        def load() -> None:
            box["result"] = run_load(("127.0.0.1", master.port), producers, count, size, timeout_s=60, stop=stop,
                                     on_ack=lambda a: acked.__setitem__(0, acked[0] + 1))
        loader = threading.Thread(target=load, daemon=True)
        start = time.perf_counter()
        loader.start()
        while loader.is_alive():
            loader.join(0.25)
            written = acked[0] * record
            samples.append({"seconds": round(time.perf_counter() - start, 2), "written_mib": round(written / (1 << 20), 1),
                            "master_rss_mib": round(master.rss_kib()[0] / 1024, 1),
                            "replica_rss_mib": round(replica.rss_kib()[0] / 1024, 1)})
            progress(f"rss: {written / (1 << 30):.2f} of {gib} GiB written")
        seconds = time.perf_counter() - start
        result = box["result"]
        peaks = {"master_peak_rss_mib": round(master.rss_kib()[1] / 1024, 1),
                 "replica_peak_rss_mib": round(replica.rss_kib()[1] / 1024, 1)}
    finally:
        if replica:
            replica.stop()
        master.stop()
    quarter = [min(samples, key=lambda x: abs(x["written_mib"] - q * samples[-1]["written_mib"]))
               for q in (0.25, 0.5, 0.75, 1.0)] if samples else []
    return {"scenario": "rss", "gib": gib, "size_bytes": size, "producers": producers, "tree": str(tree or "current"),
            "messages": result.statuses.get("PUT_OK", 0), "statuses": result.statuses,
            "written_gib": round(acked[0] * (size + 20) / (1 << 30), 3), "seconds": round(seconds, 1),
            "msgs_per_s": round(result.sent / seconds, 1), **peaks, "at_quarters": quarter,
            "samples": samples[:: max(1, len(samples) // 200)], "goal_mib": 150}


def cpu(work: Path, count: int, size: int = 256, delay_ms: float = 2.0, baseline: Path | None = None,
        profile_to: Path | None = None, progress: Progress = print) -> dict:
    """Per-message CPU (µs, user + system) of the master and the slave at 64 producers: SYNC_MASTER
    DECOUPLED behind the 2 ms proxy, and SYNC_FLUSH group commit; the same points run from a
    ``baseline`` source tree (the code before issue 12) side by side; a profile of this master."""
    points = (("sync_master_decoupled", ["--broker-role", "SYNC_MASTER", "--replicas", "r1", "--ack-mode",
                                         "DECOUPLED", "--slave-timeout-ms", "10000",
                                         "--wait-time-in-send-queue-ms", "60000"], delay_ms),
              ("sync_flush_group_commit", ["--flush-disk-type", "SYNC_FLUSH", "--sync-flush-timeout-ms", "60000",
                                           "--wait-time-in-send-queue-ms", "60000"], None))
    rows = []
    for tree_name, tree in (("before", baseline), ("after", None)):
        if tree_name == "before" and baseline is None:
            continue
        for name, flags, delay in points:
            progress(f"cpu {tree_name}: {name}")
            row = _point(_fresh(work, f"cpu-{tree_name}-{name}"), flags, 64, count, size, delay, tree, timeline=False)
            rows.append({"mode": f"{tree_name} {name}", "tree": str(tree or "current"), **row})
    out = {"scenario": "cpu", "size_bytes": size, "rows": rows, "ratios": []}
    if profile_to is not None:
        progress("cpu: profiling this master")
        prof = work / "master.prof"
        _point(_fresh(work, "cpu-profile"), points[0][1], 64, count, size, delay_ms, profile=prof, timeline=False)
        out["profile"] = profile_summary(prof, profile_to)
    if baseline is not None:
        for name, _, _ in points:
            b = next(r for r in rows if r["mode"] == f"before {name}")
            a = next(r for r in rows if r["mode"] == f"after {name}")
            out["ratios"].append({"point": name, "master_us_before": b["cpu_us_per_msg"]["master"],
                                  "master_us_after": a["cpu_us_per_msg"]["master"],
                                  "throughput_after_over_before": round(a["msgs_per_s"] / b["msgs_per_s"], 2)})
    return out


def profile_summary(prof: Path, out: Path, top: int = 25) -> str:
    """The top functions of a cProfile run by own time, as text (written to ``out``)."""
    import io
    import pstats

    text = io.StringIO()
    pstats.Stats(str(prof), stream=text).sort_stats("tottime").print_stats(top)
    body = text.getvalue()
    body = body[body.index("ncalls"):] if "ncalls" in body else body
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body)
    return body


def workdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="ackorder-bench-", dir=os.environ.get("ACKORDER_BENCH_DIR"))
