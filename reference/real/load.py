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
class _Producer:
    sock: socket.socket
    keys: range
    next_index: int = 0
    sent_at: float = 0.0
    decoder: FrameDecoder = attrs.Factory(FrameDecoder)
    out: bytes = b""
    writing: bool = False       # registered for EVENT_WRITE


def run_load(target: tuple[str, int], producers: int, count: int, size: int, first_key: int = 1,
             timeout_s: float = 30.0, stop: threading.Event | None = None, record: IO[str] | None = None,
             on_ack=None) -> LoadResult:
    """Send ``count`` messages of ``size`` bytes (keys first_key...) from ``producers``
    synchronous producers; stops early when ``stop`` is set.  ``on_ack(Acked)`` and
    ``record`` see every PUT_OK as it arrives."""
    assert producers >= 1 and count >= 0 and size >= 0
    stop = stop or threading.Event()
    sel = selectors.DefaultSelector()
    latencies: list[float] = []
    statuses: Counter = Counter()
    acked: list[Acked] = []
    live: dict[socket.socket, _Producer] = {}
    start = time.perf_counter()
    for p in range(producers):
        keys = range(first_key + p, first_key + count, producers)
        if not keys:
            continue
        try:
            sock = socket.create_connection(target, timeout=timeout_s)
        except OSError:
            statuses[CONNECTION_LOST] += 1
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        prod = _Producer(sock, keys)
        live[sock] = prod
        sel.register(sock, selectors.EVENT_READ, prod)
        _send_next(prod, size, sel)

    def lose(prod: _Producer) -> None:
        """The connection broke (or the run stopped): the request in flight has no answer."""
        if prod.sent_at:
            statuses[CONNECTION_LOST] += 1
        prod.sent_at = 0.0
        sel.unregister(prod.sock)
        prod.sock.close()
        del live[prod.sock]

    while live and not stop.is_set():
        events = sel.select(0.2)
        now = time.perf_counter()
        for key, mask in events:
            prod: _Producer = key.data
            if prod.sock not in live:
                continue
            if mask & selectors.EVENT_WRITE:
                if not _push(prod, sel):
                    lose(prod)
                    continue
            if not mask & selectors.EVENT_READ:
                continue
            try:
                data = prod.sock.recv(RECV_BYTES)
                frames = prod.decoder.feed(data) if data else None
            except (BlockingIOError, InterruptedError):
                continue
            except (OSError, FrameError):
                frames = None
            if frames is None:
                lose(prod)
                continue
            for frame in frames:
                expected = prod.keys[prod.next_index - 1]
                if not isinstance(frame, Response) or frame.req_id != expected:
                    continue
                latencies.append((now - prod.sent_at) * 1000)
                prod.sent_at = 0.0
                status = PutStatus(frame.status).name
                statuses[status] += 1
                if status == "PUT_OK":
                    a = Acked(expected, frame.next_offset, size)
                    acked.append(a)
                    if record is not None:
                        record.write(json.dumps(attrs.asdict(a)) + "\n")
                    if on_ack is not None:
                        on_ack(a)
                if prod.next_index < len(prod.keys) and not stop.is_set():
                    if not _send_next(prod, size, sel):
                        lose(prod)
                        break
                else:
                    sel.unregister(prod.sock)
                    prod.sock.close()
                    del live[prod.sock]
                    break
        for prod in [p for p in live.values() if p.sent_at and now - p.sent_at > timeout_s]:
            lose(prod)
    for prod in list(live.values()):
        lose(prod)
    sel.close()
    seconds = time.perf_counter() - start
    lat = sorted(latencies)

    def pct(q: float) -> float:
        return round(lat[min(len(lat) - 1, int(q * len(lat)))], 3) if lat else 0.0

    summary = {"avg": round(statistics.fmean(lat), 3) if lat else 0.0, "p50": pct(0.50), "p99": pct(0.99),
               "max": round(lat[-1], 3) if lat else 0.0}
    return LoadResult(producers, len(latencies), seconds, dict(sorted(statuses.items())), summary, tuple(acked))


def _send_next(prod: _Producer, size: int, sel: selectors.BaseSelector) -> bool:
    key = prod.keys[prod.next_index]
    prod.next_index += 1
    prod.out = encode(Put(key, key, body_for(key, size)))
    prod.sent_at = time.perf_counter()
    return _push(prod, sel)


def _push(prod: _Producer, sel: selectors.BaseSelector) -> bool:
    """Send what is pending; wait for EVENT_WRITE if the socket is full.  False: the link broke."""
    try:
        n = prod.sock.send(prod.out)
    except (BlockingIOError, InterruptedError):
        n = 0
    except OSError:
        return False
    prod.out = prod.out[n:]
    if prod.writing != bool(prod.out):
        prod.writing = bool(prod.out)
        sel.modify(prod.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if prod.out else 0), prod)
    return True


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
