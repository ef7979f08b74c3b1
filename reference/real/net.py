"""A framed TCP connection: a reader that yields frames, a writer thread fed
by a bounded queue, and close-once semantics.  A malformed frame closes
this connection and nothing else."""

from __future__ import annotations

import queue
import socket
import threading

from reference.frames import FrameDecoder, FrameError, encode

RECV_BYTES = 256 * 1024
OUTBOX_FRAMES = 10_000


class Connection:
    def __init__(self, sock: socket.socket, max_frame_bytes: int, name: str = "") -> None:
        self.sock = sock
        self.name = name
        self.decoder = FrameDecoder(max_frame_bytes)
        self._outbox: queue.Queue = queue.Queue(OUTBOX_FRAMES)
        self._closed = threading.Event()
        self.close_reason: str | None = None
        self._writer = threading.Thread(target=self._write_loop, name=f"writer-{name}", daemon=True)
        self._writer.start()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def send(self, frame) -> bool:
        """Queue a frame; False if the connection is closed or its outbox is full."""
        if self.closed:
            return False
        try:
            self._outbox.put_nowait(encode(frame))
            return True
        except queue.Full:
            self.close("outbox full: the peer does not read")
            return False

    def _write_loop(self) -> None:
        while not self.closed:
            try:
                data = self._outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            chunks = [data]
            while len(chunks) < 64:       # coalesce what is queued into one sendall
                try:
                    chunks.append(self._outbox.get_nowait())
                except queue.Empty:
                    break
            try:
                self.sock.sendall(b"".join(chunks))
            except OSError as err:
                self.close(f"send failed: {err}")

    def frames(self):
        """Frames as they arrive; ends when the peer closes or sends garbage."""
        while not self.closed:
            try:
                data = self.sock.recv(RECV_BYTES)
            except OSError as err:
                self.close(f"receive failed: {err}")
                return
            if not data:
                self.close("closed by peer")
                return
            try:
                frames = self.decoder.feed(data)
            except FrameError as err:
                self.close(f"malformed frame: {err}")
                return
            yield from frames

    def close(self, reason: str = "closed") -> None:
        if self._closed.is_set():
            return
        self.close_reason = reason
        self._closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    return sock
