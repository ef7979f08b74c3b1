"""The real slave: ReplicaCore driven by files and a TCP connection to the
master's HA port; reconnects (with a handshake) whenever the link drops."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from reference import effects as fx
from reference.frames import Ack, Data, Handshake
from reference.real.disk import SegmentStore
from reference.real.net import Connection
from reference.replica import ReplicaCore

RECONNECT_S = 0.2
FSYNC_EVERY_S = 1.0   # the slave's own durability; its acks are page-cache acks (as in RocketMQ)


class ReplicaServer:
    def __init__(self, directory: Path, name: str, master: tuple[str, int], segment_size: int,
                 max_frame_bytes: int = 1 << 20, log=print) -> None:
        self.name, self.master, self.log = name, master, log
        self.store = SegmentStore(Path(directory) / "commitlog", segment_size)
        report, data = self.store.recover()
        self.recovery = report
        self.core = ReplicaCore.recovered(name, segment_size, report, data)
        self.max_frame_bytes = max_frame_bytes
        self._stop = threading.Event()
        self.conn: Connection | None = None

    def _effects(self) -> None:
        for e in self.core.take_effects():
            if isinstance(e, fx.WriteData):
                self.store.write(e.start, e.position, e.data)
            elif isinstance(e, fx.CreateSegment):
                self.store.create(e.start)
            elif isinstance(e, fx.ZeroTail):
                self.store.zero_tail(e.start, e.position)
            elif isinstance(e, fx.SendHandshake):
                self.conn.send(Handshake(e.offset, e.chain, self.name, e.records))
            elif isinstance(e, fx.SendAck):
                self.conn.send(Ack(e.offset, e.records))
            elif isinstance(e, fx.CloseMaster):
                self.log(f"dropping the master connection: {e.reason}")
                self.conn.close(e.reason)
            else:
                raise AssertionError(f"unexpected effect {e!r}")

    def run(self) -> None:
        last_fsync = time.monotonic()
        while not self._stop.is_set():
            try:
                sock = socket.create_connection(self.master, timeout=2)
                sock.settimeout(None)
            except OSError:
                time.sleep(RECONNECT_S)
                continue
            self.conn = Connection(sock, self.max_frame_bytes, "master")
            self.core.connect()
            self._effects()
            for frame in self.conn.frames():
                if isinstance(frame, Data):
                    self.core.on_data(frame.offset, frame.data)
                    self._effects()
                if time.monotonic() - last_fsync > FSYNC_EVERY_S:
                    for start in self.store.segments():
                        self.store.fsync(start, start + 1)
                    last_fsync = time.monotonic()
            self.core.disconnected()
            self.log(f"master connection closed: {self.conn.close_reason}")
            time.sleep(RECONNECT_S)

    def stop(self) -> None:
        self._stop.set()
        if self.conn is not None:
            self.conn.close("stopping")
        self.store.close()


def serve_replica(args) -> int:
    """`ackorder broker replica`: run until killed."""
    host, _, port = args.master.rpartition(":")
    server = ReplicaServer(Path(args.dir), args.name, (host or "127.0.0.1", int(port)),
                           args.mapped_file_size_commit_log, log=lambda m: print(m, flush=True))
    print(f"slave {args.name}: recovered {len(server.recovery.records)} records, "
          f"log ends at {server.recovery.end_offset}", flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        server.stop()
    return 0
