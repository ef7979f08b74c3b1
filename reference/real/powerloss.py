"""Power loss on the real store, ALICE/CrashMonkey style.

kill -9 keeps the page cache, so it cannot tell whether the store fsyncs the
right files and ranges.  Here a recording layer sits under SegmentStore's
file operations (``RecordingOps``: create, pwrite, ftruncate, fdatasync,
rename, unlink, the directory fsync, per file, in the order they happened)
while a real master (the real runtime, its flush thread and all) serves a
SYNC_FLUSH load; every PUT_OK the producers get is recorded in the same
sequence.  Afterwards, for every crash point of the recording (after each
operation), crash states are built from what a power loss may leave:

* everything a completed fdatasync covered (writes to that file issued
  before the fdatasync began) is kept;
* of the writes to a file after that, any prefix may have reached the disk,
  the next one torn at a sector boundary (``prefix`` and ``torn`` states),
  and separately any subset of them (``subset`` states, sampled when there
  are many);
* a file created, unlinked or renamed since the last directory fsync may or
  may not have its new name.

On each state the real recovery (SegmentStore.recover) runs, and the checks
are: every message answered PUT_OK before the crash point is in the
recovered log, intact, at the offset the master gave; every record the
recovery kept is a message some producer sent (nothing resurrected corrupt);
no message is there twice.  States are deduplicated by content, and each
distinct state is recovered once.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from reference.config import StoreConfig
from reference.real.disk import FileOps, SegmentStore
from reference.real.load import Acked, body_for, run_load
from reference.real.options import MasterOptions
from reference.record import HEADER_SIZE, recover_log
from reference.real.chaos_reach import check_write_path_reach
from reference.real.options import NO_ROLL_CROSSED, check_segment_room
from spec.config import ConfigError

SECTOR = 512


@attrs.frozen
class Op:
    seq: int
    kind: str              # create, pwrite, ftruncate, fdatasync, fsync_dir, unlink, rename, ack
    name: str = ""         # the file (ack: "")
    offset: int = 0        # pwrite: file position; ftruncate: size; ack: next_offset
    data: bytes = b""      # pwrite
    began: int = 0         # fdatasync, fsync_dir: seq when it began (what it covers was issued before)
    dst: str = ""          # rename
    key: int = 0           # ack
    size: int = 0          # ack: body bytes


class RecordingOps(FileOps):
    """FileOps that records every operation (thread-safe: the loop and the flush thread)."""

    def __init__(self, fsync_delay_ms: int = 0) -> None:
        assert fsync_delay_ms >= 0
        self.ops: list[Op] = []
        self._lock = threading.Lock()
        self._seq = 0
        self.enabled = True
        self.fsync_delay_s = fsync_delay_ms / 1000

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def record(self, kind: str, **fields) -> int:
        with self._lock:
            seq = self._next()
            if self.enabled:
                self.ops.append(Op(seq, kind, **fields))
            return seq

    def begin(self) -> int:
        with self._lock:
            return self._next()

    def open(self, path: Path) -> int:
        existed = path.exists()
        fd = super().open(path)
        if not existed:
            self.record("create", name=path.name)
        return fd

    def ftruncate(self, path: Path, fd: int, size: int) -> None:
        super().ftruncate(path, fd, size)
        self.record("ftruncate", name=path.name, offset=size)

    def pwrite(self, path: Path, fd: int, data, position: int) -> int:
        n = super().pwrite(path, fd, data, position)
        self.record("pwrite", name=path.name, offset=position, data=bytes(data[:n]))
        return n

    def fdatasync(self, path: Path, fd: int) -> None:
        began = self.begin()
        if self.fsync_delay_s:
            # A disk's fdatasync takes milliseconds; the store's directory (tmpfs) answers in
            # microseconds.  Without the delay an acknowledgement sent before its fsync may still
            # reach the producer after the fsync has ended, and that order is all the recording sees.
            time.sleep(self.fsync_delay_s)
        super().fdatasync(path, fd)
        self.record("fdatasync", name=path.name, began=began)

    def fsync_dir(self, directory: Path) -> None:
        began = self.begin()
        super().fsync_dir(directory)
        self.record("fsync_dir", began=began)

    def unlink(self, path: Path) -> None:
        super().unlink(path)
        self.record("unlink", name=path.name)

    def rename(self, src: Path, dst: Path) -> None:
        super().rename(src, dst)
        self.record("rename", name=src.name, dst=dst.name)


class SkipNewFileFsync(RecordingOps):
    """A broken store for the checks to catch: after a segment roll, the first fdatasync of the
    new file does nothing (a flush across the roll syncs only the old file)."""

    def __init__(self, fsync_delay_ms: int = 0) -> None:
        super().__init__(fsync_delay_ms)
        self._synced: set[str] = set()

    def fdatasync(self, path: Path, fd: int) -> None:
        if self._synced and path.name not in self._synced:
            self._synced.add(path.name)
            return
        self._synced.add(path.name)
        super().fdatasync(path, fd)


# --- crash states --------------------------------------------------------------------------------


@attrs.frozen
class CrashState:
    files: tuple[tuple[str, bytes], ...]     # name -> content, sorted
    how: str                                  # prefix, torn, subset, durable-only, all

    def digest(self) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        for name, data in self.files:
            h.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
        return h.digest()


def _apply(content: bytearray, op: Op, lo: int | None = None, hi: int | None = None) -> None:
    if op.kind == "ftruncate":
        if len(content) < op.offset:
            content.extend(bytes(op.offset - len(content)))
        else:
            del content[op.offset:]
        return
    start = op.offset if lo is None else lo
    end = op.offset + len(op.data) if hi is None else hi
    if len(content) < end:
        content.extend(bytes(end - len(content)))
    content[start:end] = op.data[start - op.offset: end - op.offset]


def _sector_cuts(op: Op) -> list[int]:
    first = (op.offset // SECTOR + 1) * SECTOR
    return list(range(first, op.offset + len(op.data), SECTOR))


def crash_states(ops: list[Op], point: int, rng: random.Random, per_point: int) -> list[CrashState]:
    """The states a power loss after ``ops[:point]`` may leave (at most ``per_point``, sampled)."""
    done = ops[:point]
    names: dict[str, dict] = {}
    dir_synced_at = 0
    for op in done:
        if op.kind == "fsync_dir":
            dir_synced_at = max(dir_synced_at, op.began)
    last_sync: dict[str, int] = {}
    for op in done:
        if op.kind == "fdatasync":
            last_sync[op.name] = max(last_sync.get(op.name, 0), op.began)
    durable: dict[str, list[Op]] = {}
    pending: dict[str, list[Op]] = {}
    uncertain_names: list[tuple[str, str]] = []     # (kind, name) of directory changes not yet fsync'd
    live: set[str] = set()
    for op in done:
        if op.kind == "create":
            live.add(op.name)
            durable.setdefault(op.name, [])
            pending.setdefault(op.name, [])
            if op.seq > dir_synced_at:
                uncertain_names.append(("create", op.name))
        elif op.kind == "unlink":
            live.discard(op.name)
            if op.seq > dir_synced_at:
                uncertain_names.append(("unlink", op.name))
        elif op.kind in ("pwrite", "ftruncate"):
            target = durable if op.seq < last_sync.get(op.name, 0) else pending
            target.setdefault(op.name, []).append(op)
            durable.setdefault(op.name, [])
    assert not any(k == "rename" for k, _ in uncertain_names)

    def build(choice: dict[str, list[tuple[Op, int | None, int | None]]], how: str,
              flip: frozenset = frozenset()) -> CrashState:
        """Durable writes, plus the chosen pending ones; ``flip``: files whose last directory
        change (create or unlink) did not reach the disk."""
        files = {}
        for name in sorted(live | {n for k, n in uncertain_names if k == "unlink"}):
            if (name in live) == (name in flip):
                continue
            content = bytearray()
            for op in durable.get(name, []):
                _apply(content, op)
            for op, lo, hi in choice.get(name, []):
                _apply(content, op, lo, hi)
            files[name] = bytes(content)
        return CrashState(tuple(sorted(files.items())), how)

    out = [build({}, "durable-only"), build({n: [(op, None, None) for op in ops_]
                                               for n, ops_ in pending.items()}, "all")]
    for name, ops_ in pending.items():
        writes = [(op, None, None) for op in ops_]
        for k in range(len(writes)):
            out.append(build({name: writes[:k]}, "prefix"))
            op = ops_[k]
            if op.kind == "pwrite":
                for cut in _sector_cuts(op):
                    out.append(build({name: writes[:k] + [(op, None, cut)]}, "torn"))
                    out.append(build({name: writes[:k] + [(op, cut, None)]}, "torn"))
        if len(writes) >= 2:
            subsets = []
            for _ in range(min(per_point, 2 ** len(writes))):
                subsets.append([w for w in writes if rng.random() < 0.5])
            for k in range(len(writes)):               # every single write lost (a hole)
                subsets.append(writes[:k] + writes[k + 1:])
            for subset in subsets:
                out.append(build({name: subset}, "subset"))
    for kind, name in uncertain_names:                  # a create or unlink not yet durable
        out.append(build({}, "dir", frozenset({name})))
    if len(out) > per_point:
        keep = out[:2]
        keep += rng.sample(out[2:], per_point - 2)
        out = keep
    return out


# --- recovery and the checks ---------------------------------------------------------------------


@attrs.frozen
class Recovered:
    records: dict          # end offset -> (key, body intact)
    duplicated: tuple[int, ...]
    resurrected: tuple[int, ...]      # keys of kept records whose body is not what was sent
    error: str | None


def recover_state(state: CrashState, segment_size: int, scratch: Path, keep_torn: bool = False) -> Recovered:
    """Materialize the state in ``scratch`` and run the real recovery on it (``keep_torn``: the master's
    BugRecoveryKeepsTorn, whose records are read as that recovery reads them)."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for name, data in state.files:
        (scratch / name).write_bytes(data)
    try:
        store = SegmentStore(scratch, segment_size)
        try:
            store.recover(keep_torn=keep_torn)
            data = store.read_all()
        finally:
            store.close()
    except OSError as err:
        return Recovered({}, (), (), f"recovery failed: {err}")
    report = recover_log(data, segment_size, keep_torn=keep_torn)
    records, seen, resurrected = {}, {}, []
    for r in report.records:
        seg = data[r.offset - r.offset % segment_size]
        pos = r.offset % segment_size
        body = bytes(seg[pos + HEADER_SIZE: pos + r.size])
        intact = body == body_for(r.key, len(body))
        records[r.end] = (r.key, intact)
        seen[r.key] = seen.get(r.key, 0) + 1
        if not intact:
            resurrected.append(r.key)
    return Recovered(records, tuple(k for k, n in seen.items() if n > 1), tuple(resurrected), None)


@attrs.frozen
class PowerLossOptions:
    runs: int = 3
    seed: int = 0
    producers: int = 4
    size: int = 300                 # largest body; each message draws 1..size
    messages: int = 150             # per recorded run
    segment_bytes: int = 8 * 1024   # small: flushes cross segment rolls
    states_per_point: int = 24
    bugs: tuple[str, ...] = ()
    broken_fsync: bool = False      # SkipNewFileFsync under the store (to see the checks bite)
    fsync_delay_ms: int = 2         # each fdatasync this much longer (an SSD, not tmpfs)
    transient_store_pool: bool = False      # appends land in a write buffer, copied to the file by commits

    def __attrs_post_init__(self) -> None:
        if self.runs < 1 or self.messages < 1 or self.producers < 1 or self.size < 1:
            raise ConfigError("--kills (recorded runs), --producers, --size must be positive")
        if not 0 <= self.fsync_delay_ms <= 1000:
            raise ConfigError(f"--fsync-delay-ms {self.fsync_delay_ms}: 0 to 1000")
        check_segment_room(self.segment_bytes, self.size)
        check_write_path_reach("--power-loss", self.bugs)


@attrs.define
class PowerLossReport:
    options: dict
    runs: int = 0
    operations: int = 0
    fdatasyncs: int = 0
    flushes_across_segment_roll: int = 0
    writes_across_segment_roll: int = 0
    crash_points: int = 0
    crash_states: int = 0
    distinct_states: int = 0
    states_by_kind: dict = attrs.Factory(dict)
    acked: int = 0
    ack_checks: int = 0
    violations: list[str] = attrs.Factory(list)

    @property
    def unexercised(self) -> str | None:
        """Why the runs did not exercise what they were asked to (None: they did)."""
        if self.options.get("transient_store_pool") and self.writes_across_segment_roll == 0:
            return NO_ROLL_CROSSED
        return None

    @property
    def valid(self) -> bool:
        return not self.violations and self.unexercised is None

    def to_json(self) -> dict:
        return {"valid": self.valid, "runs": self.runs, "operations_recorded": self.operations,
                "fdatasyncs": self.fdatasyncs, "flushes_across_segment_roll": self.flushes_across_segment_roll,
                "writes_across_segment_roll": self.writes_across_segment_roll, "unexercised": self.unexercised,
                "crash_points": self.crash_points, "crash_states": self.crash_states,
                "distinct_states_recovered": self.distinct_states, "states_by_kind": self.states_by_kind,
                "acked": self.acked, "ack_checks": self.ack_checks, "violations_count": len(self.violations),
                "violations": self.violations[:100], "options": self.options}


def record_run(directory: Path, opts: PowerLossOptions, seed: int) -> tuple[list[Op], int, int, int]:
    """A real master (in this process, on its own thread) under SYNC_FLUSH load, every file
    operation recorded; returns the operations (acks included), how many were PUT_OK, how
    many fsyncs covered two segments (a flush across a segment roll), and how many writes
    (with the transient store pool: commits of the write buffer) ran from one segment into the next."""
    from reference.real.master_server import MasterRuntime

    ops = (SkipNewFileFsync if opts.broken_fsync else RecordingOps)(opts.fsync_delay_ms)
    cfg = StoreConfig(flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=opts.segment_bytes,
                      max_message_size=opts.size + 64, sync_flush_timeout_ms=5000, bugs=frozenset(opts.bugs),
                      transient_store_pool_enable=opts.transient_store_pool)
    runtime = MasterRuntime(MasterOptions(directory=directory, config=cfg, port=0, ha_port=0),
                            log=lambda line: None, ops=ops)
    thread = threading.Thread(target=runtime.run, name="master", daemon=True)
    thread.start()
    rng = random.Random(seed)
    acked = 0
    try:
        for batch in range((opts.messages + 24) // 25):
            size = rng.randint(1, opts.size)      # sizes vary batch by batch: rolls fall everywhere
            result = run_load(("127.0.0.1", runtime.port), opts.producers, min(25, opts.messages - batch * 25),
                              size, first_key=1 + batch * 1000, timeout_s=20,
                              on_ack=lambda a: ops.record("ack", offset=a.next_offset, key=a.key, size=a.size))
            acked += result.statuses.get("PUT_OK", 0)
    finally:
        runtime.stop()
        thread.join(30)
    return ops.ops, acked, runtime.stats["fsyncs_across_segment_roll"], runtime.stats["writes_across_segment_roll"]


def explore_power_loss(opts: PowerLossOptions,
                       progress: Callable[[int, str], None] = lambda n, text: None) -> PowerLossReport:
    report = PowerLossReport(options=attrs.asdict(opts))
    rng = random.Random(f"ackorder-power-loss-{opts.seed}")
    base = Path(tempfile.mkdtemp(prefix="ackorder-power-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        for run in range(opts.runs):
            progress(run, f"run {run + 1}: recording a master under load")
            ops, acked, across, writes_across = record_run(base / f"run{run}", opts, seed=rng.randrange(1 << 30))
            report.runs += 1
            report.acked += acked
            report.operations += sum(1 for op in ops if op.kind != "ack")
            syncs = [op for op in ops if op.kind == "fdatasync"]
            report.fdatasyncs += len(syncs)
            report.flushes_across_segment_roll += across
            report.writes_across_segment_roll += writes_across
            progress(run, f"run {run + 1}: crash states of {len(ops)} operations")
            _explore(ops, opts, rng, base / "scratch", report, run)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return report


def _explore(ops: list[Op], opts: PowerLossOptions, rng: random.Random, scratch: Path, report: PowerLossReport,
             run: int) -> None:
    cache: dict[bytes, Recovered] = {}
    acks: list[Op] = []
    for point in range(len(ops) + 1):
        if point and ops[point - 1].kind == "ack":
            acks.append(ops[point - 1])
            if point < len(ops) and ops[point].kind == "ack":
                continue            # a crash between two acks leaves the same files: check once
        report.crash_points += 1
        for state in crash_states(ops, point, rng, opts.states_per_point):
            report.crash_states += 1
            report.states_by_kind[state.how] = report.states_by_kind.get(state.how, 0) + 1
            digest = state.digest()
            got = cache.get(digest)
            if got is None:
                got = cache[digest] = recover_state(state, opts.segment_bytes, scratch,
                                                    keep_torn="BugRecoveryKeepsTorn" in opts.bugs)
                report.distinct_states += 1
            where = f"run {run + 1}, crash after operation {point} ({_describe(ops, point)}), {state.how} state"
            if got.error is not None:
                report.violations.append(f"{where}: {got.error}")
                continue
            for key in got.resurrected:
                report.violations.append(f"{where}: record of key {key} kept with a body no producer sent")
            for key in got.duplicated:
                report.violations.append(f"{where}: key {key} recovered twice")
            for ack in acks:
                report.ack_checks += 1
                rec = got.records.get(ack.offset)
                if rec != (ack.key, True):
                    what = "lost" if rec is None else "corrupt"
                    report.violations.append(f"{where}: PUT_OK key {ack.key} (ends at {ack.offset}) {what}")
            if len(report.violations) > 10_000:
                return


def _describe(ops: list[Op], point: int) -> str:
    if point == 0:
        return "nothing yet"
    op = ops[point - 1]
    if op.kind == "pwrite":
        return f"pwrite {op.name}@{op.offset}+{len(op.data)}"
    if op.kind == "ack":
        return f"PUT_OK key {op.key}"
    return f"{op.kind} {op.name}".strip()


def acked_from(ops: list[Op]) -> list[Acked]:
    return [Acked(op.key, op.offset, op.size) for op in ops if op.kind == "ack"]
