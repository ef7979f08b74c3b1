"""A load generator: N producers, each sending synchronously (one request in
flight, as RocketMQ's sync send), with latency percentiles and the count of
every status.  Message bodies are derived from their key, so a test can
check any stored message for integrity."""

from __future__ import annotations

import hashlib
import socket
import statistics
import threading
import time
from collections import Counter

import attrs

from reference.frames import FrameDecoder, FrameError, Put, Response, encode
from reference.status import PutStatus

CONNECTION_LOST = "CONNECTION_LOST"


def body_for(key: int, size: int) -> bytes:
    seed = hashlib.blake2b(key.to_bytes(8, "big"), digest_size=32).digest()
    return (seed * (size // 32 + 1))[:size]


@attrs.frozen
class LoadResult:
    producers: int
    sent: int
    seconds: float
    statuses: dict[str, int]
    latency_ms: dict[str, float]      # avg, p50, p99, max
    acked_keys: tuple[int, ...]       # keys answered PUT_OK

    @property
    def throughput(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict:
        return {"producers": self.producers, "sent": self.sent, "seconds": round(self.seconds, 3),
                "messages_per_second": round(self.throughput, 1), "latency_ms": self.latency_ms,
                "statuses": self.statuses}


def _producer(target, keys, size, timeout_s, out_lat, out_status, acked, stop) -> None:
    try:
        sock = socket.create_connection(target, timeout=timeout_s)
    except OSError:
        out_status[CONNECTION_LOST] += len(keys)
        return
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    decoder = FrameDecoder()
    with sock:
        for n, key in enumerate(keys):
            if stop.is_set():
                return
            start = time.perf_counter()
            try:
                sock.sendall(encode(Put(key, key, body_for(key, size))))
                response = None
                while response is None:
                    data = sock.recv(65536)
                    if not data:
                        raise OSError("closed by the broker")
                    for frame in decoder.feed(data):
                        if isinstance(frame, Response) and frame.req_id == key:
                            response = frame
            except (OSError, FrameError):
                out_status[CONNECTION_LOST] += len(keys) - n
                return
            out_lat.append((time.perf_counter() - start) * 1000)
            status = PutStatus(response.status).name
            out_status[status] += 1
            if status == "PUT_OK":
                acked.append(key)


def run_load(target: tuple[str, int], producers: int, count: int, size: int, first_key: int = 1,
             timeout_s: float = 30.0, stop: threading.Event | None = None) -> LoadResult:
    stop = stop or threading.Event()
    latencies: list[float] = []
    statuses: Counter = Counter()
    acked: list[int] = []
    threads = []
    for p in range(producers):
        keys = list(range(first_key + p, first_key + count, producers))
        t = threading.Thread(target=_producer, args=(target, keys, size, timeout_s, latencies, statuses,
                                                     acked, stop), daemon=True)
        threads.append(t)
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    lat = sorted(latencies)

    def pct(q: float) -> float:
        return round(lat[min(len(lat) - 1, int(q * len(lat)))], 3) if lat else 0.0

    summary = {"avg": round(statistics.fmean(lat), 3) if lat else 0.0, "p50": pct(0.50), "p99": pct(0.99),
               "max": round(lat[-1], 3) if lat else 0.0}
    return LoadResult(producers, len(latencies), seconds, dict(sorted(statuses.items())), summary,
                      tuple(sorted(acked)))
