"""A TCP proxy on 127.0.0.1 that delays every chunk by a fixed time in each
direction, keeping order: the benchmark's stand-in for the network between
a master and a slave (seed 000 measured with a slave a few ms away)."""

from __future__ import annotations

import queue
import socket
import threading
import time

CHUNK_BYTES = 65536
MAX_IN_FLIGHT_CHUNKS = 10_000      # per direction; the bound keeps a stalled reader from growing memory


class DelayProxy:
    def __init__(self, target: tuple[str, int], delay_ms: float) -> None:
        assert delay_ms >= 0, delay_ms
        self.target = target
        self.delay_s = delay_ms / 1000
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="delay-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                return
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sockets.append(s)
            self._pump(client, upstream)
            self._pump(upstream, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        chunks: queue.Queue = queue.Queue(MAX_IN_FLIGHT_CHUNKS)

        def read() -> None:
            while True:
                try:
                    data = source.recv(CHUNK_BYTES)
                except OSError:
                    data = b""
                chunks.put((time.monotonic() + self.delay_s, data))
                if not data:
                    return

        def write() -> None:
            while True:
                due, data = chunks.get()
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                try:
                    if not data:
                        sink.shutdown(socket.SHUT_WR)
                        return
                    sink.sendall(data)
                except OSError:
                    return

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        for s in [self.listener, *self._sockets]:
            try:
                s.close()
            except OSError:
                pass
