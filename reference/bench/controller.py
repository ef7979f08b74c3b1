"""`ackorder bench controller`: one real controller process (`ackorder
controller`), brokers simulated over real TCP (one connection each, three
brokers per group), both designs side by side in one run (seed 002).

Per design and group count: every broker registers, then heartbeats every
``heartbeat_interval_ms`` (BrokerConfig.brokerHeartbeatInterval, 1,000 ms;
the controller expires a broker after controllerHeartBeatTimeoutMills,
10,000 ms).  Steady phase: each group's master runs a closed loop of
AlterSyncStateSet (adding and dropping its second broker, one proposal in
flight, as a master does), while every broker heartbeats: the throughput.
Failover phase: the masters of a tenth of the groups (at least one) stop
heartbeating; the others keep altering, each once per
``alter_interval_ms`` (checkSyncStateSetPeriod, 5 s: how often a real
master may propose); from just before the stopped master's heartbeat can
expire, its group's second broker polls GetReplicaInfo every ``poll_ms``
until it sees a new master.  Election
time runs from the master's last heartbeat to that moment; it contains the
heartbeat timeout, so it is also given beyond the timeout (the controller's
own share: scan, decision, fsync, the reply).

``cluster1`` and ``cluster3`` (issue 37): 1 or 3 controllers over a
fresh 3-member etcd (`controller --etcd`, reference/real/controller_cluster.py),
the groups' connections spread over them; requests for another
controller's shard are forwarded, GetReplicaInfo is read from etcd by the
controller asked.  Each point also runs a read phase: every group's client
asks GetReplicaInfo in a closed loop (reads/s).  With ``runs`` > 1 every
point is measured that many times and each figure is the median.

Each group's three brokers share one connection (10,000 groups are 10,000
connections: this machine allows 20,000 descriptors per process).

``stores``: the metadata store of each point, the file (fdatasync) and/or
etcd (a fresh 3-member cluster on loopback per point,
reference/real/etcd_cluster.py): the same workload, side by side.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from reference.bench.procs import Broker
from reference.bench.scenarios import raw_disk
from reference.real.controller_client import ControllerClient

BROKERS_PER_GROUP = 3
CONNECT_AT_ONCE = 200
MAX_VICTIMS = 100               # masters stopped in the failover phase: a tenth of the groups, at most this
CLUSTER_DESIGNS = {"cluster1": 1, "cluster3": 3}    # controllers over one etcd
CLUSTER_LEASE_TTL_S = 3
# every group's connection is opened first and registers when its turn comes: at 10,000 groups on the
# serial design the last ones wait minutes, which the default idle timeout (120 s) would close
IDLE_TIMEOUT_MS = 3_600_000
AGAIN = ("CONTROLLER_NOT_LEADER", "CONTROLLER_METADATA_NOT_DURABLE", "CONTROLLER_BUSY")   # a broker asks again


@attrs.frozen
class Plan:
    groups: tuple[int, ...]
    steady_s: float
    heartbeat_interval_ms: int
    timeout_ms: int
    poll_ms: int
    alter_interval_ms: int           # the failover phase's alters: one per master per interval
    designs: tuple[str, ...] = ("serial", "pipelined")
    stores: tuple[str, ...] = ("file",)
    reads_s: float = 3.0              # the closed-loop GetReplicaInfo phase
    runs: int = 1                     # each point measured this often; the rows give medians
    once: tuple[int, ...] = ()        # group counts measured in the first run only (minutes a point)
    again: tuple[int, ...] | None = None   # with runs > 1: the group counts measured again (None: every one)
    largest: tuple[str, ...] = ()     # the designs (file store) measured at the largest group count, if not all


# alter_interval_ms: BrokerConfig.checkSyncStateSetPeriod (5 s), how often a master may propose
FULL = Plan(groups=(1, 100, 1000, 10_000), steady_s=10.0, heartbeat_interval_ms=1000, timeout_ms=10_000, poll_ms=20,
            alter_interval_ms=5000, designs=("serial", "cluster1", "cluster3"), stores=("file", "etcd"), reads_s=5.0,
            runs=3, once=(10_000,), again=(1000,), largest=("cluster3",))
QUICK = Plan(groups=(1, 20), steady_s=1.5, heartbeat_interval_ms=100, timeout_ms=500, poll_ms=10,
             alter_interval_ms=500, designs=("serial", "pipelined", "cluster3"), reads_s=1.0)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 2)


class Group:
    def __init__(self, name: str) -> None:
        self.name = name
        self.clients: list[ControllerClient] = []
        self.master_epoch = self.sss_epoch = 1
        self.master_id = 1
        self.sss = frozenset({1})
        self.heartbeating = [True] * BROKERS_PER_GROUP
        self.last_heartbeat_s = [0.0] * BROKERS_PER_GROUP


class Run:
    """The simulated brokers of one measurement point."""

    def __init__(self, ports: list[int], groups: int, plan: Plan) -> None:
        self.ports, self.plan = ports, plan
        self.groups = [Group(f"broker-{i:04d}") for i in range(groups)]
        self.stop_all = False
        self.altering: set[str] = set()
        self.heartbeats: list[float] = []        # latencies (ms) of replies received
        self.alters: list[tuple[float, float]] = []  # (completion time s, latency ms) of accepted alters
        self.refused = 0
        self.reads = 0
        self.heartbeats_failed = 0
        self.reads_failed = 0
        self.refusals: dict[str, int] = {}

    async def connect(self) -> None:
        """One connection per group, its three brokers' requests multiplexed on it; group k's goes
        to controller k mod n."""
        gate = asyncio.Semaphore(CONNECT_AT_ONCE)

        async def one(k: int) -> ControllerClient:
            async with gate:
                return await ControllerClient.connect("127.0.0.1", self.ports[k % len(self.ports)])
        clients = await asyncio.gather(*(one(k) for k in range(len(self.groups))))
        for k, g in enumerate(self.groups):
            g.clients = [clients[k]] * BROKERS_PER_GROUP

    async def register(self) -> None:
        gate = asyncio.Semaphore(CONNECT_AT_ONCE)

        async def register(g: Group, b: int, **extra) -> dict:
            for _ in range(300):     # a shard between owners, or a busy controller: ask again, as a broker does
                r = await g.clients[b - 1].register(g.name, b, **extra)
                if r["code"] not in AGAIN:
                    return r
                await asyncio.sleep(0.1)
            return r

        async def group(g: Group) -> None:
            async with gate:
                first = await register(g, 1, election_priority=0)
                assert first["code"] == "SUCCESS" and first["info"]["master_id"] == 1, first
                for b in range(2, BROKERS_PER_GROUP + 1):
                    r = await register(g, b)
                    assert r["code"] == "SUCCESS", r
        await asyncio.gather(*(group(g) for g in self.groups))

    async def heartbeat_loop(self, g: Group, b: int) -> None:
        interval_s = self.plan.heartbeat_interval_ms / 1000
        await asyncio.sleep(random.random() * interval_s)
        while not self.stop_all and g.heartbeating[b - 1]:
            t0 = time.perf_counter()
            g.last_heartbeat_s[b - 1] = t0
            r = await g.clients[b - 1].heartbeat(g.name, b, max_offset=1000 * b, epoch=g.master_epoch)
            if r["code"] == "SUCCESS":
                self.heartbeats.append((time.perf_counter() - t0) * 1000)
            else:
                self.heartbeats_failed += 1
            await asyncio.sleep(max(0.0, interval_s - (time.perf_counter() - t0)))

    async def alter_loop(self, g: Group, interval_s: float = 0.0) -> None:
        """The master's loop: add broker 2, drop it, add it..., one proposal in flight; back to
        back (``interval_s`` 0), or one per interval as checkSyncStateSetPeriod paces a master."""
        client = g.clients[0]
        if interval_s:
            await asyncio.sleep(random.random() * interval_s)
        while g.name in self.altering and not self.stop_all:
            t0 = time.perf_counter()
            await self.alter_once(g, client)
            if interval_s:
                await asyncio.sleep(max(0.0, interval_s - (time.perf_counter() - t0)))

    async def alter_once(self, g: Group, client: ControllerClient, target: frozenset | None = None) -> None:
        new = target if target is not None else (g.sss ^ {2})
        if g.master_id != 1 or 1 not in new:
            # an overloaded controller lost this group's master (heartbeats answered too late): broker 1
            # proposes nothing more, as a demoted master would not
            await asyncio.sleep(0.1)
            return
        t0 = time.perf_counter()
        r = await client.alter(g.name, 1, g.master_epoch, g.sss_epoch, new)
        t1 = time.perf_counter()
        if r["code"] == "SUCCESS":
            self.alters.append((t1, (t1 - t0) * 1000))
        else:
            self.refused += 1
            self.refusals[r["code"]] = self.refusals.get(r["code"], 0) + 1
        info = r["info"]
        if info is None:        # not decided (CONTROLLER_BUSY, CONTROLLER_NOT_LEADER): the next try asks again
            return
        g.sss, g.sss_epoch, g.master_epoch = frozenset(info["sync_state_set"]), info["sss_epoch"], info["master_epoch"]
        g.master_id = info["master_id"]

    async def read_phase(self) -> float:
        """Every group's client asks GetReplicaInfo in a closed loop: reads answered per second."""
        stop_at = time.perf_counter() + self.plan.reads_s
        count = 0

        async def reader(g: Group) -> None:
            nonlocal count
            while time.perf_counter() < stop_at:
                r = await g.clients[1].get_replica_info(g.name)
                if r["code"] == "SUCCESS":
                    count += 1
                else:
                    self.reads_failed += 1
        t0 = time.perf_counter()
        await asyncio.gather(*(reader(g) for g in self.groups))
        return round(count / (time.perf_counter() - t0), 1)

    async def wait_new_master(self, g: Group) -> tuple[float, float]:
        """Broker 2 polls until the group has a master other than broker 1: (ms since broker 1's
        last heartbeat, when)."""
        poll_s = self.plan.poll_ms / 1000
        deadline = time.perf_counter() + self.plan.timeout_ms / 1000 * 3 + 60
        # no reads before the heartbeat can expire: polling all along would add load of its own
        expiry_s = g.last_heartbeat_s[0] + self.plan.timeout_ms / 1000
        await asyncio.sleep(max(0.0, expiry_s - 2 * poll_s - time.perf_counter()))
        while time.perf_counter() < deadline:
            r = await g.clients[1].get_replica_info(g.name)
            if r["info"] is not None and r["info"]["master_id"] not in (0, 1):
                now = time.perf_counter()
                return (now - g.last_heartbeat_s[0]) * 1000, now
            await asyncio.sleep(poll_s)
        raise TimeoutError(f"{g.name}: no new master within {deadline} s")

    async def measure(self) -> dict:
        await self.connect()
        await self.register()
        beats = [asyncio.create_task(self.heartbeat_loop(g, b)) for g in self.groups
                 for b in range(1, BROKERS_PER_GROUP + 1)]
        await asyncio.sleep(self.plan.heartbeat_interval_ms / 1000)         # every broker heard once
        self.heartbeats.clear()
        self.altering = {g.name for g in self.groups}
        loops = {g.name: asyncio.create_task(self.alter_loop(g)) for g in self.groups}
        t0 = time.perf_counter()
        await asyncio.sleep(self.plan.steady_s)
        t1 = time.perf_counter()
        steady_alters = [lat for at, lat in self.alters if t0 <= at <= t1]
        heartbeats = list(self.heartbeats)
        self.altering.clear()
        await asyncio.gather(*loops.values())
        reads_per_s = await self.read_phase()
        # failover: the closed loops stop; the other masters go on at checkSyncStateSetPeriod's pace;
        # the chosen masters make broker 2 a member, then stop heartbeating
        victims = self.groups[:min(MAX_VICTIMS, max(1, len(self.groups) // 10))]
        self.altering = {g.name for g in self.groups[len(victims):]}
        loops = {g.name: asyncio.create_task(self.alter_loop(g, self.plan.alter_interval_ms / 1000))
                 for g in self.groups[len(victims):]}
        ready = []
        for g in victims:
            for _ in range(100):       # refused while the controller is busy: asked again, as a master does
                if g.sss == frozenset({1, 2}) or g.master_id != 1:
                    break
                await self.alter_once(g, g.clients[0], frozenset({1, 2}))
                await asyncio.sleep(0.05 if g.sss != frozenset({1, 2}) else 0)
            if g.sss == frozenset({1, 2}) and g.master_id == 1:
                ready.append(g)
        # a group whose master an overloaded controller already replaced is no failover to time
        skipped, victims = len(victims) - len(ready), ready
        assert victims, f"no group kept broker 1 as master with {{1, 2}} in sync ({self.refusals})"
        for g in victims:
            g.heartbeating[0] = False
        seen = await asyncio.gather(*(self.wait_new_master(g) for g in victims))
        election_ms = [ms for ms, _ in seen]
        first_expiry_s = min(g.last_heartbeat_s[0] for g in victims) + self.plan.timeout_ms / 1000
        window_s = max(at for _, at in seen) - first_expiry_s
        self.stop_all = True
        self.altering.clear()
        await asyncio.gather(*loops.values(), *beats, return_exceptions=True)
        for g in self.groups:
            await g.clients[0].close()           # the group's one connection
        seconds = t1 - t0
        beyond = [e - self.plan.timeout_ms for e in election_ms]
        return {
            "groups": len(self.groups), "brokers": len(self.groups) * BROKERS_PER_GROUP,
            "heartbeats_per_s": round(len(heartbeats) / seconds), "heartbeat_p50_ms": _pct(heartbeats, 0.5),
            "heartbeat_p99_ms": _pct(heartbeats, 0.99), "heartbeats_failed": self.heartbeats_failed,
            "alters_per_s": round(len(steady_alters) / seconds, 1), "alter_p50_ms": _pct(steady_alters, 0.5),
            "alter_p99_ms": _pct(steady_alters, 0.99), "alters_refused": self.refused, "refusals": self.refusals, "reads_per_s": reads_per_s,
            "elections": len(victims), "victims_skipped": skipped, "reads_failed": self.reads_failed,
            "election_p50_ms": _pct(election_ms, 0.5),
            "election_p99_ms": _pct(election_ms, 0.99), "beyond_timeout_p50_ms": _pct(beyond, 0.5),
            "beyond_timeout_p99_ms": _pct(beyond, 0.99),
            # the victims' elections over the time from the first expiry to the last new master seen
            "elections_per_s": round(len(victims) / max(1e-3, window_s), 1),
        }


def point(work: Path, design: str, groups: int, plan: Plan, store: str = "file", run: int = 1) -> dict:
    name = f"controller-{design}-{groups}" + ("" if store == "file" else f"-{store}") + f"-run{run}"
    directory = work / name
    directory.mkdir(parents=True)
    flags = []
    cluster = None
    if store == "etcd" or design in CLUSTER_DESIGNS:
        from reference.real.etcd_cluster import EtcdCluster

        cluster = EtcdCluster.start(directory, 3)
        flags = ["--store", "etcd", "--etcd-endpoints", cluster.endpoints]
    try:
        if design in CLUSTER_DESIGNS:
            return _measure_cluster(work, name, directory, design, groups, plan, cluster)
        return _measure(work, name, directory, design, groups, plan, store, flags, cluster)
    finally:
        if cluster is not None:
            cluster.stop()


def _etcd_cpu_s(cluster) -> list[float]:
    if cluster is None:
        return []
    out = []
    for m in cluster.members:
        fields = Path(f"/proc/{m.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        out.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return out


def _cpu_rows(row: dict, seconds: float, controllers_cpu: list[float], etcd_cpu: list[float]) -> None:
    """CPU per controller and per etcd member, as the share of one core over the point's run."""
    row["controller_cpu_s"] = round(sum(controllers_cpu), 2)
    row["cpu_per_controller"] = round(max(controllers_cpu) / seconds, 2)
    row["cpu_per_etcd_member"] = round(max(etcd_cpu) / seconds, 2) if etcd_cpu else 0.0


def _measure(work: Path, name: str, directory: Path, design: str, groups: int, plan: Plan, store: str,
             flags: list[str], cluster=None) -> dict:
    proc = Broker(["controller", "--dir", str(directory), "--port", "0", "--design", design,
                   "--controller-broker-heartbeat-timeout-ms", str(plan.timeout_ms), "--max-groups",
                   str(max(groups, 1)), "--idle-timeout-ms", str(IDLE_TIMEOUT_MS), *flags], work / f"{name}.log")
    try:
        m = proc.wait_for(r"listening host=\S+ port=(\d+)")
        cpu0, etcd0, t0 = proc.cpu_seconds(), _etcd_cpu_s(cluster), time.perf_counter()
        row = asyncio.run(Run([int(m.group(1))], groups, plan).measure())
        seconds = time.perf_counter() - t0
        _cpu_rows(row, seconds, [proc.cpu_seconds() - cpu0], [b - a for a, b in zip(etcd0, _etcd_cpu_s(cluster))])
    finally:
        stats = proc.stop()
    row = {"design": design, "store": store, "controllers": 1, **row, "records": stats.get("records", 0),
           "fsyncs": stats.get("fsyncs", 0)}
    row["records_per_fsync"] = round(row["records"] / max(1, row["fsyncs"]), 2)
    # from handing the fdatasync to the worker until the loop hears it is done: what bounds the serial design
    row["fsync_mean_ms"] = round(stats.get("fsync_wait_ms", 0) / max(1, row["fsyncs"]), 2)
    return row


def _measure_cluster(work: Path, name: str, directory: Path, design: str, groups: int, plan: Plan, cluster) -> dict:
    """``n`` controllers over the point's etcd, each with its own member first; measured once every
    shard has an owner."""
    from reference.failover import shards as sh

    n = CLUSTER_DESIGNS[design]
    eps = cluster.endpoints.split(",")
    procs = []
    try:
        for i in range(n):
            mine = ",".join(eps[i % 3:] + eps[:i % 3])
            procs.append(Broker(["controller", "--etcd", mine, "--controller-id", f"c{i}", "--port", "0",
                                 "--lease-ttl-s", str(CLUSTER_LEASE_TTL_S), "--idle-timeout-ms", str(IDLE_TIMEOUT_MS),
                                 "--controller-broker-heartbeat-timeout-ms", str(plan.timeout_ms),
                                 "--max-groups", str(max(groups, 1))], work / f"{name}-c{i}.log"))
        ports = [int(p.wait_for(r"listening host=\S+ port=(\d+)").group(1)) for p in procs]
        deadline = time.monotonic() + 30
        while len(cluster.read_prefix(sh.SHARDS)) < sh.SHARDS_DEFAULT or \
                len({v for v in cluster.read_prefix(sh.SHARDS).values()}) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: the shards did not spread over {n} controllers in 30 s")
            time.sleep(0.2)
        time.sleep(CLUSTER_LEASE_TTL_S / 3 + 0.5)       # one more survey: every controller knows every owner
        cpu0, etcd0, t0 = [p.cpu_seconds() for p in procs], _etcd_cpu_s(cluster), time.perf_counter()
        row = asyncio.run(Run(ports, groups, plan).measure())
        seconds = time.perf_counter() - t0
        _cpu_rows(row, seconds, [p.cpu_seconds() - c for p, c in zip(procs, cpu0)],
                  [b - a for a, b in zip(etcd0, _etcd_cpu_s(cluster))])
    finally:
        stats = [p.stop() for p in procs]
    total = {k: sum(st.get(k, 0) for st in stats) for k in ("records", "commits", "forwarded", "etcd_reads")}
    row = {"design": design, "store": "etcd", "controllers": n, **row, "records": total["records"],
           "fsyncs": total["commits"], "forwarded": total["forwarded"], "etcd_reads": total["etcd_reads"]}
    row["records_per_fsync"] = round(row["records"] / max(1, row["fsyncs"]), 2)
    row["fsync_mean_ms"] = 0.0          # commits are asynchronous, many in flight: no one wait to give
    return row


def _median_rows(runs: list[list[dict]]) -> list[dict]:
    """Each number the median over the runs that measured the point (in the first run's order)."""
    out = []
    for first in runs[0]:
        key = (first["design"], first["store"], first["groups"])
        same = [r for rows in runs for r in rows if (r["design"], r["store"], r["groups"]) == key]
        row = dict(first)
        same = [r for r in same if "error" not in r] or same      # the runs that measured it
        row = dict(same[0])
        for k, v in row.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("groups", "controllers"):
                values = sorted(r[k] for r in same if k in r)
                row[k] = values[len(values) // 2]
        row["runs"] = len(same)
        out.append(row)
    return out


def controller(work: Path, plan: Plan, progress: Callable[[str], None] = lambda s: None) -> dict:
    progress("controller: this disk's fdatasync rate")
    disk = raw_disk(work, seconds=1.0, write_mib=8)
    load_before = os.getloadavg()[0]
    runs = []
    for run in range(1, plan.runs + 1):
        rows = []
        again = plan.again if plan.again is not None else plan.groups
        for groups in [g for g in plan.groups if run == 1 or (g not in plan.once and g in again)]:
            largest = plan.largest and groups == max(plan.groups)
            for design in [d for d in plan.designs if not largest or d in plan.largest]:
                for store in (("etcd",) if design in CLUSTER_DESIGNS else ("file",) if largest else plan.stores):
                    progress(f"controller: run {run}/{plan.runs}, {design}, {groups} groups, {store} store")
                    try:
                        rows.append(point(work, design, groups, plan, store, run))
                    except Exception as err:       # noqa: BLE001 — a point that breaks is a row saying so
                        rows.append({"design": design, "store": store if design not in CLUSTER_DESIGNS else "etcd",
                                     "groups": groups, "error": f"{type(err).__name__}: {str(err)[:300]}"})
        runs.append(rows)
    rows = _median_rows(runs)
    most, least = max(plan.groups), min(plan.groups)
    ratios = {}
    if set(plan.stores) == {"file", "etcd"}:
        at = {(r["design"], r["store"], r["groups"]): r.get("alters_per_s") for r in rows}
        ratios.update({f"{d} etcd/file alters_per_s at {g} groups":
                       round(at[d, "etcd", g] / max(0.1, at[d, "file", g]), 2)
                       for d in plan.designs for g in plan.groups
                       if at.get((d, "etcd", g)) is not None and at.get((d, "file", g)) is not None})
    by = {(r["design"], r["groups"]): r for r in rows if r["store"] == plan.stores[0] or r["design"] in CLUSTER_DESIGNS}
    by |= {(r["design"], r["store"], r["groups"]): r for r in rows}
    if len(plan.designs) < 2 or len(plan.groups) < 2:
        return _result(plan, rows, ratios, disk, load_before)
    try:
        ratios |= _ratios(plan, by, most, least)
    except (KeyError, ZeroDivisionError, TypeError) as err:   # a point that broke has no figures to divide
        ratios["not computed"] = f"{type(err).__name__}: {err}"
    return _result(plan, rows, ratios, disk, load_before)


def _ratios(plan: Plan, by: dict, most: int, least: int) -> dict:
    """Each goal's ratio from the rows that measured both sides (a point that was not measured, or
    broke, leaves its ratios out rather than all of them)."""
    ratios: dict = {}

    def put(name: str, a, b, key: str, floor: float = 0.1, digits: int = 1) -> None:
        if a is not None and b is not None and key in a and key in b:
            ratios[name] = round(a[key] / max(floor, b[key]), digits)

    mid = 1000 if 1000 in plan.groups else most
    for new in [d for d in ("pipelined", "cluster3") if d in plan.designs]:
        put(f"{new}/serial alters_per_s at {mid} groups", by.get((new, mid)), by.get(("serial", mid)), "alters_per_s")
        put(f"{new}/serial on etcd alters_per_s at {mid} groups", by.get((new, mid)), by.get(("serial", "etcd", mid)),
            "alters_per_s")
    if {"cluster1", "cluster3"} <= set(plan.designs):
        put(f"cluster3/cluster1 reads_per_s at {mid} groups", by.get(("cluster3", mid)), by.get(("cluster1", mid)),
            "reads_per_s", digits=2)
    for d in plan.designs:
        put(f"{d} election p50 at {most}/{least} groups", by.get((d, most)), by.get((d, least)), "election_p50_ms",
            floor=1.0, digits=2)
        put(f"{d} beyond-timeout p50 at {most}/{least} groups", by.get((d, most)), by.get((d, least)),
            "beyond_timeout_p50_ms", floor=1.0, digits=2)
    return ratios


def _result(plan: Plan, rows: list[dict], ratios: dict, disk: dict, load_before: float) -> dict:
    return {"scenario": "controller", "plan": attrs.asdict(plan), "rows": rows, "ratios": ratios, "disk": disk,
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)], "cores": os.cpu_count()}


COLUMNS = {"design": "design", "store": "store", "groups": "groups", "runs": "runs", "heartbeats_per_s": "heartbeats/s", "alters_per_s": "alters/s",
           "reads_per_s": "reads/s",
           "alter_p50_ms": "alter p50 ms", "alter_p99_ms": "alter p99 ms", "records_per_fsync": "records/fsync",
           "fsync_mean_ms": "fsync wait ms",
           "elections": "elections", "election_p50_ms": "election p50 ms", "election_p99_ms": "election p99 ms",
           "beyond_timeout_p50_ms": "beyond timeout p50 ms", "beyond_timeout_p99_ms": "beyond timeout p99 ms",
           "elections_per_s": "elections/s", "heartbeat_p99_ms": "heartbeat p99 ms",
           "heartbeats_failed": "heartbeats refused",
           "controller_cpu_s": "controller CPU s", "cpu_per_controller": "cores per controller",
           "cpu_per_etcd_member": "cores per etcd member"}
COMMAND = "ackorder bench controller"
SECTION = "## `controller`"


def cell(key: str, value) -> str:
    return f"{value:,}" if isinstance(value, (int, float)) and key != "groups" else str(value)


def markdown(result: dict) -> list[str]:
    """The docs/benchmarks.md section of one run."""
    plan, disk = result["plan"], result["disk"]
    lines = [SECTION, "",
             f"Written by `{COMMAND}` on {time.strftime('%Y-%m-%d')} ({result['cores']} cores shared with other "
             f"jobs: load average {result['load_average'][0]} before, {result['load_average'][1]} after). Real "
             f"controller processes, brokers simulated over real TCP by one asyncio process, heartbeats every {plan['heartbeat_interval_ms']:,} ms (BrokerConfig."
             "brokerHeartbeatInterval), heartbeat timeout "
             f"{plan['timeout_ms']:,} ms (controllerHeartBeatTimeoutMills); {plan['steady_s']} s of closed-loop "
             "AlterSyncStateSet per group master (alters/s and their latency), then the masters of a tenth of the "
             "groups stop heartbeating while the other masters propose once per "
             f"{plan['alter_interval_ms']:,} ms (checkSyncStateSetPeriod; election times). "
             f"This disk, probed before the run: {disk['fdatasyncs_per_s']:,} fdatasyncs/s (4 KiB appends; it "
             "varies with the other jobs' I/O).", "",
             "Designs: `serial` is the old one (one controller, one request at a time, one store client, "
             "synchronous, the only one answering reads: a leader-only design), `pipelined` the single "
             "controller deciding as requests come, `cluster1` and `cluster3` the new one (1 or 3 controllers "
             "over a fresh 3-member etcd, `controller --etcd`: shards, forwarded requests, fenced "
             "transactions in flight for many shards at once, GetReplicaInfo of another controller's shard "
             "read from etcd by the controller asked). Each group's three brokers share one connection, and "
             "the groups' connections are spread over the controllers. "
             + (f"The runs column says how many runs a row is the median of ({plan.get('runs', 1)} at "
                f"{', '.join(f'{g:,}' for g in plan.get('again') or plan['groups'])} groups, once elsewhere: a "
                "point takes minutes at 10,000 groups, and the serial design on etcd did not finish registering "
                "10,000 groups' 30,000 brokers in 20 minutes, one etcd transaction at a time, and on the file "
                "store a 10,000-group point took 10 minutes, so the largest point measures cluster3 only). "
                if plan.get("runs", 1) > 1 else ""),
             "",
             "Goals (issue 37): the new design >= 10x the old at 1,000 groups; reads >= 2.5x from 1 to 3 "
             "controllers; election time beyond the timeout at the most groups within 2x of 1 group.", "",
             "Where the bounds come from: the serial design's alters/s is 1,000 / (fsync wait ms), one record per "
             "fdatasync or etcd transaction, one request at a time. The cluster designs commit many shards' "
             "transactions at once (records/fsync is records per transaction) and are bounded by CPU: the "
             "cores per controller and per etcd member columns are each process's CPU over the point (1.0 is "
             "one core), and the simulated brokers are one more Python process on the same cores. On a machine "
             "with fewer cores than processes, a third controller adds work (forwarding, etcd reads) but no "
             "CPU, so cluster3 against cluster1 measures that overhead, not scaling.", "",
             "| " + " | ".join(COLUMNS.values()) + " |", "|" + "---|" * len(COLUMNS)]
    for r in result["rows"]:
        lines.append("| " + " | ".join(cell(k, r.get(k, "-")) for k in COLUMNS) + " |")
    lines += ["", "Ratios: `" + json.dumps(result["ratios"]) + "`", ""]
    return lines


STORES_SECTION = "### The metadata in etcd (`--store both`)"


def markdown_stores(result: dict) -> list[str]:
    """The subsection of a `--store both` run: the file and etcd side by side."""
    disk, groups = result["disk"], ",".join(str(g) for g in result["plan"]["groups"])
    lines = [STORES_SECTION, "",
             f"Written by `{COMMAND} --store both --groups {groups}` on {time.strftime('%Y-%m-%d')} "
             f"({result['cores']} cores shared with other jobs: load average {result['load_average'][0]} before, "
             f"{result['load_average'][1]} after). The same workload and timings as above, each point run on the "
             "file store and on a fresh 3-member etcd cluster on loopback (Debian's etcd 3.4; its members fsync "
             "their WALs on this same disk, reference/real/etcd_cluster.py). In the etcd rows a sync is one etcd "
             "transaction per 64 groups (compare each key's mod_revision, put): records/fsync is records per sync "
             "and fsync wait the time until etcd answered that a majority committed it. This disk, probed before "
             f"the run: {disk['fdatasyncs_per_s']:,} fdatasyncs/s.", "",
             "| " + " | ".join(COLUMNS.values()) + " |", "|" + "---|" * len(COLUMNS)]
    for r in result["rows"]:
        lines.append("| " + " | ".join(cell(k, r.get(k, "-")) for k in COLUMNS) + " |")
    lines += ["", "Ratios: `" + json.dumps(result["ratios"]) + "`", ""]
    return lines


def _cut(text: str, heading: str, ends: tuple[str, ...]) -> tuple[str, str, str]:
    """(before, the part from ``heading`` to the first of ``ends`` after it, the rest)."""
    before, found, after = text.partition(heading)
    if not found:
        return text, "", ""
    stops = [i for i in (after.find(e) for e in ends) if i >= 0]
    end = min(stops, default=len(after))
    return before, heading + after[:end], after[end:]


def update_docs(result: dict, docs: Path) -> Path:
    """Put the section into docs/benchmarks.md in place of the previous one (or at the end); a
    `--store both` run replaces only its subsection of it, and the section keeps that subsection."""
    out = docs / "benchmarks.md"
    text = out.read_text() if out.exists() else "# Benchmarks\n"
    before, section, rest = _cut(text, SECTION, ("\n## ",))
    head, stores, tail = _cut(section, STORES_SECTION, ("\n## ", "\n### "))
    clusters = set(result["plan"].get("designs", ())) & set(CLUSTER_DESIGNS)
    if result["plan"].get("stores", ["file"]) != ["file"] and not clusters:
        new = [*((head + tail).rstrip("\n").split("\n") if section else []), "", *markdown_stores(result)]
    else:
        new = markdown(result) + (stores.rstrip("\n").split("\n") + [""] if stores else [])
    rest = rest.lstrip("\n")
    out.write_text(before.rstrip("\n") + "\n\n" + "\n".join(new).strip("\n") + "\n" + ("\n" + rest if rest else ""))
    return out


# Sections of benchmarks.md that `bench all` does not measure and keeps as they are: the controller's
# (written by `bench controller`), role changes (`bench rolechange`), the real failover figures (from
# `ackorder chaos --failover --json`) and the mutation campaign's (`ackorder mutate`).
KEPT_SECTIONS = (SECTION, "## `rolechange`", "## `chaos --failover`", "## Mutation")


def kept_section(text: str) -> list[str]:
    """The kept sections of an existing benchmarks.md, in KEPT_SECTIONS order."""
    lines: list[str] = []
    for heading in KEPT_SECTIONS:
        _, found, after = text.partition(heading)
        if found:
            end = after.find("\n## ")
            lines += (heading + (after if end < 0 else after[:end])).rstrip("\n").split("\n") + [""]
    return lines
