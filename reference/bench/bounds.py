"""The bounds each benchmark figure is measured against, probed by the same run on the same machine
(issue 39): what the network alone costs, what the disk alone costs, what the CPU allows.

* ``round_trip``: one connection's request/answer round trip to an echo server, through the
  delaying proxy (the slave's network in ``bench ack``) and directly: the proxy's own added
  latency is the difference less the delay asked for.
* ``nearer_bound``: a point's throughput bound by the round trip (``slots`` requests in flight,
  one round trip each) and by the CPU (the cores over the CPU every process spent per message),
  whichever is lower, and the point's share of it.
"""

from __future__ import annotations

import os
import socket
import threading
import time

from reference.bench.proxy import DelayProxy

ROUND_TRIPS = 400
MESSAGE_BYTES = 64


def _echo_server() -> tuple[socket.socket, int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def _echo(conn: socket.socket) -> None:
    with conn:
        try:
            while data := conn.recv(65536):
                conn.sendall(data)
        except OSError:
            pass


def _ping(port: int, n: int) -> list[float]:
    """``n`` round trips of one MESSAGE_BYTES request on one connection, in ms."""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = b"x" * MESSAGE_BYTES
        for _ in range(n):
            started = time.perf_counter()
            sock.sendall(payload)
            got = 0
            while got < MESSAGE_BYTES:
                chunk = sock.recv(MESSAGE_BYTES - got)
                if not chunk:
                    raise ConnectionError("the echo server closed")
                got += len(chunk)
            out.append(1000 * (time.perf_counter() - started))
    return out


def _summary(ms: list[float]) -> dict:
    s = sorted(ms)
    return {"avg": round(sum(s) / len(s), 3), "p50": round(s[len(s) // 2], 3), "p99": round(s[int(0.99 * len(s))], 3)}


def round_trip(delay_ms: float, n: int = ROUND_TRIPS) -> dict:
    """The loopback round trip through the delaying proxy alone (no broker), and without it."""
    assert delay_ms >= 0 and n >= 10
    listener, port = _echo_server()
    proxy = DelayProxy(("127.0.0.1", port), delay_ms)
    try:
        direct = _summary(_ping(port, n))
        through = _summary(_ping(proxy.port, n))
    finally:
        proxy.close()
        listener.close()
    return {"delay_ms_each_way": delay_ms, "round_trips": n, "direct_ms": direct, "through_proxy_ms": through,
            "proxy_added_ms": round(through["avg"] - direct["avg"] - 2 * delay_ms, 3)}


def nearer_bound(msgs_per_s: float, slots: int, rtt_ms: float, cpu_us_per_msg: dict, cores: int | None = None) -> dict:
    """The throughput ``slots`` one-at-a-time requests allow at ``rtt_ms`` each, and the one the CPU
    allows (``cores`` over the CPU per message of every process of the point); the nearer of them
    and the point's share of it."""
    cores = cores or os.cpu_count() or 1
    spent_us = sum(v for v in cpu_us_per_msg.values() if v)
    by_rtt = slots * 1000 / rtt_ms if rtt_ms > 0 else float("inf")
    by_cpu = cores * 1e6 / spent_us if spent_us > 0 else float("inf")
    kind, bound = ("round trip", by_rtt) if by_rtt <= by_cpu else ("CPU", by_cpu)
    return {"round_trip_bound_msgs_per_s": round(by_rtt, 1), "cpu_bound_msgs_per_s": round(by_cpu, 1),
            "nearer_bound": kind, "of_nearer_bound": round(msgs_per_s / bound, 3) if bound else None}
