"""`ackorder chaos --failover --nemesis KINDS`: the failover cluster of reference/real/failover_chaos.py
with every link behind the fault proxy (reference/real/netfault.py), under load, and a fault drawn
from the seed (reference/real/nemesis.py) every interval, each healed after its window.

After each heal, once a master serves with every broker in its SyncStateSet, a checker that
trusts nothing the processes say about themselves reads their files:

* every acknowledged message is present, intact and at its offset on the master (``lost``,
  ``corrupt``) and on every other SyncStateSet member (``diverged``: ALL_IN_SYNC promised it);
* every message a consumer read (below confirmOffset) is on the master (``consumed_lost``);

and at the end, from the brokers' logs (each role line carries CLOCK_MONOTONIC, shared by the
processes of one machine): no epoch has two masters, no broker's epoch goes back, and the PUT_OKs
of each master epoch came from one broker (``epoch_violations``).  With ``--failover-trace`` the
run's history is also checked against AckOrderFailover.

The report gives, per nemesis: faults, acknowledged, failovers, unavailability windows (no PUT_OK
for longer than ``unavailable_ms``) and failover times; and a latency-over-time plot with the fault
windows shaded (reference/real/nemesis_report.py).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from reference.real.chaos import ChaosAborted, check_log
from reference.real.failover_chaos import GROUP, Cluster, FailoverChaosOptions, FailoverReport, stop_clients
from reference.real.failover_load import FailoverConsumer, FailoverLoad
from reference.real.nemesis import Fault, draw
from reference.real.netfault import NetRules
from reference.real import netroute
from reference.real.load import body_for
from reference.record import encode, record_size
from spec.config import ConfigError

MAX_FAULTS = 100_000
SAMPLE_OLDER_ACKS = 2_000        # after each heal, beside every PUT_OK since the last check
WATCH_MARGIN_S = 1.0             # a member joins once caught up: PUT_OKs older than this before its commit
WATCH_SPAN_S = 6.0
WATCH_INTERVAL_S = 0.1
MAX_VIOLATIONS = 100
ROLE_LINE = re.compile(r"^role (MASTER|SLAVE)(?: of b\d+)? epoch (\d+)\b.*\bat_ms=([0-9.]+)")


@attrs.define
class FaultRecord:
    n: int
    kind: str
    what: str
    start_s: float                  # run-relative, seconds
    heal_s: float
    settled_s: float | None         # when a master served with a full SyncStateSet again (None: never)
    master_before: int | None
    master_after: int | None
    failover_ms: float | None = None    # the fault's start -> the first PUT_OK from a new master
    acked_before: int = 0
    lost: int = 0
    corrupt: int = 0
    diverged: int = 0

    @property
    def failover(self) -> bool:
        return self.master_after is not None and self.master_before is not None and \
            self.master_after != self.master_before


@attrs.define
class NemesisReport(FailoverReport):
    faults: list[FaultRecord] = attrs.Factory(list)
    epoch_violations: list[str] = attrs.Factory(list)
    controller_violations: list[str] = attrs.Factory(list)    # ControllerWatch's
    controller_polls: int = 0
    checked_upto: int = 0            # PUT_OKs checked on every member after each heal
    consumed_upto: int = 0
    checks: int = 0
    member_checks: int = 0           # ControllerWatch's checks of a changed SyncStateSet's members
    unavailable: list[tuple[float, float]] = attrs.Factory(list)      # (from_s, to_s) run-relative
    latency: list[tuple[float, float, int]] = attrs.Factory(list)    # (at_s, latency_ms, broker) per PUT_OK
    net_stats: dict = attrs.Factory(dict)
    domain: tuple[str, ...] = ()     # the processes the nemeses partition, pause and kill

    @property
    def unexercised(self) -> str | None:
        """A run that checked nothing must not say "nothing lost"."""
        missing = [what for what, n in (("faults", len(self.faults)), ("PUT_OKs", self.acked),
                                        ("checks after a heal", self.checks),
                                        ("polls of the controller", self.controller_polls)) if not n]
        return f"no {', no '.join(missing)}" if missing else None

    @property
    def valid(self) -> bool:
        return (super().valid and not self.epoch_violations and not self.controller_violations
                and self.unexercised is None)

    def per_nemesis(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        ends = [f.start_s for f in self.faults[1:]] + [self.seconds]
        acks = sorted(t for t, _, _ in self.latency)
        for f, end in zip(self.faults, ends):
            row = out.setdefault(f.kind, {"faults": 0, "acked": 0, "lost": 0, "failovers": 0, "failover_ms": [],
                                          "unavailable_windows": 0, "unavailable_s": 0.0, "unavailable_max_s": 0.0,
                                          "not_settled": 0})
            row["faults"] += 1
            row["acked"] += sum(1 for t in acks if f.start_s <= t < end)
            row["lost"] += f.lost + f.corrupt + f.diverged
            row["not_settled"] += f.settled_s is None
            if f.failover:
                row["failovers"] += 1
                if f.failover_ms is not None:
                    row["failover_ms"].append(f.failover_ms)
            for a, b in self.unavailable:
                if f.start_s <= a < end:
                    row["unavailable_windows"] += 1
                    row["unavailable_s"] += b - a
                    row["unavailable_max_s"] = max(row["unavailable_max_s"], b - a)
        for row in out.values():
            times = sorted(row.pop("failover_ms"))
            row["failover_ms_p50"] = _quantile(times, 0.5)
            row["failover_ms_p99"] = _quantile(times, 0.99)
            row["unavailable_s"] = round(row["unavailable_s"], 2)
            row["unavailable_max_s"] = round(row["unavailable_max_s"], 2)
        return out

    def to_json(self) -> dict:
        out = super().to_json()
        times = sorted(f.failover_ms for f in self.faults if f.failover and f.failover_ms is not None)
        out.update({"valid": self.valid, "faults": len(self.faults), "failovers": sum(f.failover for f in self.faults),
                    "failover_ms_p50": _quantile(times, 0.5), "failover_ms_p99": _quantile(times, 0.99),
                    "failover_ms_max": max(times, default=0.0),
                    "unavailable_windows": len(self.unavailable),
                    "unavailable_max_s": round(max((b - a for a, b in self.unavailable), default=0.0), 2),
                    "epoch_violations": self.epoch_violations[:20],
                    "controller_violations": self.controller_violations[:20], "controller_polls": self.controller_polls,
                    "member_checks": self.member_checks, "checks": self.checks,
                    "unexercised": self.unexercised,
                    "per_nemesis": self.per_nemesis(),
                    "fault_log": [attrs.asdict(f) for f in self.faults[:2000]], "net": self.net_stats,
                    "domain": list(self.domain)})
        out.pop("rounds", None)
        return out


class ControllerWatch:
    """Polls the controller's GetReplicaInfo (on its own port, past the proxy: the observer is not
    the network's) all run long: its SyncStateSet holds its master (the spec's SSSContainsMaster),
    and neither masterEpoch nor syncStateSetEpoch goes back (EpochsMonotone); and each time the set
    changes, each of its members holds the PUT_OKs acknowledged from WATCH_SPAN_S to WATCH_MARGIN_S
    before (VisibleImpliesReplicated: the controller may elect any member, so each must hold what the
    producers were told is safe; a member joins only once caught up, so a sound one always does)."""

    def __init__(self, cluster: Cluster) -> None:
        import threading

        self.cluster = cluster
        self.load: FailoverLoad | None = None
        self.member_checks = 0
        self.violations: list[str] = []
        self.polls = 0
        self._last = (0, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="controller-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            info = self.cluster.info()
            if info is None:
                continue
            self.polls += 1
            master, sss = info.get("master_id"), set(info.get("sync_state_set", ()))
            epochs = (info.get("master_epoch", 0), info.get("sss_epoch", 0))
            if master and master not in sss:
                self._say(f"SSSContainsMaster: the controller's SyncStateSet {sorted(sss)} lacks its "
                                       f"master b{master} (masterEpoch {epochs[0]}, sssEpoch {epochs[1]})")
            if epochs[0] < self._last[0] or epochs[1] < self._last[1]:
                self._say(f"EpochsMonotone: the controller's (masterEpoch, sssEpoch) went from "
                                       f"{self._last} to {epochs}")
            if epochs[1] > self._last[1] and master in sss and self.load is not None:
                self._members_hold_recent_acks(sorted(sss), epochs[1])
            self._last = max(self._last[0], epochs[0]), max(self._last[1], epochs[1])

    def _members_hold_recent_acks(self, members: list[int], sss_epoch: int) -> None:
        import bisect

        now = time.monotonic()
        acked = self.load.acked_since(0)
        lo = bisect.bisect_left(acked, now - WATCH_SPAN_S, key=lambda a: a.at_s)
        hi = bisect.bisect_right(acked, now - WATCH_MARGIN_S, key=lambda a: a.at_s)
        recent = acked[lo:hi]
        if not recent:
            return
        opts = self.cluster.opts
        self.member_checks += 1
        for b in members:
            missing = missing_acked(self.cluster.node_dir(b) / "commitlog", opts.segment_bytes, recent, opts.size)
            if missing:
                self._say(f"VisibleImpliesReplicated: b{b}, in the controller's SyncStateSet (sssEpoch {sss_epoch}), "
                          f"lacks {len(missing)} of the {len(recent)} PUT_OKs of {WATCH_SPAN_S:g} to "
                          f"{WATCH_MARGIN_S:g} s before (key {missing[0]} first)")

    def _say(self, violation: str) -> None:
        if violation not in self.violations and len(self.violations) < MAX_VIOLATIONS:
            self.violations.append(violation)


def _quantile(values: list[float], q: float) -> float:
    return round(values[min(len(values) - 1, int(q * len(values)))], 1) if values else 0.0


def _broker(name: str | None) -> int | None:
    return int(name[1:]) if name and name.startswith("b") else None


def run_nemesis_chaos(opts: FailoverChaosOptions,
                      progress: Callable[[int, str], None] = lambda n, text: None) -> NemesisReport:
    assert opts.nemesis, "a nemesis run names its nemeses"
    rng = random.Random(opts.seed)                       # the faults: one seed, one schedule
    sampler = random.Random(f"{opts.seed}/sample")      # what each check samples: its draws vary with the load
    work = Path(opts.directory) if opts.directory else Path(tempfile.mkdtemp(prefix="ackorder-nemesis-"))
    if opts.directory and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    if opts.report_dir is not None:
        try:
            Path(opts.report_dir).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(f"--report {opts.report_dir}: {err.strerror}") from None
    report = NemesisReport(options={k: (str(v) if isinstance(v, Path) else v) for k, v in attrs.asdict(opts).items()})
    started = time.monotonic()
    cluster = load = consumer = watch = None
    load_started = 0.0
    load_stopped = None
    try:
        cluster = Cluster(work, opts)
        report.domain = cluster.domain
        netroute.install(cluster.routes_of("client"))
        progress(0, "waiting for the first SyncStateSet")
        if cluster.settled() is None:
            raise ChaosAborted("the three nodes did not form a SyncStateSet within "
                               f"{opts.settle_timeout_s:.0f} s (see {work / 'logs'})")
        watch = ControllerWatch(cluster)
        watch.start()
        load = FailoverLoad(cluster.client_controller, GROUP, opts.producers, opts.size, secret=opts.peer_secret)
        load.start()
        watch.load = load
        load_started = time.monotonic() - started
        consumer = FailoverConsumer(cluster.client_controller, GROUP, opts.size, opts.segment_bytes,
                                    secret=opts.peer_secret)
        consumer.start()
        deadline = started + opts.duration_s
        for n in range(1, MAX_FAULTS + 1):
            rest_s = rng.uniform(0.5, 1.5) * opts.nemesis_interval_s
            if time.monotonic() + rest_s >= deadline and report.faults:
                break
            time.sleep(max(0.0, min(rest_s, deadline - time.monotonic())))
            info = cluster.info() or {}
            master = f"b{info['master_id']}" if info.get("master_id") else None
            fault = draw(rng, rng.choice(opts.nemesis), master, cluster.domain)
            progress(int(time.monotonic() - started), f"fault {n}: {fault.kind}: {fault.what} for {fault.window_s} s")
            record = _one_fault(cluster, load, fault, n, started, _broker(master))
            report.faults.append(record)
            if record.settled_s is None:
                report.stuck = (f"fault {n} ({fault.kind}: {fault.what}): no master with a full SyncStateSet "
                                f"within {opts.settle_timeout_s:.0f} s of the heal ({cluster.info()})")
                break
            _check_after_heal(cluster, load, consumer, report, record, sampler)
            if report.lost or report.corrupt or report.diverged or report.consumed_lost or watch.violations:
                break
        if report.faults and not report.stuck and not (report.lost or report.corrupt or report.diverged
                                                       or report.consumed_lost or watch.violations):
            progress(int(time.monotonic() - started), "the last check: every PUT_OK on every member")
            load.stop()
            load_stopped = time.monotonic() - started
            consumer.stop()
            if cluster.settled() is None:
                report.stuck = f"after the last fault: no master with a full SyncStateSet ({cluster.info()})"
            else:
                _check_after_heal(cluster, load, consumer, report, report.faults[-1], sampler, full=True)
    finally:
        if watch is not None:
            watch.stop()
            report.controller_violations, report.controller_polls = list(watch.violations), watch.polls
            report.member_checks = watch.member_checks
        stop_clients(report, load, consumer)
        if load is not None:
            report.latency = [(round(a.at_s - started, 3), a.latency_ms, a.broker_id) for a in load.acked]
            report.unavailable = unavailable_windows([t for t, _, _ in report.latency], opts.unavailable_ms / 1000,
                                                     load_started, load_stopped or time.monotonic() - started)
        netroute.install(None)
        if cluster is not None:
            if cluster.net is not None:
                try:
                    report.net_stats = cluster.net.stats()
                except (RuntimeError, OSError, ValueError) as err:
                    report.net_stats = {"error": str(err)}
            final_master = (cluster.info() or {}).get("master_id")
            cluster.check_etcd_history(report)      # the store's own: two masters in an epoch, epochs back
            cluster.stop()
            report.truncations = cluster.truncations()
            if load is not None:
                report.epoch_violations = epoch_violations(work / "logs", load.acked)
                if final_master and not (report.lost or report.corrupt):     # a loss is its own finding
                    report.epoch_violations += answered_outside_its_epoch(
                        load.acked, cluster.node_dir(final_master) / "epochfile", role_lines(work / "logs"))
            if opts.failover_trace is not None and report.faults:
                try:
                    verdict = cluster.write_failover_trace(Path(opts.failover_trace))
                except ConfigError as err:
                    report.trace_rejected = f"not checked: {err}"
                else:
                    report.trace_steps = verdict.steps if verdict.ok else verdict.steps - 1
                    report.trace_rejected = None if verdict.ok else f"step {verdict.steps} ({verdict.label})"
        report.seconds = time.monotonic() - started
        if opts.report_dir is not None:
            from reference.real.nemesis_report import write_report
            write_report(report, Path(opts.report_dir))
        if not opts.keep and not opts.directory:
            shutil.rmtree(work, ignore_errors=True)
    return report


def _one_fault(cluster: Cluster, load: FailoverLoad, fault: Fault, n: int, started: float,
               master_before: int | None) -> FaultRecord:
    """Make the fault, hold it for its window, heal it, wait for a full SyncStateSet."""
    acked_before = len(load.acked)
    start = time.monotonic()
    if fault.rules != NetRules():
        _net(cluster, fault.rules)
    for who in fault.pause:
        _process(cluster, who).popen.send_signal(signal.SIGSTOP)
    for who in fault.kill:
        proc = _process(cluster, who)
        proc.popen.kill()
        proc.popen.wait(timeout=10)
    try:
        time.sleep(fault.window_s)
    finally:
        for who in fault.pause:
            _process(cluster, who).popen.send_signal(signal.SIGCONT)
        try:
            if fault.rules != NetRules():
                _net(cluster, NetRules())
        finally:
            for who in fault.kill:
                _restart(cluster, who)
    heal = time.monotonic()
    info = cluster.settled()
    settled = time.monotonic() if info is not None else None
    after = info["master_id"] if info else None
    record = FaultRecord(n, fault.kind, fault.what, round(start - started, 3), round(heal - started, 3),
                         round(settled - started, 3) if settled is not None else None, master_before, after,
                         acked_before=acked_before)
    if record.failover:
        first = next((a for a in load.acked_since(acked_before) if a.broker_id == after and a.at_s >= start), None)
        if first is None:                       # the new master's first answer may come just after the settle
            deadline = time.monotonic() + 10
            while first is None and time.monotonic() < deadline:
                time.sleep(0.02)
                first = next((a for a in load.acked_since(acked_before) if a.broker_id == after and a.at_s >= start),
                             None)
        record.failover_ms = round((first.at_s - start) * 1000, 1) if first is not None else None
    return record


def _net(cluster: Cluster, rules: NetRules) -> None:
    """The proxy's rules now; a proxy that died or hangs is the environment failing (exit 3)."""
    try:
        cluster.net.set(rules)
    except (RuntimeError, OSError, ValueError) as err:
        raise ChaosAborted(f"the network proxy failed: {err} (see netfault.log)") from None


def _process(cluster: Cluster, who: str):
    """The process behind a name of the domain (its ``popen``)."""
    if who.startswith("c"):
        return cluster.controllers[int(who[1:])]
    if who.startswith("m"):
        return next(m for m in cluster.etcd.members if m.name == who)
    return cluster.nodes[int(who[1:])]


def _restart(cluster: Cluster, who: str) -> None:
    if who.startswith("c"):
        if cluster.etcd is None:
            cluster.start_single_controller()
        else:
            cluster.start_controller(int(who[1:]))
    elif who.startswith("m"):
        cluster.etcd.start_member(_process(cluster, who))
        try:
            cluster.name_etcd_members()
        except (RuntimeError, OSError, ValueError) as err:
            raise ChaosAborted(f"the network proxy failed: {err} (see netfault.log)") from None
        try:
            cluster.etcd.wait_ready()
        except Exception:     # noqa: BLE001 — a store not back in time: the settle after the heal says so (stuck)
            pass
    else:
        cluster.start_node(int(who[1:]))


def _check_after_heal(cluster: Cluster, load: FailoverLoad, consumer: FailoverConsumer, report: NemesisReport,
                      record: FaultRecord, rng: random.Random, full: bool = False) -> None:
    """Every PUT_OK since the last check, and a sample of the older ones (all of them at the end of the
    run), on the master and on every SyncStateSet member; every consumed record on the master.  The
    acknowledgements are taken before the SyncStateSet is read: each member of it then held every one
    of them (ALL_IN_SYNC; a member joins only once caught up)."""
    acked = load.acked_since(0)
    consumed = list(consumer.consumed)
    info = cluster.info() or {}
    master = info.get("master_id")
    if not master:
        return                                   # settled a moment ago: checked after the next fault
    opts = cluster.opts
    new, older = acked[report.checked_upto:], acked[:report.checked_upto]
    chosen = older if full else rng.sample(older, min(len(older), SAMPLE_OLDER_ACKS))
    report.checked_upto = len(acked)
    report.checks += 1
    for b in sorted(info.get("sync_state_set", ())):
        lost, corrupt = lost_and_corrupt(cluster.node_dir(b) / "commitlog", opts.segment_bytes, chosen + new, opts.size)
        missing = lost + corrupt
        if b == master:
            record.lost, record.corrupt = record.lost + len(lost), record.corrupt + len(corrupt)
            report.lost += lost
            report.corrupt += corrupt
            by_key = {a.key: a for a in (consumed if full else consumed[report.consumed_upto:])}
            read = missing_acked(cluster.node_dir(b) / "commitlog", opts.segment_bytes, list(by_key.values()),
                                 opts.size)
            report.consumed_lost += read
        else:
            record.diverged += len(missing)
            report.diverged += missing
    report.consumed_upto = len(consumed)


def missing_acked(directory: Path, segment_bytes: int, acked: list, size: int) -> list[int]:
    """The keys of ``acked`` (AckedAt or Acked) whose exact record is not at its offset in the broker's
    segment files (lost or corrupt: ``lost_and_corrupt``)."""
    lost, corrupt = lost_and_corrupt(directory, segment_bytes, acked, size)
    return lost + corrupt


def lost_and_corrupt(directory: Path, segment_bytes: int, acked: list, size: int) -> tuple[list[int], list[int]]:
    """The keys of ``acked`` (AckedAt) whose record is not at its offset in the broker's segment files:
    lost (nothing there: a short or missing file, zeros) or corrupt (other bytes).  One pread per record,
    so a check after each heal costs what it checks, not the size of the log (check_log decodes the
    whole log: a long run's logs reach gigabytes)."""
    length = record_size(size)
    fds: dict[int, int] = {}
    lost, corrupt = [], []
    try:
        for a in acked:
            a = getattr(a, "acked", a)          # an AckedAt (a PUT_OK) or an Acked (a consumed record)
            start = a.next_offset - length
            segment = start - start % segment_bytes
            fd = fds.get(segment)
            if fd is None:
                try:
                    fd = os.open(directory / f"{segment:020d}", os.O_RDONLY)
                except OSError:
                    fd = -1
                fds[segment] = fd
            data = os.pread(fd, length, start - segment) if fd >= 0 and start >= 0 else b""
            if data != encode(a.key, body_for(a.key, size)):
                (lost if len(data) < length or not any(data) else corrupt).append(a.key)
    finally:
        for fd in fds.values():
            if fd >= 0:
                os.close(fd)
    return lost, corrupt


def unavailable_windows(times_s: list[float], gap_s: float, first_s: float, last_s: float) -> list[tuple[float, float]]:
    """Spans longer than ``gap_s`` with no PUT_OK, between ``first_s`` and ``last_s``."""
    out, prev = [], first_s
    for t in sorted(times_s):
        if t - prev > gap_s:
            out.append((round(prev, 3), round(t, 3)))
        prev = max(prev, t)
    if last_s - prev > gap_s:
        out.append((round(prev, 3), round(last_s, 3)))
    return out


def answered_outside_its_epoch(acked, epoch_file: Path, lines: dict) -> list[str]:
    """At most one broker answers PUT_OK in each master epoch: each PUT_OK's record lies, in the final
    master's log, in an epoch of its epoch file (where it was written); the broker that answered it must
    be that epoch's master (its MASTER line).  A record not in the final log is the loss checks' case."""
    import bisect

    from reference.real.epochfile import load_epoch_file

    try:
        entries = sorted((e.start_offset, e.epoch) for e in load_epoch_file(epoch_file).cache.entries)
    except Exception as err:       # noqa: BLE001 — an unreadable epoch file fails the check, never passes it
        return [f"{epoch_file}: not read: {type(err).__name__}: {err}"]
    if not entries:
        return [f"{epoch_file}: not read: no epoch entries"]
    masters = masters_by_epoch(lines)
    starts = [s for s, _ in entries]
    out: dict[tuple[int, int], int] = {}
    for a in acked:
        k = bisect.bisect_right(starts, a.acked.next_offset - 1) - 1
        if k < 0:
            continue
        epoch = entries[k][1]
        if a.broker_id not in masters.get(epoch, {a.broker_id}):
            out[(epoch, a.broker_id)] = out.get((epoch, a.broker_id), 0) + 1
    return [f"epoch {e} (master {sorted(f'b{b}' for b in masters[e])}): {n} PUT_OK from b{b} of records it holds"
            for (e, b), n in sorted(out.items())]


def masters_by_epoch(lines: dict) -> dict[int, set[int]]:
    """The brokers whose role lines say MASTER in each epoch."""
    masters: dict[int, set[int]] = {}
    for broker, seq in lines.items():
        for _at, role, epoch in seq:
            if role == "MASTER":
                masters.setdefault(epoch, set()).add(broker)
    return masters


def role_lines(logs: Path) -> dict[int, list[tuple[float, str, int]]]:
    """Each broker's (at_ms, MASTER|SLAVE, epoch) over all its lives, in time order."""
    out: dict[int, list[tuple[float, str, int]]] = {}
    for log in sorted(logs.glob("b*.log")):
        broker = int(log.stem.split("-")[0][1:])
        for line in log.read_text(errors="replace").splitlines():
            if m := ROLE_LINE.match(line):
                out.setdefault(broker, []).append((float(m.group(3)), m.group(1), int(m.group(2))))
    for lines in out.values():
        lines.sort()
    return out


def epoch_violations(logs: Path, acked=()) -> list[str]:
    """Two masters of one epoch, and an epoch going back on a broker (its role lines in CLOCK_MONOTONIC
    order over all its lives).  Which broker answered each PUT_OK: answered_outside_its_epoch."""
    lines = role_lines(logs)
    out = []
    for broker, seq in lines.items():
        last = 0
        for _at, _role, epoch in seq:
            if epoch < last:
                out.append(f"b{broker}: epoch {last} then {epoch}")
            last = max(last, epoch)
    masters = masters_by_epoch(lines)
    out += [f"epoch {e}: masters {sorted(f'b{b}' for b in bs)}" for e, bs in sorted(masters.items()) if len(bs) > 1]
    return out
