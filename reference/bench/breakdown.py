"""Where a request's time goes (issue 39): the timelines of a master and its slave
(reference/real/timeline.py, one clock) turned into phases, each the mean and median over the
requests of a benchmark point.

A request's path is arrival, admission, write, then the legs its PUT_OK waits for:
* the flush leg (SYNC_FLUSH): waiting for the fsync in flight to end and the next to start,
  the fdatasync itself, the worker thread's way back to the loop;
* the replica leg (SYNC_MASTER): the master's loop until DATA carrying it is drained to the
  socket, the network (and the delaying proxy) to the slave, the slave's own time from reading
  the DATA to its core's ACK, the ACK's way out of the slave (held there for the round trip
  under ``--inject-ack-lag-ms``), the network back;
then the release (from the later leg's end to the core's PUT_OK) and the send (until the
producer's connection is drained past the answer).  A leg's moment for a request is the first
one at or past the request's end offset: the fsync, DATA or ACK that covered it.
"""

from __future__ import annotations

import bisect
from pathlib import Path

FLUSH_LEG = (("wait for the fsync", "written", "fsync_submit"), ("worker wake-up", "fsync_submit", "fsync_start"),
             ("fsync", "fsync_start", "fsync_return"),
             ("worker to loop", "fsync_return", "fsync_done"))
REPLICA_LEG = (("to DATA drained", "written", "data_sent"), ("network to the slave", "data_sent", "data_in"),
               ("slave", "data_in", "ack_queued"), ("slave's ACK out", "ack_queued", "ack_sent"),
               ("network back", "ack_sent", "ack"))
OFFSET_KINDS = ("fsync_submit", "fsync_start", "fsync_return", "fsync_done", "data_sent", "data_in", "ack_queued",
                "ack_sent", "ack")
REQUEST_KINDS = ("arrive", "put", "written", "answer", "sent")


class TimelineError(ValueError):
    """A timeline file that is not one (names the file and the line)."""


def read(path: Path) -> list[tuple[str, int, int, int]]:
    marks = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.startswith("#"):
                continue
            parts = line.rstrip("\n").split(",")
            try:
                kind, req, offset, ns = parts[0], int(parts[1]), int(parts[2]), int(parts[3])
            except (IndexError, ValueError):
                raise TimelineError(f"{path}:{n}: expected kind,request,offset,ns, got {line.strip()[:80]!r}") from None
            marks.append((kind, req, offset, ns))
    return marks


def _summary(ms: list[float]) -> dict:
    s = sorted(ms)
    return {"avg": round(sum(s) / len(s), 3), "p50": round(s[len(s) // 2], 3)} if s else {"avg": None, "p50": None}


def breakdown(master: Path, replica: Path | None = None, since_ns: int = 0, flush_leg: bool = True,
              replica_leg: bool = False) -> dict:
    """The phases of every PUT_OK whose request arrived at or after ``since_ns`` (the load's start:
    the warm-up is left out).  The replica leg needs the slave's timeline; with neither leg (ASYNC_FLUSH,
    ASYNC_MASTER) the release runs from the write."""
    marks = read(master) + (read(replica) if replica is not None else [])
    by_req: dict[int, dict[str, int]] = {}
    offsets: dict[str, tuple[list[int], list[int]]] = {k: ([], []) for k in OFFSET_KINDS}
    end_of: dict[int, int] = {}
    for kind, req, offset, ns in sorted(marks, key=lambda m: m[3]):
        if kind in REQUEST_KINDS:
            by_req.setdefault(req, {})[kind] = ns
            if kind == "answer":
                end_of[req] = offset
        elif kind in OFFSET_KINDS:
            offs, times = offsets[kind]
            if not offs or offset > offs[-1]:      # the first moment each offset was reached
                offs.append(offset)
                times.append(ns)

    def first_at(kind: str, end: int) -> int | None:
        offs, times = offsets[kind]
        i = bisect.bisect_left(offs, end)
        return times[i] if i < len(offs) else None

    legs = (FLUSH_LEG if flush_leg else ()) + (REPLICA_LEG if replica_leg else ())
    phases: dict[str, list[float]] = {name: [] for name in ("admission", "write", *(p[0] for p in legs),
                                                            "release", "send")}
    total: list[float] = []
    for req, t in by_req.items():
        if not all(k in t for k in REQUEST_KINDS) or t["arrive"] < since_ns:
            continue
        end = end_of[req]
        for kind in OFFSET_KINDS:
            t[kind] = first_at(kind, end)
        if any(t[a] is None or t[b] is None for _, a, b in legs):
            continue
        ends = ([t["fsync_done"]] if flush_leg else []) + ([t["ack"]] if replica_leg else []) or [t["written"]]
        spans = [("admission", t["arrive"], t["put"]), ("write", t["put"], t["written"]),
                 *((name, t[a], t[b]) for name, a, b in legs),
                 ("release", max(ends), t["answer"]), ("send", t["answer"], t["sent"])]
        for name, a, b in spans:
            phases[name].append((b - a) / 1e6)
        total.append((t["sent"] - t["arrive"]) / 1e6)
    return {"requests": len(total), "broker_ms": _summary(total),
            "phases_ms": {name: _summary(v) for name, v in phases.items()}}
