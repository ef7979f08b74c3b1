"""A load client that follows the master through failovers.

Each producer sends synchronously (one request in flight, RocketMQ's sync
send).  On a connection error, a timeout or any answer but PUT_OK it asks
the controller (GetReplicaInfo) where the master is now and resends the SAME
key: at-least-once, so a key may be stored twice (duplicates are allowed),
never lost once acknowledged.  Every PUT_OK is recorded as
reference/real/load.py records it (key, next_offset, size), with when it came
and which broker answered (the failover time is measured from it).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections import Counter

import attrs

from reference.failover.effects import NO_MASTER
from reference.frames import FrameDecoder, FrameError, Put, Read, ReadReply, Response, encode
from reference.real.controller_client import ControllerClient, ControllerClientError
from reference.real.load import Acked, body_for
from reference.real.netroute import route
from reference.record import BLANK, END_FILE_MIN_BLANK_LENGTH, HEADER_SIZE, read_head
from reference.status import PutStatus

REQUEST_TIMEOUT_S = 10.0       # longer than the store's flush and slave timeouts: the master answers first
CONNECT_TIMEOUT_S = 1.0
RETRY_PAUSE_S = 0.05
MAX_TRIES_PER_KEY = 100_000    # bound: a key is retried this often at most (about 80 minutes of pauses)


@attrs.frozen
class AckedAt:
    acked: Acked
    at_s: float                # time.monotonic() when the PUT_OK came
    broker_id: int             # who answered it
    latency_ms: float = 0.0    # from the key's first send to its PUT_OK (the retries included)


def controller_list(controller) -> tuple[tuple[str, int], ...]:
    """One (host, port), or several controllers of one service."""
    return (controller,) if isinstance(controller[0], str) else tuple(controller)


async def _master_of(controller, group: str, secret: bytes | None = None) -> tuple[int, tuple[str, int]] | None:
    """GetReplicaInfo from the first controller that answers it (several: any serves it)."""
    reply: dict = {}
    for i, at in enumerate(controller_list(controller)):
        try:
            client = await ControllerClient.connect(*at, secret=secret)
            try:
                reply = await asyncio.wait_for(client.get_replica_info(group), 5.0)
            finally:
                await client.close()
        except (OSError, ControllerClientError, asyncio.TimeoutError):
            if i == len(controller_list(controller)) - 1:
                raise
            continue
        if reply.get("info"):
            break
    info = reply.get("info")
    if not info or info["master_id"] == NO_MASTER:
        return None
    address = info.get("addresses", {}).get(str(info["master_id"]))
    if address is None:
        return None
    host, port, _ha_port = address.rsplit(":", 2)
    return info["master_id"], route((host, int(port)))       # a chaos run's link to it, if it has one


class MasterFinder:
    """Where the master is, as last looked up; asked again (GetReplicaInfo) when a caller saw
    that answer fail.  Shared by threads."""

    def __init__(self, controller: tuple[str, int], group: str, secret: bytes | None = None) -> None:
        self.controller, self.group, self.secret = controller, group, secret
        self._lock = threading.Lock()
        self._master: tuple[int, tuple[str, int]] | None = None
        self._version = 0

    def where(self, seen_version: int) -> tuple[int, tuple[int, tuple[str, int]] | None]:
        with self._lock:
            if self._master is not None and self._version != seen_version:
                return self._version, self._master
        try:
            found = asyncio.run(_master_of(self.controller, self.group, self.secret))
        except (OSError, ControllerClientError, asyncio.TimeoutError):
            found = None
        with self._lock:
            self._master, self._version = found, self._version + 1
            return self._version, found


class FailoverLoad:
    """``producers`` threads sending keys first_key, first_key + 1, ... until ``stop()``."""

    def __init__(self, controller: tuple[str, int], group: str, producers: int, size: int,
                 first_key: int = 1, secret: bytes | None = None) -> None:
        assert producers >= 1 and size >= 1 and first_key >= 1
        self.controller, self.group, self.size = controller, group, size
        self.producers = producers
        self._next_key = first_key
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.acked: list[AckedAt] = []
        self.statuses: Counter = Counter()
        self.resends = 0
        self.finder = MasterFinder(controller, group, secret)
        self._threads = [threading.Thread(target=self._producer, name=f"producer-{p}", daemon=True)
                         for p in range(producers)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(REQUEST_TIMEOUT_S + 5)

    def acked_since(self, index: int) -> list[AckedAt]:
        with self._lock:
            return self.acked[index:]

    # ------------------------------------------------------------------ one producer

    def _key(self) -> int:
        with self._lock:
            key, self._next_key = self._next_key, self._next_key + 1
            return key

    def _where(self, seen_version: int) -> tuple[int, tuple[int, tuple[str, int]] | None]:
        return self.finder.where(seen_version)

    def _producer(self) -> None:
        sock: socket.socket | None = None
        decoder = FrameDecoder()
        version, master = self._where(-1)
        key, key_at = self._key(), time.monotonic()
        tries = 0
        while not self._stop.is_set():
            assert tries < MAX_TRIES_PER_KEY, f"key {key}: {tries} tries"
            tries += 1
            status = None
            try:
                if master is None:
                    raise ConnectionError("no master known")
                if sock is None:
                    sock = socket.create_connection(master[1], timeout=CONNECT_TIMEOUT_S)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock.settimeout(REQUEST_TIMEOUT_S)
                    decoder = FrameDecoder()
                sock.sendall(encode(Put(key, key, body_for(key, self.size))))
                response = None
                while response is None:
                    data = sock.recv(65536)
                    if not data:
                        raise ConnectionError("closed by the broker")
                    response = next((f for f in decoder.feed(data) if isinstance(f, Response) and f.req_id == key),
                                    None)
                status = PutStatus(response.status).name
            except (OSError, ConnectionError, FrameError, ValueError):
                status = "CONNECTION_LOST"
            with self._lock:
                self.statuses[status] += 1
                if status == "PUT_OK":
                    now = time.monotonic()
                    self.acked.append(AckedAt(Acked(key, response.next_offset, self.size), now, master[0],
                                              round((now - key_at) * 1000, 2)))
            if status == "PUT_OK":
                key, key_at, tries = self._key(), time.monotonic(), 0
                continue
            with self._lock:
                self.resends += 1
            if sock is not None:
                sock.close()
                sock = None
            self._stop.wait(RETRY_PAUSE_S)
            version, master = self._where(version)
        if sock is not None:
            sock.close()


READ_BYTES = 64 * 1024


class FailoverConsumer:
    """One consumer pulling the log from offset 0 through failovers (READ on the master's
    producer port, which answers only bytes below confirmOffset).  Every whole record it
    reads is kept (key, its end offset, size): a record a consumer saw must survive every
    later failover.  A reply with bytes at or above its confirmOffset, or a record that is
    not a message some producer sent, is counted."""

    def __init__(self, controller: tuple[str, int], group: str, size: int, segment_bytes: int,
                 secret: bytes | None = None) -> None:
        self.finder = MasterFinder(controller, group, secret)
        self.size, self.segment_bytes = size, segment_bytes
        self.offset = 0
        self.consumed: list[Acked] = []
        self.above_confirm = 0
        self.bad_records: list[int] = []     # offsets
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="consumer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(REQUEST_TIMEOUT_S + 5)

    def consumed_by_key(self) -> dict[int, Acked]:
        with self._lock:
            return {a.key: a for a in self.consumed}

    def _take(self, base: int, data: bytes) -> int:
        """The whole records at the start of ``data`` (log offset ``base``); the next offset to read."""
        pos = 0
        while pos + END_FILE_MIN_BLANK_LENGTH <= len(data):
            at = base + pos
            segment_end = pos + self.segment_bytes - at % self.segment_bytes    # in data's coordinates
            head = read_head(data, pos, segment_end) if pos + END_FILE_MIN_BLANK_LENGTH <= segment_end else "no room"
            if head == BLANK:                   # the rest of the segment is padding
                return at - at % self.segment_bytes + self.segment_bytes
            if isinstance(head, str):           # unwritten space is not readable below confirmOffset either
                self.bad_records.append(base + pos)
                self._stop.set()
                return base + pos
            total = head
            if pos + total > len(data):
                break
            key = struct.unpack_from(">Q", data, pos + 12)[0]
            if data[pos + HEADER_SIZE: pos + total] != body_for(key, self.size) or total - HEADER_SIZE != self.size:
                if key < 10**15:                 # not a test's unreplicated-tail record either
                    self.bad_records.append(base + pos)
                    self._stop.set()
                    return base + pos
            with self._lock:
                self.consumed.append(Acked(key, base + pos + total, self.size))
            pos += total
        return base + pos

    def _run(self) -> None:
        version, master = self.finder.where(-1)
        sock, decoder, req = None, FrameDecoder(), 0
        while not self._stop.is_set():
            try:
                if master is None:
                    raise ConnectionError("no master known")
                if sock is None:
                    sock = socket.create_connection(master[1], timeout=CONNECT_TIMEOUT_S)
                    sock.settimeout(REQUEST_TIMEOUT_S)
                    decoder = FrameDecoder()
                req += 1
                sock.sendall(encode(Read(req, self.offset, READ_BYTES)))
                reply = None
                while reply is None:
                    data = sock.recv(65536 + 64)
                    if not data:
                        raise ConnectionError("closed by the broker")
                    reply = next((f for f in decoder.feed(data) if isinstance(f, ReadReply) and f.req_id == req),
                                 None)
            except (OSError, ConnectionError, FrameError):
                if sock is not None:
                    sock.close()
                    sock = None
                self._stop.wait(RETRY_PAUSE_S)
                version, master = self.finder.where(version)
                continue
            if reply.data and reply.offset + len(reply.data) > reply.confirm_offset:
                self.above_confirm += 1
            before = self.offset
            self.offset = self._take(reply.offset, reply.data)
            if self.offset == before:
                self._stop.wait(0.02)
        if sock is not None:
            sock.close()
