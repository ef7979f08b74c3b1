"""`ackorder chaos` as a library: a real master (and slaves) under load, the
master killed with SIGKILL at random moments, optionally its segment tail
corrupted between restarts and write or fsync errors injected, restarted on
the same directory; after every restart, every acknowledged message must be
present, intact and at its offset on the master and on every slave that is
in sync.  Seed 002's OpenChaos-style correctness test, as a product command.

A message is *acknowledged* when its producer got PUT_OK.  The store runs
SYNC_FLUSH (and SYNC_MASTER when there are slaves), so every acknowledged
message was fsync'd (and held by a slave) before its answer.  The checks:

* lost: an acknowledged message is not in the recovered log;
* corrupt: the record at an acknowledged message's offset is another one or
  its body differs, or a record the recovery kept is not a message any
  producer sent (resurrected garbage);
* duplicated: a message is in the log twice;
* recovery disagrees: after a restart, before any load, the master says it
  recovered other records (a count, an end offset) than a correct recovery
  reads from its files: it kept a torn record, or cut whole ones.

Corruption tears one record after the end of the last acknowledged record
(a torn tail of unacknowledged writes: fsync'd bytes cannot tear), keeping its
size and magic and changing bytes its CRC covers.  A slave
whose log then diverges from the master's (it held records the master's
recovery cut) is refused by the master; the run re-seeds it (an operator
would) and counts it.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import attrs

from reference.bench.procs import Broker, start_replica
from reference.real.disk import SegmentStore
from reference.real.load import Acked, body_for, run_load
from reference.record import CRC_COVERED_FROM, END_FILE_MIN_BLANK_LENGTH, HEADER_SIZE, encode, recover_log
from reference.real.chaos_reach import TSP_KILL9, check_write_path_reach
from reference.real.options import NO_ROLL_CROSSED, check_segment_room
from spec.config import ConfigError

CATCH_UP_TIMEOUT_S = 15.0


class ChaosAborted(RuntimeError):
    """A node would not start (the environment failed, not the store's promise)."""


@attrs.frozen
class ChaosOptions:
    kills: int = 10
    replicas: int = 1
    corrupt: bool = False
    io_errors: bool = False
    seed: int = 0
    producers: int = 8
    size: int = 200
    segment_bytes: int = 256 * 1024
    min_load_s: float = 0.2
    max_load_s: float = 1.0
    directory: Path | None = None          # where the nodes' data goes (default: a temporary directory)
    keep: bool = False                     # keep that directory afterwards
    bugs: tuple[str, ...] = ()             # seeded defects for the master (to show the checks bite)
    # the master appends into a write buffer that CommitRealTimeService copies to the page cache (seed
    # 001): a kill -9 loses what was not yet copied, and a copy crosses every segment roll the log takes
    transient_store_pool: bool = False

    @staticmethod
    def segment_bytes_default() -> int:
        return attrs.fields(ChaosOptions).segment_bytes.default

    def __attrs_post_init__(self) -> None:
        if self.kills < 1:
            raise ConfigError(f"--kills {self.kills}: at least one kill")
        if not 0 <= self.replicas <= 4:
            raise ConfigError(f"--replicas {self.replicas}: 0 to 4 slaves")
        if self.producers < 1 or self.size < 1:
            raise ConfigError("--producers and --size must be positive")
        if not 0 < self.min_load_s <= self.max_load_s:
            raise ConfigError("the load time before a kill must be positive (min <= max)")
        check_segment_room(self.segment_bytes, self.size)
        check_write_path_reach(TSP_KILL9 if self.transient_store_pool else "kill -9", self.bugs, self.replicas)


@attrs.define
class RoundReport:
    round: int
    load_s: float
    acked: int                             # new PUT_OK this round
    statuses: dict[str, int]
    injected: str | None                   # the write or fsync fault this incarnation had
    corrupted_bytes: int
    recovered_records: int
    dropped_regions: int
    lost: int
    corrupt: int
    duplicated: int
    replicas_in_sync: list[str]
    replicas_reseeded: list[str]


@attrs.define
class ChaosReport:
    options: dict
    rounds: list[RoundReport] = attrs.Factory(list)
    acked: int = 0
    lost: list[int] = attrs.Factory(list)           # keys
    corrupt: list[int] = attrs.Factory(list)
    duplicated: list[int] = attrs.Factory(list)
    resurrected: int = 0                             # records kept that no producer sent
    recovery_disagrees: list[str] = attrs.Factory(list)   # restarts whose recovery read other records than a check
    recovered_regions: int = 0
    replica_checks: int = 0
    replicas_reseeded: int = 0
    faults: Counter = attrs.Factory(Counter)
    seconds: float = 0.0
    segments_rolled: int = 0                         # segment rolls the master's log crossed in this run

    @property
    def unexercised(self) -> str | None:
        """Why the run did not exercise what it was asked to (None: it did)."""
        if self.options.get("transient_store_pool") and self.segments_rolled == 0:
            return NO_ROLL_CROSSED
        return None

    @property
    def valid(self) -> bool:
        return not (self.lost or self.corrupt or self.duplicated or self.resurrected or self.recovery_disagrees
                    or self.unexercised)

    def to_json(self) -> dict:
        return {"valid": self.valid, "kills": len(self.rounds), "acked": self.acked, "lost": len(self.lost),
                "corrupt": len(self.corrupt), "duplicated": len(self.duplicated),
                "resurrected_corrupt": self.resurrected, "recovery_disagrees": len(self.recovery_disagrees),
                "recovery_disagreements": self.recovery_disagrees[:50], "recovered_regions": self.recovered_regions,
                "replica_checks": self.replica_checks, "replicas_reseeded": self.replicas_reseeded,
                "faults": dict(self.faults), "seconds": round(self.seconds, 1),
                "segments_rolled": self.segments_rolled, "unexercised": self.unexercised,
                "lost_keys": self.lost[:50], "corrupt_keys": self.corrupt[:50], "duplicated_keys": self.duplicated[:50],
                "options": self.options, "rounds": [attrs.asdict(r) for r in self.rounds]}


@attrs.frozen
class LogCheck:
    """What one node's segment files hold, checked against the acknowledged messages."""
    end_offset: int
    records: int
    lost: tuple[int, ...]
    corrupt: tuple[int, ...]
    duplicated: tuple[int, ...]
    resurrected: int


def check_log(directory: Path, segment_size: int, acked: dict[int, Acked], size: int) -> LogCheck:
    """Read a node's segment files (as its recovery would) and check every acknowledged
    message: at its offset, same key, same body.  Every message sent has a body of
    ``size`` bytes derived from its key: a kept record that is not one is resurrected garbage."""
    store = SegmentStore(directory, segment_size)
    try:
        data = store.read_all()
    finally:
        store.close()
    report = recover_log(data, segment_size)
    at: dict[int, tuple[int, bytes]] = {}
    seen: Counter = Counter()
    resurrected = 0
    for r in report.records:
        seg = data[r.offset - r.offset % segment_size]
        pos = r.offset % segment_size
        body = bytes(seg[pos + HEADER_SIZE: pos + r.size])
        at[r.end] = (r.key, body)
        seen[r.key] += 1
        if len(body) != size or body != body_for(r.key, size):
            resurrected += 1
    lost, corrupt = [], []
    for key, a in acked.items():
        got = at.get(a.next_offset)
        if got is None:
            if report.end_offset < a.next_offset:
                lost.append(key)
            else:
                corrupt.append(key)       # the log goes past its offset, but no record ends there
        elif got != (key, body_for(key, a.size)):
            corrupt.append(key)
    duplicated = [k for k, n in seen.items() if n > 1]
    return LogCheck(report.end_offset, len(report.records), tuple(lost), tuple(corrupt), tuple(duplicated),
                    resurrected)


NEVER_ACKED_KEY = 1 << 62      # a record corrupt_tail appends: no producer's key (rounds count up from 1)


def corrupt_tail(directory: Path, segment_size: int, after: int, rng: random.Random) -> int:
    """Tear one unacknowledged record at or after offset ``after`` (the end of the last
    acknowledged record): its size and magic kept, bytes its CRC covers changed, as a write torn at
    a sector boundary leaves it.  With no unacknowledged record in the files (the kill came between
    an acknowledgement and the next write), a whole one the page cache could have held is appended
    first.  Returns how many bytes were changed (0: no room for one before the segment's end).

    Only such a record tells a recovery that keeps a torn record (BugRecoveryKeepsTorn) from one
    that does not: junk in a header (bad magic, impossible size) is dropped by both, and an earlier
    version that threw random bytes at random offsets missed the bug in some runs."""
    store = SegmentStore(directory, segment_size)
    try:
        data = store.read_all()
        report = recover_log(data, segment_size)
        end = report.end_offset
        if end < after:
            return 0           # acknowledged records are already missing: the check says so
        tail = [r for r in report.records if r.offset >= after]
        if tail:
            victim = rng.choice(tail)
            offset, start = victim.offset, victim.offset - victim.offset % segment_size
            record = bytes(data[start][offset - start: victim.end - start])
        else:
            offset, start = end, end - end % segment_size
            record = encode(NEVER_ACKED_KEY, body_for(NEVER_ACKED_KEY, rng.randint(1, 64)))
            if offset - start + len(record) + END_FILE_MIN_BLANK_LENGTH > segment_size:
                return 0
            if start not in data:
                store.create(start)
            store.write(start, offset - start, record)
        lo = rng.randrange(CRC_COVERED_FROM, len(record))          # the key or the body
        n = min(rng.randint(1, 64), len(record) - lo)
        junk = bytes(b ^ rng.randrange(1, 256) for b in record[lo: lo + n])    # every byte changed
        store.write(start, offset - start + lo, junk)
        store.fsync(start, start + 1)
        return n
    finally:
        store.close()


def _master_flags(opts: ChaosOptions, replicas: list[str], fault: list[str]) -> list[str]:
    flags = ["--flush-disk-type", "SYNC_FLUSH", "--mapped-file-size-commit-log", str(opts.segment_bytes),
             "--max-message-size", str(max(opts.size, 1024)), "--sync-flush-timeout-ms", "2000",
             "--slave-timeout-ms", "2000", "--ha-housekeeping-interval-ms", "3000", *fault]
    if replicas:
        flags += ["--broker-role", "SYNC_MASTER", "--replicas", ",".join(replicas)]
    if opts.transient_store_pool:
        flags += ["--transient-store-pool-enable", "true", "--commit-on-replica-wait", "true"]
    for bug in opts.bugs:
        flags += ["--bug", bug]
    return flags


def _fault_for(opts: ChaosOptions, rng: random.Random, master_dir: Path) -> list[str]:
    """Write or fsync errors for half the incarnations (with --io-errors), after some good ones:
    recovery's own fdatasyncs (one per segment kept) count too, so the budget starts above them."""
    if not opts.io_errors or rng.random() < 0.5:
        return []
    segments = len(list((master_dir / "commitlog").glob("0" * 4 + "*"))) if (master_dir / "commitlog").is_dir() else 0
    after = str(segments + 2 + rng.randint(5, 400))
    if rng.random() < 0.5:
        return ["--inject-fsync-eio-after", after]
    return ["--inject-write-fault-after", after, "--inject-write-fault", rng.choice(["eio", "enospc", "short"])]


KEYS_PER_ROUND = 10_000_000


def run_chaos(opts: ChaosOptions, progress: Callable[[int, str], None] = lambda n, text: None) -> ChaosReport:
    """Run the whole scenario; ``progress(kills done, what happens now)``."""
    rng = random.Random(f"ackorder-chaos-{opts.seed}")
    work = Path(opts.directory) if opts.directory else Path(tempfile.mkdtemp(prefix="ackorder-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    names = [f"r{k + 1}" for k in range(opts.replicas)]
    report = ChaosReport(options={k: (str(v) if isinstance(v, Path) else v) for k, v in attrs.asdict(opts).items()})
    acked: dict[int, Acked] = {}
    lock = threading.Lock()
    replicas: dict[str, Broker] = {}
    master: Broker | None = None
    last_acked_end = 0
    started = time.perf_counter()
    ports = _free_ports(2)       # the same ports for every incarnation: slaves reconnect to them
    first_segment: int | None = None      # where the log ended at the first start (a --dir may hold a log)

    def restart_and_check(incarnation: int, fault: list[str]) -> tuple[Broker, int, int, LogCheck, list, list]:
        nonlocal first_segment
        broker = _start_master(work, opts, names, fault, incarnation, ports)
        recovered, recovered_end, dropped = _recovery_line(broker)
        for name in names:
            if name not in replicas:
                replicas[name] = _start_replica(work, opts, name, broker)
        check = check_log(work / "master" / "commitlog", opts.segment_bytes, acked, opts.size)
        _add(report, check)
        segment = check.end_offset // opts.segment_bytes     # the rolls this run's writes crossed
        first_segment = segment if first_segment is None else first_segment
        report.segments_rolled = max(report.segments_rolled, segment - first_segment)
        if (recovered, recovered_end) != (check.records, check.end_offset):
            # no load yet: the master serves a log that a correct recovery of its own files does not
            # read (it kept a torn record, or cut records that are whole)
            report.recovery_disagrees.append(
                f"restart {incarnation + 1}: the master recovered {recovered} records ending at {recovered_end}; "
                f"its files hold {check.records} whole records ending at {check.end_offset}")
        report.recovered_regions += dropped
        in_sync, reseeded = _check_replicas(work, opts, names, replicas, broker, check, acked, report)
        return broker, recovered, dropped, check, in_sync, reseeded

    try:
        for kill in range(opts.kills):
            fault = _fault_for(opts, rng, work / "master")
            progress(kill, "restart and check" + (f" ({' '.join(fault)})" if fault else ""))
            master, recovered, dropped, check, in_sync, reseeded = restart_and_check(kill, fault)
            load_s = rng.uniform(opts.min_load_s, opts.max_load_s)
            progress(kill, f"load for {load_s:.2f} s, then kill -9")
            stop = threading.Event()
            box: dict = {}

            def on_ack(a: Acked) -> None:
                with lock:
                    acked[a.key] = a

            def load(port: int = master.port, first: int = 1 + kill * KEYS_PER_ROUND) -> None:
                box["result"] = run_load(("127.0.0.1", port), opts.producers, KEYS_PER_ROUND, opts.size,
                                         first_key=first, timeout_s=10, stop=stop, on_ack=on_ack)
            loader = threading.Thread(target=load, daemon=True)
            loader.start()
            time.sleep(load_s)
            master.popen.kill()                    # SIGKILL: no shutdown, the page cache survives
            master.popen.wait()
            stop.set()
            loader.join(30)
            result = box.get("result")
            report.faults["master_kill_9"] += 1
            if fault:
                report.faults["write_or_fsync_fault_incarnations"] += 1
            if acked:
                last_acked_end = max(last_acked_end, max(a.next_offset for a in acked.values()))
            corrupted = 0
            if opts.corrupt and rng.random() < 0.7:
                corrupted = corrupt_tail(work / "master" / "commitlog", opts.segment_bytes, last_acked_end, rng)
                if corrupted:
                    report.faults["tail_corruptions"] += 1
            report.rounds.append(RoundReport(
                round=kill + 1, load_s=round(load_s, 3), acked=result.statuses.get("PUT_OK", 0) if result else 0,
                statuses=result.statuses if result else {}, injected=" ".join(fault) or None,
                corrupted_bytes=corrupted, recovered_records=recovered, dropped_regions=dropped,
                lost=len(check.lost), corrupt=len(check.corrupt), duplicated=len(check.duplicated),
                replicas_in_sync=in_sync, replicas_reseeded=reseeded))
            master.stop()
            master = None
            report.acked = len(acked)
        progress(opts.kills, "final restart and check")
        master, *_ = restart_and_check(opts.kills, [])
    finally:
        if master is not None:
            master.stop()
        for r in replicas.values():
            r.stop()
        if not opts.keep and not opts.directory:
            shutil.rmtree(work, ignore_errors=True)
    report.lost = sorted(set(report.lost))
    report.corrupt = sorted(set(report.corrupt))
    report.duplicated = sorted(set(report.duplicated))
    report.acked = len(acked)
    report.seconds = time.perf_counter() - started
    return report


def _add(report: ChaosReport, check: LogCheck) -> None:
    report.lost += check.lost
    report.corrupt += check.corrupt
    report.duplicated += check.duplicated
    report.resurrected += check.resurrected


def _start_replica(work: Path, opts: ChaosOptions, name: str, master: Broker) -> Broker:
    return start_replica(work / name, master.ha_port, name,
                         ["--mapped-file-size-commit-log", str(opts.segment_bytes), "--heartbeat-interval-ms", "500"])


def _free_ports(n: int) -> list[int]:
    from reference.real.ports import free_ports

    return free_ports(n)


def _start_master(work: Path, opts: ChaosOptions, names: list[str], fault: list[str], incarnation: int,
                  ports: list[int]) -> Broker:
    (work / "logs").mkdir(exist_ok=True)
    master_dir = work / "master"
    master_dir.mkdir(exist_ok=True)
    argv = ["broker", "master", "--dir", str(master_dir), "--port", str(ports[0]), "--ha-port", str(ports[1]),
            *_master_flags(opts, names, fault)]
    for attempt in range(50):                     # the killed incarnation's port may linger a moment
        broker = Broker(argv, work / "logs" / f"master-{incarnation:04d}.log")
        try:
            m = broker.wait_for(r"listening host=\S+ port=(\d+) ha_port=(\d+)")
        except (RuntimeError, TimeoutError) as err:
            broker.stop()
            if "cannot listen" not in broker.text() or attempt == 49:
                last = broker.text().strip().splitlines()[-1:] or [str(err)]
                raise ChaosAborted(f"master incarnation {incarnation} did not start: {last[0]}") from None
            time.sleep(0.1)
            continue
        broker.port, broker.ha_port = int(m.group(1)), int(m.group(2))
        return broker
    raise AssertionError("unreachable")


def _recovery_line(master: Broker) -> tuple[int, int, int]:
    """The master's recovery as it says it: records kept, the offset its log ends at, regions dropped."""
    m = master.wait_for(r"recovered (\d+) records, log ends at (\d+)([^\n]*)")
    return int(m.group(1)), int(m.group(2)), m.group(3).count("; dropped:")


def _check_replicas(work: Path, opts: ChaosOptions, names: list[str], replicas: dict[str, Broker], master: Broker,
                    check: LogCheck, acked: dict[int, Acked], report: ChaosReport) -> tuple[list[str], list[str]]:
    """Wait for every slave to catch up with the master's recovered log and check those that
    do.  A slave the master refuses as diverged is re-seeded (its directory wiped, restarted)
    and checked once it has caught up again."""
    in_sync, reseeded = [], []
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    pending = list(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            if name not in reseeded and f"closed: slave {name}: " in master.text():
                replicas[name].stop()
                shutil.rmtree(work / name, ignore_errors=True)
                replicas[name] = _start_replica(work, opts, name, master)
                reseeded.append(name)
                report.replicas_reseeded += 1
                deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
                continue
            got = check_log(work / name / "commitlog", opts.segment_bytes, acked, opts.size)
            if got.end_offset == check.end_offset:
                report.replica_checks += 1
                _add(report, got)
                in_sync.append(name)
                pending.remove(name)
        if pending:
            time.sleep(0.1)
    return in_sync, reseeded
