"""`ackorder bench rolechange`: what a role change costs in log work, by log size.

A node that changes role (a slave promoted, a master demoted) used to start a new runtime that
recovered its log again: a CRC scan of every file, so failover time grew with the log.  Now the
log goes from one machine to the next in memory (reference/failover/broker.py ``HeldLog``,
reference/commitlog.py ``held_log``: the checkpoints, and one segment indexed again; then
reference/real/disk.py ``take_held``: what lies beyond the end zeroed, every segment fdatasynced),
and the process recovers once, when it starts.  Both are measured side by side on the same real files
(written with fdatasync, read back through the page cache), median of ``repeats``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

from reference import effects as fx
from reference.commitlog import CommitLog, held_log
from reference.failover.broker import HeldLog
from reference.real.disk import SegmentStore, take_held
from reference.replica import ReplicaCore

SEGMENT_BYTES = 16 << 20
BODY_BYTES = 1024
MAX_LOG_MIB = 4096           # each log is written to the work directory first


def _write_log(directory: Path, size_bytes: int) -> None:
    store = SegmentStore(directory, SEGMENT_BYTES)
    log = CommitLog(SEGMENT_BYTES, False)
    body = bytes(range(256)) * (BODY_BYTES // 256)
    key = 0
    try:
        while log.wrote < size_bytes:
            key += 1
            _, effects = log.append(key, body)
            for e in effects:
                if isinstance(e, fx.CreateSegment):
                    store.create(e.start)
                elif isinstance(e, fx.WriteData):
                    store.write(e.start, e.position, e.data)
        for start in store.segments():
            store.fsync(start, SEGMENT_BYTES)
    finally:
        store.close()


def _median_ms(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 3), out


def rolechange(work: Path, sizes_mib: list[int], repeats: int = 3,
               progress: Callable[[str], None] = lambda s: None) -> dict:
    rows = []
    for size in sizes_mib:
        directory = work / f"log-{size}mib"
        progress(f"rolechange: writing a {size} MiB log")
        _write_log(directory, size << 20)
        store = SegmentStore(directory, SEGMENT_BYTES)
        try:
            progress(f"rolechange: {size} MiB, recovery against the held log")
            recover_ms, scan = _median_ms(store.recover, repeats)
            replica = ReplicaCore.recovered("s", SEGMENT_BYTES, scan)     # a follower holding that log
            # the whole hand-over: the log from memory, then the files left as recovery leaves them
            # (beyond the end zeroed, every segment fdatasynced: clean pages, so cheap)
            held_ms, held = _median_ms(lambda: take_held(store, HeldLog(
                held_log(replica.index, replica.segments, replica.parsed_end))), repeats)
        finally:
            store.close()
        assert (held.end_offset, held.record_count, held.checkpoints) == \
            (scan.end_offset, scan.record_count, scan.checkpoints), "the held log is not the recovered one"
        rows.append({"log MiB": size, "segments": len(scan.checkpoints), "records": scan.record_count,
                     "recovery ms": recover_ms, "held log ms": held_ms,
                     "recovery / held": round(recover_ms / max(held_ms, 1e-3), 1)})
    return {"scenario": "rolechange", "segment_bytes": SEGMENT_BYTES, "repeats": repeats, "rows": rows,
            "ratios": {f"{r['log MiB']} MiB": r["recovery / held"] for r in rows}}
