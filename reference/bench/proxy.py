"""A TCP proxy on 127.0.0.1 that delays every chunk by a fixed time in each
direction, keeping order: the benchmark's stand-in for the network between
a master and a slave (seed 000 measured with a slave a few ms away).

It runs as its own process (``python -m reference.bench.proxy``) with one
thread and one selector, so it neither shares a GIL with the load generator
nor adds thread-switch delays to the round trip it is meant to fix."""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections import deque

CHUNK_BYTES = 1 << 20
MAX_IN_FLIGHT_BYTES = 64 << 20      # per direction; a stalled reader stops the other side reading


class _Pipe:
    """One direction: chunks read from ``source``, written to ``sink`` ``delay_s`` later."""

    def __init__(self, source: socket.socket, sink: socket.socket) -> None:
        self.source, self.sink = source, sink
        self.due: deque[tuple[float, bytes]] = deque()
        self.buffered = 0
        self.out = bytearray()
        self.eof = False


def serve(listener: socket.socket, target: tuple[str, int], delay_s: float) -> None:
    sel = selectors.DefaultSelector()
    listener.setblocking(False)
    sel.register(listener, selectors.EVENT_READ, None)
    timers: list = []
    seq = itertools.count()
    pipes: dict[socket.socket, _Pipe] = {}

    def close_pair(pipe: _Pipe) -> None:
        for s in (pipe.source, pipe.sink):
            if s in pipes:
                try:
                    sel.unregister(s)
                except (KeyError, ValueError):
                    pass
                del pipes[s]
            s.close()

    def flush(pipe: _Pipe) -> None:
        now = time.monotonic()
        while pipe.due and pipe.due[0][0] <= now:
            _, chunk = pipe.due.popleft()
            if not chunk:
                pipe.eof = True
                break
            pipe.out += chunk
            pipe.buffered -= len(chunk)
        if pipe.out:
            try:
                n = pipe.sink.send(pipe.out)
                del pipe.out[:n]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                close_pair(pipe)
                return
        if pipe.eof and not pipe.out:
            try:
                pipe.sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        if pipe.out:
            heapq.heappush(timers, (now + 0.0005, next(seq), pipe))

    while True:
        timeout = max(0.0, timers[0][0] - time.monotonic()) if timers else 1.0
        if 0 < timeout < 0.001:
            # epoll waits in whole milliseconds (rounded up): sleep the rest precisely instead,
            # so every chunk is delayed by the delay asked for, not by up to 1 ms more
            time.sleep(timeout)
            timeout = 0.0
        elif timeout >= 0.001:
            timeout -= 0.001          # wake up just before it, then sleep precisely next turn
        for key, _ in sel.select(timeout):
            if key.data is None:
                try:
                    client, _ = listener.accept()
                    upstream = socket.create_connection(target, timeout=10)
                except OSError:
                    continue
                for s in (client, upstream):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    s.setblocking(False)
                up, down = _Pipe(client, upstream), _Pipe(upstream, client)
                pipes[client], pipes[upstream] = up, down
                sel.register(client, selectors.EVENT_READ, up)
                sel.register(upstream, selectors.EVENT_READ, down)
                continue
            pipe: _Pipe = key.data
            if pipe.buffered > MAX_IN_FLIGHT_BYTES:
                continue
            try:
                chunk = pipe.source.recv(CHUNK_BYTES)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
            due = time.monotonic() + delay_s
            pipe.due.append((due, chunk))
            pipe.buffered += len(chunk)
            heapq.heappush(timers, (due, next(seq), pipe))
            if not chunk:
                sel.unregister(pipe.source)
        now = time.monotonic()
        while timers and timers[0][0] <= now:
            _, _, pipe = heapq.heappop(timers)
            if pipe.source in pipes or pipe.out or pipe.due:
                flush(pipe)


class DelayProxy:
    """The proxy in a child process; ``port`` is where to connect."""

    def __init__(self, target: tuple[str, int], delay_ms: float) -> None:
        assert delay_ms >= 0, delay_ms
        self.popen = subprocess.Popen([sys.executable, "-m", "reference.bench.proxy", "--target",
                                       f"{target[0]}:{target[1]}", "--delay-ms", str(delay_ms)],
                                      stdout=subprocess.PIPE, text=True)
        line = self.popen.stdout.readline()
        if not line.startswith("port "):
            self.popen.kill()
            raise RuntimeError(f"the delay proxy did not start: {line!r}")
        self.port = int(line.split()[1])

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            self.popen.wait(timeout=10)
        self.popen.stdout.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--target", required=True)
    p.add_argument("--delay-ms", type=float, required=True)
    args = p.parse_args()
    host, _, port = args.target.rpartition(":")
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"port {listener.getsockname()[1]}", flush=True)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    serve(listener, (host, int(port)), args.delay_ms / 1000)


if __name__ == "__main__":
    main()
