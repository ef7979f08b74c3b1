"""Issue 34: every bound on what the network feeds is a refusal or a close with one log line naming
the peer and the bound — never an assertion that stops the process.  Each test sends its overflow
over real TCP to a real process, then checks that the process still serves: a well-behaved
producer still gets PUT_OK (a controller client still gets its answer)."""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import time

import pytest

from reference.failover import wire
from reference.failover.wire import encode_request
from reference.frames import Ack, FrameDecoder, Handshake, Put, Read, encode
from reference.real import controller_client
from reference.real.controller_client import ControllerClient, ControllerClientError
from reference.record import CHAIN_START
from reference.status import PutStatus
from reference.tests.realproc import start_controller, start_master
from reference.tests.test_bad_input import SMALL, closed_by_master, put_ok

SEG = 64 * 1024


def logged(proc, pattern: str, timeout_s: float = 10) -> re.Match:
    """The first line of the process's output matching ``pattern`` (waits for the pipe)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if m := re.search(pattern, proc.output()):
            return m
        assert time.monotonic() < deadline, f"no {pattern!r} in: {proc.output()[-3000:]}"
        time.sleep(0.02)


def fill_segments(port: int, segments: int, body_bytes: int = 3000) -> None:
    """Enough PUT_OKs that the first segments are flushed and forgotten from memory."""
    count = segments * SEG // body_bytes + 1
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"".join(encode(Put(k, k, b"x" * body_bytes)) for k in range(1, count + 1)))
        decoder, answers = FrameDecoder(), []
        while len(answers) < count:
            data = sock.recv(65536)
            assert data, "the master closed a producer's connection"
            answers += decoder.feed(data)
    assert {PutStatus(a.status) for a in answers} == {PutStatus.PUT_OK}


def test_acks_parked_behind_a_segment_read_close_that_connection(tmp_path):
    """A HANDSHAKE under a configured, unconnected slave name at an offset whose segment is no longer
    in memory parks that connection's frames until the segment is read back; a flood of ACKs behind
    it used to stop the master (AssertionError: parked events unbounded)."""
    proc = start_master(tmp_path / "m", "--replicas", "r1,r2", "--flush-disk-type", "SYNC_FLUSH",
                        "--ha-max-parked-events", "64", *SMALL)
    try:
        fill_segments(proc.port, 4)
        with socket.create_connection(("127.0.0.1", proc.ha_port), timeout=10) as sock:
            sock.sendall(encode(Handshake(0, CHAIN_START, "r2", 0)) + encode(Ack(0, 0)) * 5000)
            assert closed_by_master(sock, 10)
        line = logged(proc, r"slave connection \d+ from 127\.0\.0\.1:\d+ closed: .*ha_max_parked_events").group(0)
        assert "64" in line, line
        assert put_ok(proc.port, 10_001)
        assert proc.popen.poll() is None and "Traceback" not in proc.output()
    finally:
        proc.stop()


def test_ungreeted_connections_past_the_bound_close_the_oldest(tmp_path):
    """HA connections that never send their HANDSHAKE: past the bound the oldest is closed (a slave
    greets at once, so the newest is the one most likely to be real); it used to stop the master
    (AssertionError: ungreeted connections unbounded)."""
    proc = start_master(tmp_path / "m", "--replicas", "r1", "--max-connections", "200",
                        "--ha-max-ungreeted-connections", "16", *SMALL)
    socks = []
    try:
        socks = [socket.create_connection(("127.0.0.1", proc.ha_port), timeout=10) for _ in range(40)]
        line = logged(proc, r"slave connection \d+ from 127\.0\.0\.1:\d+ closed: .*ha_max_ungreeted_connections")
        assert "16" in line.group(0)
        assert closed_by_master(socks[0], 10), "the oldest ungreeted connection stayed open"
        assert not closed_by_master(socks[-1], 0.3), "the newest ungreeted connection was closed"
        assert put_ok(proc.port, 1)
        assert proc.popen.poll() is None and "Traceback" not in proc.output()
    finally:
        for s in socks:
            s.close()
        proc.stop()


# --- slow and half-open peers ---------------------------------------------------------------------------


def trickle(socks: list[socket.socket], frame: bytes, rounds: int, pause_s: float, start: int = 0) -> None:
    """Each socket sends the next byte of ``frame`` every ``pause_s``: never idle, never finished."""
    for i in range(start, start + rounds):
        for s in socks:
            try:
                s.sendall(frame[i:i + 1])
            except OSError:             # the master closed this one: what the test is about
                pass
        time.sleep(pause_s)


def loris_is_evicted_then_closed(proc, frame: bytes, limit: int, deadline_ms: int, served, who: str = "") -> None:
    """``limit`` connections trickle ``frame`` a byte at a time: a new client still gets a slot
    (``served()`` is true; the oldest loris is evicted and logged), and past the frame deadline the
    rest are closed and logged; the process keeps serving throughout."""
    socks = [socket.create_connection(("127.0.0.1", proc.port), timeout=10) for _ in range(limit)]
    try:
        trickle(socks, frame, rounds=2, pause_s=0.7)
        assert served(), "a well-behaved client was locked out"
        logged(proc, who + r"connection \d+ from 127\.0\.0\.1:\d+ closed: \d+ bytes of a frame unfinished for "
                     rf"\d+ ms: a new connection takes its place at the connection limit \({limit}\)")
        rounds = deadline_ms // 700                                     # past the frame deadline
        trickle(socks, frame, rounds=rounds, pause_s=0.7, start=2)
        logged(proc, rf"closed: \d+ bytes of a frame unfinished for \d+ ms \(the frame deadline is {deadline_ms} ms\)")
        assert served()
        assert proc.popen.poll() is None and "Traceback" not in proc.output()
    finally:
        for s in socks:
            s.close()


def test_slow_loris_peers_do_not_lock_producers_out(tmp_path):
    """50 connections that each send one byte a second hold every slot of --max-connections 50 and are
    never idle; a producer used to be refused for as long as they kept it up.  Now a newcomer takes
    the place of the peer whose frame is unfinished the longest, and the frame deadline closes the rest."""
    proc = start_master(tmp_path / "m", "--max-connections", "50", "--idle-timeout-ms", "3000",
                        "--frame-deadline-ms", "4000", *SMALL)
    try:
        loris_is_evicted_then_closed(proc, encode(Put(1, 1, b"y" * 100)), limit=50, deadline_ms=4000,
                                     served=lambda: put_ok(proc.port, 1), who="producer ")
    finally:
        proc.stop()


def test_unfinished_frames_past_the_memory_budget_close_the_oldest(tmp_path):
    proc = start_master(tmp_path / "m", "--partial-frame-budget-bytes", "8192", *SMALL)
    socks = []
    try:
        frame = encode(Put(1, 1, b"z" * 4000))
        for _ in range(3):
            socks.append(socket.create_connection(("127.0.0.1", proc.port), timeout=10))
            socks[-1].sendall(frame[:3000])
            time.sleep(0.1)
        line = logged(proc, r"producer connection (\d+) from \S+ closed: 3000 bytes of a frame unfinished for \d+ ms: "
                            r"unfinished frames hold 9000 bytes, over the budget of 8192 \(oldest closed first\)")
        assert closed_by_master(socks[0], 5), "the oldest unfinished frame's connection stayed open"
        assert not closed_by_master(socks[2], 0.3)
        socks[2].sendall(frame[3000:])                     # the newest finishes its frame: answered
        socks[2].settimeout(10)
        assert FrameDecoder().feed(socks[2].recv(4096))[0].status == PutStatus.PUT_OK
        assert put_ok(proc.port, 2) and "Traceback" not in proc.output(), line
    finally:
        for s in socks:
            s.close()
        proc.stop()


def test_half_open_peers_are_logged_with_their_address_and_what_they_left(tmp_path):
    proc = start_master(tmp_path / "m", *SMALL)
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
            sock.sendall(encode(Put(1, 1, b"cut short"))[:-3])
            time.sleep(0.2)
        logged(proc, r"closed: closed by peer inside a frame \(\d+ bytes of an unfinished frame discarded\)")
        for _ in range(20):                       # reset at once, often before the master accepts
            sock = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        time.sleep(0.5)
        assert put_ok(proc.port, 1)
        out = proc.output()
        assert "from ? closed" not in out, out[-2000:]
        assert out.count("producer connection") >= 21
    finally:
        proc.stop()


# --- the controller and its clients -------------------------------------------------------------------


def _flood_registrations(port: int, count: int) -> list[str]:
    """``count`` registrations of new groups in one send: all of them reach the controller in the
    same read, before the sync of the first one's record can answer it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"".join(encode_request(i + 1, "register", f"group-{i}", broker_id=1) for i in range(count)))
        decoder, replies = FrameDecoder(wire.MAX_FRAME_BYTES, wire.decode), []
        while len(replies) < count:
            data = sock.recv(1 << 16)
            assert data, f"the controller closed the connection after {len(replies)} replies"
            replies += decoder.feed(data)
    return [r["code"] for r in replies]


async def _info_code(port: int) -> str:
    client = await ControllerClient.connect("127.0.0.1", port)
    try:
        return (await client.get_replica_info("group-0"))["code"]
    finally:
        await client.close()


def test_controller_requests_past_max_pending_are_answered_busy(tmp_path):
    """Metadata requests whose replies wait for their record's sync are bounded by --max-pending:
    past it the controller answers CONTROLLER_BUSY at once, and keeps serving."""
    proc = start_controller(tmp_path, "--max-pending", "8")
    try:
        codes = _flood_registrations(proc.port, 400)
        assert set(codes) <= {"SUCCESS", "CONTROLLER_BUSY"} and codes.count("CONTROLLER_BUSY") > 0, codes
        assert codes.count("SUCCESS") >= 8
        assert asyncio.run(_info_code(proc.port)) == "SUCCESS"
        assert proc.popen.poll() is None and "Traceback" not in proc.output()
    finally:
        proc.stop()


def test_controller_closes_a_slow_loris_at_its_frame_deadline(tmp_path):
    proc = start_controller(tmp_path, "--frame-deadline-ms", "1500", "--max-connections", "4")
    try:
        loris_is_evicted_then_closed(
            proc, encode_request(1, "info", "group-0"), limit=4, deadline_ms=1500,
            served=lambda: asyncio.run(_info_code(proc.port)) == "CONTROLLER_BROKER_METADATA_NOT_EXIST")
    finally:
        proc.stop()


def test_a_controller_that_never_answers_bounds_its_clients_calls(monkeypatch):
    """The client side of the same rule: calls waiting for a silent controller are refused past the
    bound (ControllerClientError), not grown without end or asserted."""
    monkeypatch.setattr(controller_client, "MAX_PENDING_CALLS", 16)

    async def scenario() -> str:
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        client = await ControllerClient.connect("127.0.0.1", port)
        waiting = [asyncio.ensure_future(client.heartbeat("g", 1)) for _ in range(16)]
        await asyncio.sleep(0)
        try:
            await client.heartbeat("g", 1)
        except ControllerClientError as err:
            return str(err)
        finally:
            await client.close()
            await asyncio.gather(*waiting, return_exceptions=True)
            silent.close()
        return "no refusal"

    assert "16 calls wait for the controller's answer" in asyncio.run(scenario())


# --- peers that send faster than they read ------------------------------------------------------------


def _answers(sock: socket.socket, count: int, decoder: FrameDecoder | None = None) -> list:
    decoder, got = decoder or FrameDecoder(), []
    while len(got) < count:
        data = sock.recv(1 << 16)
        assert data, f"closed after {len(got)} answers"
        got += decoder.feed(data)
    return got


def test_puts_past_the_send_queue_are_answered_busy(tmp_path):
    """BrokerConfig.sendThreadPoolQueueCapacity: a burst past the send queue is answered
    OS_PAGE_CACHE_BUSY at once (RejectedExecutionException), never queued without bound."""
    proc = start_master(tmp_path / "m", "--send-thread-pool-queue-capacity", "8", "--ack-mode", "BLOCKING",
                        "--send-message-thread-pool-nums", "1", "--flush-disk-type", "SYNC_FLUSH",
                        "--wait-time-in-send-queue-ms", "60000", *SMALL)
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
            sock.sendall(b"".join(encode(Put(k, k, b"burst")) for k in range(1, 301)))
            statuses = [PutStatus(a.status) for a in _answers(sock, 300)]
        assert set(statuses) == {PutStatus.PUT_OK, PutStatus.OS_PAGE_CACHE_BUSY}, set(statuses)
        assert statuses.count(PutStatus.OS_PAGE_CACHE_BUSY) >= 300 - 2 * 9 * 16, statuses.count(PutStatus.PUT_OK)
        assert put_ok(proc.port, 1_000) and proc.popen.poll() is None and "Traceback" not in proc.output()
    finally:
        proc.stop()


def test_puts_past_the_transient_store_pools_buffers_are_answered_busy_until_a_commit(tmp_path):
    """TransientStorePool (transientStorePoolSize): with the commits 300 ms apart, a burst fills both
    pool buffers and the rest of it is answered OS_PAGE_CACHE_BUSY at once (rejectRequest:
    isTransientStorePoolDeficient), never buffered without bound; once a commit returns a buffer
    the master takes puts again."""
    proc = start_master(tmp_path / "m", "--transient-store-pool-enable", "true", "--transient-store-pool-size", "2",
                        "--wake-commit-when-put-message", "false", "--commit-interval-commit-log-ms", "300",
                        "--commit-commit-log-thorough-interval-ms", "300", *SMALL)
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
            sock.sendall(b"".join(encode(Put(k, k, b"b" * 3000)) for k in range(1, 301)))
            statuses = [PutStatus(a.status) for a in _answers(sock, 300)]
        busy = statuses.count(PutStatus.OS_PAGE_CACHE_BUSY)
        assert set(statuses) == {PutStatus.PUT_OK, PutStatus.OS_PAGE_CACHE_BUSY} and busy >= 100, (busy, len(statuses))
        deadline = time.monotonic() + 10
        while not put_ok(proc.port, 1_000):            # the next commit (within 300 ms) frees a buffer
            assert time.monotonic() < deadline, "no buffer came back"
            time.sleep(0.05)
        assert proc.popen.poll() is None and "Traceback" not in proc.output()
    finally:
        proc.stop()


def test_a_consumer_that_does_not_read_its_replies_is_closed(tmp_path):
    """The producer port's output buffer (16 MiB a connection): a client that asks for log bytes and
    never reads them is closed with one line; the others are served."""
    proc = start_master(tmp_path / "m", *SMALL)
    try:
        fill_segments(proc.port, 16)                   # 1 MiB of acknowledged log to read
        with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                sock.sendall(b"".join(encode(Read(i, 0, 1 << 20)) for i in range(800)))   # 64 KiB each
            except OSError:
                pass                                   # closed while we were still sending
            logged(proc, r"producer connection \d+ from 127\.0\.0\.1:\d+ closed: the consumer does not read its replies")
        assert put_ok(proc.port, 10_001) and "Traceback" not in proc.output()
    finally:
        proc.stop()


def test_a_controller_client_that_does_not_read_its_replies_is_closed(tmp_path):
    proc = start_controller(tmp_path)
    try:
        with socket.create_connection(("127.0.0.1", proc.port), timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            request = encode_request(1, "info", "g" * 200)
            try:
                for _ in range(40):
                    sock.sendall(request * 1000)
            except OSError:
                pass
            logged(proc, r"connection \d+ from 127\.0\.0\.1:\d+ closed: the client does not read its replies", 60)
        assert asyncio.run(_info_code(proc.port)) == "CONTROLLER_BROKER_METADATA_NOT_EXIST"
        assert "Traceback" not in proc.output()
    finally:
        proc.stop()
