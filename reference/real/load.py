"""A load generator: N producers, each sending synchronously (one request in
flight, as RocketMQ's sync send), with latency percentiles and the count of
every status.  One thread drives every producer's connection through one
selector, so the generator itself costs little CPU next to the broker it
measures.  Message bodies are derived from their key, so a test can check
any stored message for integrity; every PUT_OK is kept with the offset the
broker gave it (``acked``), and can be written to a record file as it
arrives (``record``), one JSON object per line."""

from __future__ import annotations

import hashlib
import json
import selectors
import socket
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO

import attrs

from reference.frames import FrameDecoder, FrameError, Put, Response, encode
from reference.status import PutStatus

CONNECTION_LOST = "CONNECTION_LOST"
RECV_BYTES = 65536


def body_for(key: int, size: int) -> bytes:
    seed = hashlib.blake2b(key.to_bytes(8, "big"), digest_size=32).digest()
    return (seed * (size // 32 + 1))[:size]


@attrs.frozen
class Acked:
    key: int
    next_offset: int       # where the broker says the record ends
    size: int              # body bytes


@attrs.frozen
class LoadResult:
    producers: int
    sent: int
    seconds: float
    statuses: dict[str, int]
    latency_ms: dict[str, float]      # avg, p50, p99, max
    acked: tuple[Acked, ...]          # answered PUT_OK, in the order the answers came
    connect_error: str | None = None  # no connection could be made: why (the first refusal); nothing was sent

    @property
    def acked_keys(self) -> tuple[int, ...]:
        return tuple(sorted(a.key for a in self.acked))

    @property
    def throughput(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict:
        return {"producers": self.producers, "sent": self.sent, "seconds": round(self.seconds, 3),
                "messages_per_second": round(self.throughput, 1), "latency_ms": self.latency_ms,
                "statuses": self.statuses}


@attrs.define
class _Conn:
    sock: socket.socket
    decoder: FrameDecoder = attrs.Factory(FrameDecoder)
    out: bytearray = attrs.Factory(bytearray)
    writing: bool = False       # registered for EVENT_WRITE
    producers: list = attrs.Factory(list)


@attrs.define
class _Producer:
    keys: range
    conn: _Conn
    next_index: int = 0
    sent_at: float = 0.0        # 0: nothing in flight


def run_load(target: tuple[str, int], producers: int, count: int, size: int, first_key: int = 1,
             timeout_s: float = 30.0, stop: threading.Event | None = None, record: IO[str] | None = None,
             on_ack=None, connections: int | None = None) -> LoadResult:
    """Send ``count`` messages of ``size`` bytes (keys first_key...) from ``producers``
    synchronous producers (one request in flight each) over ``connections`` TCP connections
    (default one per producer; RocketMQ's clients multiplex all their sending threads over one
    channel per broker, which lets the broker read many requests and answer many in one call);
    stops early when ``stop`` is set.  ``on_ack(Acked)`` and ``record`` see every PUT_OK."""
    assert producers >= 1 and count >= 0 and size >= 0
    connections = min(connections or producers, producers)
    stop = stop or threading.Event()
    sel = selectors.DefaultSelector()
    latencies: list[float] = []
    statuses: Counter = Counter()
    acked: list[Acked] = []
    conns: list[_Conn] = []
    refused: str | None = None
    for _ in range(connections):
        try:
            sock = socket.create_connection(target, timeout=timeout_s)
        except OSError as err:
            refused = refused or (err.strerror or str(err) or type(err).__name__)
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = _Conn(sock)
        conns.append(conn)
        sel.register(sock, selectors.EVENT_READ, conn)
    connected = bool(conns)          # conns loses the connections that break later
    owner: list[_Producer | None] = []
    for p in range(producers):
        keys = range(first_key + p, first_key + count, producers)
        if not conns:
            if keys:
                statuses[CONNECTION_LOST] += 1      # could not connect: nothing was sent
            owner.append(None)
            continue
        prod = _Producer(keys, conns[p % len(conns)])
        if keys:                       # a producer with nothing to send is not waited for
            prod.conn.producers.append(prod)
        owner.append(prod)
    def send_next(prod: _Producer) -> None:
        key = prod.keys[prod.next_index]
        prod.next_index += 1
        prod.conn.out += encode(Put(key, key, body_for(key, size)))
        prod.sent_at = time.perf_counter()

    def lose(conn: _Conn) -> None:
        """The connection broke (or the run stopped): the requests in flight have no answer."""
        for prod in conn.producers:
            if prod.sent_at:
                statuses[CONNECTION_LOST] += 1
            prod.sent_at = 0.0
            prod.next_index = len(prod.keys)
        conn.producers.clear()
        try:
            sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        conns.remove(conn)

    def push(conn: _Conn) -> bool:
        try:
            n = conn.sock.send(conn.out) if conn.out else 0
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            return False
        del conn.out[:n]
        if conn.writing != bool(conn.out):
            conn.writing = bool(conn.out)
            sel.modify(conn.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0), conn)
        return True

    start = time.perf_counter()
    for prod in owner:
        if prod is not None and prod.keys:
            send_next(prod)
    for conn in list(conns):
        if not push(conn):
            lose(conn)
    while any(c.producers for c in conns) and not stop.is_set():
        events = sel.select(0.2)
        now = time.perf_counter()
        for key, mask in events:
            conn: _Conn = key.data
            if conn not in conns:
                continue
            try:
                data = conn.sock.recv(RECV_BYTES) if mask & selectors.EVENT_READ else None
                frames = conn.decoder.feed(data) if data else ([] if data is None else None)
            except (BlockingIOError, InterruptedError):
                frames = []
            except (OSError, FrameError):
                frames = None
            if frames is None:
                lose(conn)
                continue
            for frame in frames:
                if not isinstance(frame, Response):
                    continue
                index = (frame.req_id - first_key) % producers
                prod = owner[index] if 0 <= frame.req_id - first_key < count else None
                if prod is None or not prod.sent_at or prod.keys[prod.next_index - 1] != frame.req_id:
                    continue
                latencies.append((now - prod.sent_at) * 1000)
                prod.sent_at = 0.0
                status = PutStatus(frame.status).name
                statuses[status] += 1
                if status == "PUT_OK":
                    a = Acked(frame.req_id, frame.next_offset, size)
                    acked.append(a)
                    if record is not None:
                        record.write(json.dumps(attrs.asdict(a)) + "\n")
                    if on_ack is not None:
                        on_ack(a)
                if prod.next_index < len(prod.keys) and not stop.is_set():
                    send_next(prod)
                else:
                    conn.producers.remove(prod)
            if not push(conn):
                lose(conn)
        for conn in list(conns):
            if any(p.sent_at and now - p.sent_at > timeout_s for p in conn.producers):
                lose(conn)
    for conn in list(conns):
        lose(conn)
    sel.close()
    seconds = time.perf_counter() - start
    lat = sorted(latencies)

    def pct(q: float) -> float:
        return round(lat[min(len(lat) - 1, int(q * len(lat)))], 3) if lat else 0.0

    summary = {"avg": round(statistics.fmean(lat), 3) if lat else 0.0, "p50": pct(0.50), "p99": pct(0.99),
               "max": round(lat[-1], 3) if lat else 0.0}
    return LoadResult(producers, len(latencies), seconds, dict(sorted(statuses.items())), summary, tuple(acked),
                      connect_error=None if connected else f"cannot connect to {target[0]}:{target[1]}: {refused}")


def read_record(path: Path) -> list[Acked]:
    """The acked messages a ``--record`` file lists."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                out.append(Acked(**json.loads(line)))
            except (ValueError, TypeError) as err:
                raise ValueError(f"{path}:{n}: not an acked-message record ({err})") from None
    return out
