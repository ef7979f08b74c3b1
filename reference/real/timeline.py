"""A real process's per-request timeline (``broker master|replica --timeline FILE``, issue 39):
the moments a request passes on its way to PUT_OK, so that a benchmark can say where the time
between the bound and the figure goes.

A master marks, per request: ``arrive`` (its frame decoded), ``put`` (handed to the core),
``written`` (its bytes in the page cache), ``answer`` (the core's PUT_OK performed; the value is
the request's end offset), ``sent`` (the producer's connection drained past it).  Per offset:
``fsync_submit`` and ``fsync_done`` (the loop hands the fsync to its worker and learns it
finished), ``fsync_return`` (the worker thread's fdatasync returned), ``data_queued`` and
``data_sent`` (DATA ending there queued and drained to a slave), ``ack`` (a slave's ACK read).
A slave marks ``data_in`` (DATA ending there read), ``ack_queued`` (its core's ACK for it) and
``ack_sent`` (that ACK drained; later by ``--inject-ack-lag-ms`` when the slave holds it).

Times are CLOCK_MONOTONIC nanoseconds, one clock for every process of a machine, so that a
slave's file lines up with its master's (reference/bench/breakdown.py reads both).  Nothing
here decides anything: the runtimes call ``mark`` beside what they already do.
"""

from __future__ import annotations

import time
from pathlib import Path

# A benchmark point is a few thousand requests of about a dozen marks each: a run much longer
# than that stops marking (and says so in the file) rather than grow without bound.
MAX_MARKS = 2_000_000
# Request marks are kept for one request in SAMPLE_EVERY (by id, which follows arrival order): the
# phases' means stay those of the whole run while marking costs a few percent of a put's CPU less.
SAMPLE_EVERY = 8
KINDS = ("arrive", "put", "written", "answer", "sent", "fsync_submit", "fsync_start", "fsync_return", "fsync_done",
         "data_queued", "data_sent", "ack", "data_in", "ack_queued", "ack_sent")


class Timeline:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.marks: list[tuple[str, int, int, int]] = []     # (kind, request id or -1, offset or -1, ns)
        self.dropped = 0

    @staticmethod
    def samples(req_id: int) -> bool:
        return not req_id % SAMPLE_EVERY

    def mark(self, kind: str, req_id: int = -1, offset: int = -1) -> None:
        """One moment, now (any thread: list.append is atomic under the GIL)."""
        assert kind in KINDS, kind
        if req_id % SAMPLE_EVERY and req_id != -1:
            return
        if len(self.marks) >= MAX_MARKS:
            self.dropped += 1
            return
        self.marks.append((kind, req_id, offset, time.monotonic_ns()))

    def mark_all(self, kind: str, req_ids: list[int]) -> None:
        """One moment shared by several requests (a write or a send that carried them all)."""
        req_ids = [r for r in req_ids if not r % SAMPLE_EVERY]
        if not req_ids:
            return
        ns = time.monotonic_ns()
        room = MAX_MARKS - len(self.marks)
        if room < len(req_ids):
            self.dropped += len(req_ids) - max(room, 0)
            req_ids = req_ids[:max(room, 0)]
        self.marks.extend((kind, r, -1, ns) for r in req_ids)

    def write(self) -> None:
        """The file: a header (how many marks, how many a bound dropped, the sampling), then one ``kind,request,offset,ns`` line per mark, in order."""
        with open(self.path, "w") as out:
            out.write(f"# ackorder timeline v1 marks={len(self.marks)} dropped={self.dropped} "
                      f"requests_sampled_every={SAMPLE_EVERY}\n")
            out.writelines(f"{k},{r},{o},{ns}\n" for k, r, o, ns in self.marks)
