"""Slow and half-open peers, as a small sans-IO state machine that every server
runtime (the master's two ports, the controller's) drives the same way.

A connection may hold an unfinished frame (the bytes of a frame whose end has
not arrived).  Two bounds keep such peers from locking a server out:

* a deadline for finishing a frame, counted from the first byte of the frame
  (not from the last byte received: a peer sending one byte a second would
  otherwise never be idle);
* a memory budget for all unfinished frames together; past it, connections
  are closed oldest unfinished frame first until the rest fit.

At the connection limit, a new connection takes the place of the one whose
frame has been unfinished the longest, once that is longer than a peer on a
working link needs (``slow_frame_ms``): a peer that trickles bytes to keep a
slot gets no more protection than the deadline gives it.

Nothing here reads a socket or a clock: the runtime says what a read left
behind (``fed``), asks what is overdue at its housekeeping tick
(``overdue``), and asks for a place at the limit (``evictable``).  Each
answer is a list of (connection id, reason) to close, with the reason for
the one log line each gets.
"""

from __future__ import annotations

import attrs

from spec.config import ConfigError

FRAME_DEADLINE_MS_DEFAULT = 10_000
PARTIAL_FRAME_BUDGET_BYTES_DEFAULT = 128 << 20
SLOW_FRAME_MS = 1_000


@attrs.define(slots=True)
class _Partial:
    since_ms: int        # when the first byte of the unfinished frame arrived
    bytes: int


class FrameGuard:
    def __init__(self, frame_deadline_ms: int, budget_bytes: int, max_frame_bytes: int) -> None:
        if frame_deadline_ms <= 0:
            raise ConfigError(f"--frame-deadline-ms {frame_deadline_ms}: must be a positive number of ms")
        if budget_bytes < max_frame_bytes:
            raise ConfigError(f"--partial-frame-budget-bytes {budget_bytes}: at least one frame of the largest kind "
                              f"({max_frame_bytes} bytes), or such a frame could never arrive")
        self.frame_deadline_ms = frame_deadline_ms
        self.budget_bytes = budget_bytes
        self.slow_frame_ms = min(SLOW_FRAME_MS, frame_deadline_ms)
        self._partial: dict[int, _Partial] = {}
        self.total_bytes = 0

    def fed(self, conn: int, buffered_bytes: int, completed_frames: bool, now_ms: int) -> list[tuple[int, str]]:
        """A read on ``conn`` left ``buffered_bytes`` of an unfinished frame (0: none) and completed
        at least one frame or not.  Returns the connections to close to stay within the budget."""
        assert buffered_bytes >= 0
        old = self._partial.get(conn)
        if old is not None:
            self.total_bytes -= old.bytes
        if buffered_bytes == 0:
            self._partial.pop(conn, None)
        elif old is None or completed_frames:
            self._partial[conn] = _Partial(now_ms, buffered_bytes)     # a new frame began in this read
        else:
            old.bytes = buffered_bytes
        self.total_bytes += buffered_bytes
        victims = []
        if self.total_bytes > self.budget_bytes:
            for victim, p in sorted(self._partial.items(), key=lambda kv: (kv[1].since_ms, kv[0])):
                victims.append((victim, f"{p.bytes} bytes of a frame unfinished for {now_ms - p.since_ms} ms: "
                                        f"unfinished frames hold {self.total_bytes} bytes, over the budget of "
                                        f"{self.budget_bytes} (oldest closed first)"))
                self.forget(victim)
                if self.total_bytes <= self.budget_bytes:
                    break
        assert self.total_bytes <= self.budget_bytes, (self.total_bytes, self.budget_bytes)
        return victims

    def forget(self, conn: int) -> None:
        """The connection is closed."""
        p = self._partial.pop(conn, None)
        if p is not None:
            self.total_bytes -= p.bytes
        assert self.total_bytes >= 0

    def overdue(self, now_ms: int) -> list[tuple[int, str]]:
        """Connections whose frame has been unfinished for longer than the deadline."""
        late = [(c, p) for c, p in self._partial.items() if now_ms - p.since_ms > self.frame_deadline_ms]
        for c, _ in late:
            self.forget(c)
        return [(c, f"{p.bytes} bytes of a frame unfinished for {now_ms - p.since_ms} ms (the frame deadline is "
                    f"{self.frame_deadline_ms} ms)") for c, p in late]

    def evictable(self, now_ms: int, limit: int) -> tuple[int, str] | None:
        """At the connection limit: the connection a newcomer may replace, if any."""
        if not self._partial:
            return None
        conn, p = min(self._partial.items(), key=lambda kv: (kv[1].since_ms, kv[0]))
        if now_ms - p.since_ms <= self.slow_frame_ms:
            return None
        self.forget(conn)
        return conn, (f"{p.bytes} bytes of a frame unfinished for {now_ms - p.since_ms} ms: a new connection "
                      f"takes its place at the connection limit ({limit})")
