"""Regressions for the two races of the threaded runtime (issue 12), on a real
master process over TCP:

* many simultaneous HANDSHAKEs under one slave name (valid and refused ones
  mixed): exactly one is accepted, the refusals never stick, and a real slave
  connects afterwards and SYNC_MASTER puts are PUT_OK;
* two slaves reconnecting at random moments while producers load the master:
  every DATA frame a slave receives starts exactly where its log ends (the
  slave core drops the link otherwise, which is what the old shape did).

The slaves here are ReplicaCore instances on plain sockets, so the test sees
every frame and every reason a link was dropped."""

from __future__ import annotations

import random
import socket
import threading
import time

from reference import effects as fx
from reference.frames import Ack, Data, FrameDecoder, FrameError, Handshake, Refuse, encode
from reference.real.load import run_load
from reference.record import CHAIN_START
from reference.replica import ReplicaCore
from reference.tests.realproc import start_master, start_replica, wait_for_line

SEG = 64 * 1024
SMALL = ["--mapped-file-size-commit-log", str(SEG), "--max-message-size", "4096"]


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _outcome(sock: socket.socket, wait_s: float) -> str:
    """'refused' (REFUSE frame or closed) or 'open' (still open after ``wait_s``)."""
    sock.settimeout(wait_s)
    decoder = FrameDecoder(1 << 24)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return "refused"
            for frame in decoder.feed(data):
                if isinstance(frame, Refuse):
                    return "refused"
    except socket.timeout:
        return "open"
    except OSError:
        return "refused"


def test_many_simultaneous_handshakes_under_one_name(tmp_path):
    master = start_master(tmp_path / "m", "--broker-role", "SYNC_MASTER", "--replicas", "r1",
                          "--slave-timeout-ms", "2000", *SMALL)
    try:
        bad_chain = bytes(16 * [0xAB])
        for round_no in range(3):
            socks = [_connect(master.ha_port) for _ in range(48)]
            frames = [encode(Handshake(0, CHAIN_START if k % 2 == 0 else bad_chain, "r1", 0)) for k in range(48)]
            barrier = threading.Barrier(len(socks))

            def fire(sock, frame):
                barrier.wait()
                sock.sendall(frame)

            threads = [threading.Thread(target=fire, args=pair) for pair in zip(socks, frames)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            outcomes = [_outcome(s, 1.0) for s in socks]
            assert outcomes.count("open") == 1, (round_no, outcomes)
            assert outcomes.index("open") % 2 == 0, "a handshake with a foreign chain was accepted"
            for s in socks:
                s.close()
            time.sleep(0.2)
        # Nothing stuck: a real slave connects and SYNC_MASTER acknowledges again.
        for _ in range(3):                       # the storms' accepted connections
            wait_for_line(master, r"slave r1 connected")
        replica = start_replica(tmp_path / "r1", master, "r1", "--mapped-file-size-commit-log", str(SEG))
        try:
            wait_for_line(master, r"slave r1 connected")
            result = run_load(("127.0.0.1", master.port), producers=4, count=200, size=100)
            assert result.statuses == {"PUT_OK": 200}
        finally:
            replica.stop()
    finally:
        master.stop()


class ChurningSlave:
    """A slave (ReplicaCore) on a plain socket that drops its link at random moments
    and reconnects, recording every reason its core dropped the link."""

    def __init__(self, name: str, port: int, seed: int) -> None:
        self.name, self.port = name, port
        self.core = ReplicaCore(name, SEG)
        self.rng = random.Random(seed)
        self.drops: list[str] = []
        self.frames = 0
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _perform(self, sock: socket.socket) -> bool:
        for e in self.core.take_effects():
            if isinstance(e, fx.SendHandshake):
                sock.sendall(encode(Handshake(e.offset, e.chain, self.name, e.records)))
            elif isinstance(e, fx.SendAck):
                sock.sendall(encode(Ack(e.offset, e.records)))
            elif isinstance(e, fx.CloseMaster):
                self.drops.append(e.reason)
                return False
        return True

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                sock = _connect(self.port)
            except OSError:
                time.sleep(0.05)
                continue
            self.connections += 1
            self.core.connect()
            deadline = time.monotonic() + self.rng.uniform(0.02, 0.4)
            decoder = FrameDecoder(1 << 24)
            try:
                ok = self._perform(sock)
                sock.settimeout(0.02)
                while ok and time.monotonic() < deadline and not self.stop.is_set():
                    try:
                        data = sock.recv(1 << 20)
                    except socket.timeout:
                        continue
                    if not data:
                        break
                    for frame in decoder.feed(data):
                        if isinstance(frame, Data):
                            self.frames += 1
                            self.core.on_data(frame.offset, frame.data)
                            ok = self._perform(sock)
                            if not ok:
                                break
            except (OSError, FrameError):
                pass
            finally:
                sock.close()
                self.core.disconnected()
                self.core.take_effects()


def test_two_slaves_under_churn_get_data_in_order(tmp_path):
    master = start_master(tmp_path / "m", "--broker-role", "SYNC_MASTER", "--replicas", "r1,r2",
                          "--slave-timeout-ms", "500", "--ha-transfer-batch-size", "1024", *SMALL)
    slaves = [ChurningSlave(f"r{k}", master.ha_port, seed=k) for k in (1, 2)]
    try:
        for s in slaves:
            s.thread.start()
        stop = threading.Event()
        box = {}
        loader = threading.Thread(target=lambda: box.setdefault("r", run_load(
            ("127.0.0.1", master.port), producers=16, count=10**7, size=300, stop=stop)))
        loader.start()
        deadline = time.monotonic() + 30
        while sum(s.connections for s in slaves) < 40 and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        loader.join(30)
        result = box["r"]
        for s in slaves:
            s.stop.set()
            s.thread.join(10)
        assert sum(s.connections for s in slaves) >= 40, "not much churn"
        assert all(s.frames > 50 for s in slaves), [s.frames for s in slaves]
        out_of_order = [d for s in slaves for d in s.drops if "DATA frame at offset" in d]
        assert not out_of_order, out_of_order[:3]
        assert not [d for s in slaves for d in s.drops], [d for s in slaves for d in s.drops][:3]
        assert result.statuses.get("PUT_OK", 0) > 0
    finally:
        master.stop()
