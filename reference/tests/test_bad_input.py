"""Every bad input gets one clear line (issue 12): a table of bad command lines
(each must exit non-zero with no traceback; a bad value or a refusing
environment is one line on stderr and exit 2) and a table of bad frames on a
running master's two ports (each connection is closed with one log line that
says why, and the master keeps serving)."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from cli.tests import zygote
from reference.frames import Ack, Data, FrameDecoder, Handshake, Put, Response, encode
from reference.record import CHAIN_START
from reference.status import PutStatus
from reference.tests.realproc import start_master

SEG = 64 * 1024
SMALL = ["--mapped-file-size-commit-log", str(SEG), "--max-message-size", "4096"]


def ackorder(*argv: str, timeout_s: float = 20) -> subprocess.CompletedProcess:
    """A process per command line, forked from one that imported the project once (cli/tests/zygote.py)."""
    try:
        return zygote.run(list(argv), cwd=Path.cwd(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ackorder {' '.join(argv)} kept running: the bad input was accepted")


@pytest.fixture(scope="module")
def spots(tmp_path_factory):
    """A file where a directory should be, a directory holding a file named commitlog,
    a data directory whose first segment is a directory, a port in use, a record file path
    in a directory that does not exist, and a data directory whose recovery must fsync."""
    base = tmp_path_factory.mktemp("bad")
    (base / "a-file").write_text("not a directory")
    (base / "has-file").mkdir()
    (base / "has-file" / "commitlog").write_text("not a directory")
    (base / "seg-dir" / "commitlog" / f"{0:020d}").mkdir(parents=True)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    data = base / "with-data"
    master = start_master(data, *SMALL)
    with socket.create_connection(("127.0.0.1", master.port), timeout=10) as sock:
        sock.sendall(encode(Put(1, 1, b"x" * 100)))
        sock.recv(100)
    master.stop()
    short, open_secret = base / "short.secret", base / "open.secret"
    short.write_bytes(b"too short")
    short.chmod(0o600)
    open_secret.write_bytes(b"long enough to be a secret, but anyone may read it")
    open_secret.chmod(0o644)
    yield {"file": str(base / "a-file"), "has_file": str(base / "has-file"), "seg_dir": str(base / "seg-dir"),
           "busy": str(busy.getsockname()[1]), "nowhere": str(base / "no" / "such" / "dir" / "rec.jsonl"),
           "data": str(data), "ok": str(base / "ok"), "trace": str(base / "trace.ndjson"),
           "short_secret": str(short), "open_secret": str(open_secret)}
    busy.close()


M = ["broker", "master", "--dir", "{ok}", "--port", "0", "--ha-port", "0"]
R = ["broker", "replica", "--dir", "{ok}", "--master", "127.0.0.1:1", "--name", "r1"]
L = ["load", "--target", "127.0.0.1:1", "--count", "1"]

# (command line, the exit code of a refusal in exactly one line on stderr: 2 the input's, 3 the machine's
#  (cli/errors.py os_error_exit); None: argparse's usage and error lines, exit 2)
BAD_COMMAND_LINES = [
    (["broker", "master", "--dir", "{ok}", "--port", "70000"], 2),
    (["broker", "master", "--dir", "{ok}", "--port", "-1"], 2),
    (["broker", "master", "--dir", "{ok}", "--port", "abc"], None),             # argparse: usage + error
    (["broker", "master", "--dir", "{ok}", "--port", "0", "--ha-port", "99999"], 2),
    (["broker", "master", "--dir", "{ok}", "--port", "{busy}", "--ha-port", "0"], 3),   # port in use
    (["broker", "master", "--dir", "{ok}", "--port", "7071", "--ha-port", "7071"], 2),
    ([*M, "--host", "bad host"], 2),
    ([*M, "--host", "192.0.2.1"], 2),                                         # not this machine's address
    (["broker", "master", "--dir", "{file}", "--port", "0", "--ha-port", "0"], 2),
    (["broker", "master", "--dir", "{has_file}", "--port", "0", "--ha-port", "0"], 2),
    (["broker", "master", "--dir", "{seg_dir}", "--port", "0", "--ha-port", "0"], 2),
    ([*M, "--mapped-file-size-commit-log", "0"], 2),
    ([*M, "--mapped-file-size-commit-log", "-5"], 2),
    ([*M, "--max-message-size", "0"], 2),
    ([*M, "--max-message-size", "99999999"], 2),
    ([*M, "--sync-flush-timeout-ms", "-1"], 2),
    ([*M, "--slave-timeout-ms", "0"], 2),
    ([*M, "--flush-disk-type", "SOMETIMES"], 2),
    ([*M, "--broker-role", "SYNC_MASTER"], 2),                                 # no --replicas
    ([*M, "--replicas", "r1,r1"], 2),
    ([*M, "--replicas", "bad name!"], 2),
    ([*M, "--transient-store-pool-enable", "maybe"], None),
    ([*M, "--bug", "BugThatDoesNotExist"], None),
    ([*M, "--broker-role", "SYNC_MASTER", "--replicas", "r1", "--ack-policy", "AT_LEAST_K",
      "--in-sync-replicas", "3"], 2),
    ([*M, "--max-connections", "0"], 2),
    ([*M, "--max-connections", "70000"], 2),                                  # more than any server holds
    ([*M, "--frame-deadline-ms", "0"], 2),
    ([*M, "--partial-frame-budget-bytes", "100"], 2),                         # less than one frame
    ([*M, "--ha-max-parked-events", "0"], 2),
    ([*M, "--ha-max-ungreeted-connections", "-1"], 2),
    ([*M, "--host", "0.0.0.0"], 2),                                           # reachable: needs a secret
    ([*M, "--peer-secret-file", "{nowhere}"], 2),
    ([*M, "--peer-secret-file", "{has_file}"], 2),                            # a directory
    ([*R, "--peer-secret-file", "{short_secret}"], 2),
    ([*R, "--peer-secret-file", "{open_secret}"], 2),                         # readable by others
    ([*M, "--idle-timeout-ms", "-5"], 2),
    ([*M, "--inject-fsync-eio-after", "-1"], 2),
    ([*M, "--flush-commit-log-least-pages", "-1"], 2),
    (["broker", "master", "--dir", "{data}", "--port", "0", "--ha-port", "0", "--inject-fsync-eio-after", "0",
      *SMALL], 3),                                                           # fsync fails during recovery
    ([*M, "--trace", "{nowhere}"], 2),                                        # its directory does not exist
    ([*M, "--trace", "{has_file}"], 2),                                       # a directory
    ([*M, "--broker-role", "SYNC_MASTER", "--replicas", "r-1", "--trace", "{trace}"], 2),   # no TLA+ name
    (["broker", "master", "--dir", "{data}", "--port", "0", "--ha-port", "0", "--trace", "{trace}", *SMALL],
     2),                                                                        # a trace starts at an empty store
    (["broker", "replica", "--dir", "{ok}", "--master", "127.0.0.1:1", "--name", "r.1", "--trace", "{trace}"], 2),
    ([*R, "--mapped-file-size-commit-log", "0"], 2),
    (["broker", "replica", "--dir", "{ok}", "--master", "nohostport", "--name", "r1"], 2),
    (["broker", "replica", "--dir", "{ok}", "--master", "127.0.0.1:0", "--name", "r1"], 2),
    (["broker", "replica", "--dir", "{ok}", "--master", "127.0.0.1:1", "--name", ""], 2),
    (["broker", "replica", "--dir", "{file}", "--master", "127.0.0.1:1", "--name", "r1"], 2),
    ([*R, "--heartbeat-interval-ms", "0"], 2),
    (["load", "--target", "bad", "--count", "1"], 2),
    ([*L, "--producers", "0"], 2),
    ([*L, "--count", "-1"], 2),
    ([*L, "--timeout-s", "0"], 2),
    ([*L, "--record", "{nowhere}"], 2),
    (L, 3),                                                                      # no broker there: nothing sent
]


@pytest.mark.parametrize("argv, code", BAD_COMMAND_LINES, ids=[" ".join(a[:1] + a[3:] if a[0] == "broker"
                                                                               else a)[:60]
                                                                      for a, _ in BAD_COMMAND_LINES])
def test_a_bad_command_line_is_refused_without_a_traceback(spots, argv, code):
    result = ackorder(*[a.format(**spots) for a in argv])
    assert result.returncode == (code or 2), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and ("environment" if code == 3 else "error") in lines[-1], result.stderr
    if code is not None:
        assert len(lines) == 1, result.stderr


def test_the_table_is_big_enough():
    assert len(BAD_COMMAND_LINES) + len(BAD_FRAMES) >= 30


# --- bad frames -------------------------------------------------------------------------------


def frame(kind: int, payload: bytes) -> bytes:
    body = bytes([kind]) + payload
    return struct.pack(">I", len(body) + 4) + body + struct.pack(">I", zlib.crc32(body))


def good_handshake(name="r1", offset=0, chain=CHAIN_START, records=0) -> bytes:
    return encode(Handshake(offset, chain, name, records))


# (port, bytes to send, what the master's log line must say)
BAD_FRAMES = [
    ("port", struct.pack(">IB", 0, 1), "frame length 0"),
    ("port", frame(99, b""), "unknown frame type 99"),
    ("port", encode(Put(1, 1, b"abc"))[:-1] + b"\0", "checksum mismatch"),
    ("port", struct.pack(">IB", 1 << 30, 1), "exceeds the limit"),
    ("port", frame(1, b"short"), "PUT frame has 5 payload bytes"),
    ("port", encode(Response(1, 0, 0)), "a producer sent a Response frame"),
    ("port", good_handshake(), "a producer sent a Handshake frame"),
    ("port", frame(2, b"x" * 18), "RESPONSE frame has 18 payload bytes"),
    ("ha_port", encode(Data(0, b"log bytes")), "a slave sent a Data frame"),
    ("ha_port", encode(Ack(0, 0)), "an ACK on a connection with no accepted HANDSHAKE"),
    ("ha_port", frame(3, bytes(32) + b"\xff\xfe"), "name is not UTF-8"),
    ("ha_port", good_handshake(name="stranger"), "unknown slave 'stranger'"),
    ("ha_port", good_handshake(offset=1 << 40), "beyond the master's log"),
    ("ha_port", good_handshake(chain=b"\x01" * 16), "differs from the master's"),
    ("ha_port", good_handshake() + good_handshake(), "a second HANDSHAKE"),
    ("ha_port", good_handshake() + encode(Ack(1 << 40, 1)), "beyond what the master could have shipped"),
    ("ha_port", frame(5, bytes(17)), "ACK frame has 17 payload bytes"),
    ("ha_port", frame(3, bytes(20)), "HANDSHAKE frame has 20 payload bytes"),
    ("ha_port", b"\x00\x00\x00\x09GARBAGE!!", "checksum mismatch"),
]


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    proc = start_master(tmp_path_factory.mktemp("frames") / "m", "--replicas", "r1", *SMALL)
    yield proc
    proc.stop()


def put_ok(port: int, key: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode(Put(key, key, b"still serving")))
        decoder = FrameDecoder()
        while True:
            data = sock.recv(4096)
            assert data, "the master closed a good producer's connection"
            if frames := decoder.feed(data):
                return PutStatus(frames[0].status) is PutStatus.PUT_OK


def closed_by_master(sock: socket.socket, timeout_s: float = 5) -> bool:
    sock.settimeout(timeout_s)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.mark.parametrize("port, data, logged", BAD_FRAMES, ids=[x[2][:40] for x in BAD_FRAMES])
def test_a_bad_frame_closes_that_connection_with_a_log_line(master, port, data, logged):
    with socket.create_connection(("127.0.0.1", getattr(master, port)), timeout=10) as sock:
        sock.sendall(data)
        assert closed_by_master(sock), f"the connection stayed open after {data[:40]!r}"
    deadline = time.monotonic() + 5
    while logged not in master.output() and time.monotonic() < deadline:
        time.sleep(0.02)
    lines = [line for line in master.output().splitlines() if logged in line]
    assert lines and "closed:" in lines[-1], master.output()[-2000:]
    assert put_ok(master.port, 7)
    assert "Traceback" not in master.output()


def test_idle_connections_and_the_connection_limit(tmp_path):
    # 2 s idle: long enough that the three held connections are not closed as idle before the
    # fourth is refused on a loaded machine (with 300 ms they were, once, and the limit never bit)
    proc = start_master(tmp_path / "m", "--idle-timeout-ms", "2000", "--max-connections", "3", *SMALL)
    try:
        idle = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
        assert closed_by_master(idle, 15)
        held = [socket.create_connection(("127.0.0.1", proc.port), timeout=10) for _ in range(3)]
        extra = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
        assert closed_by_master(extra, 5)
        deadline = time.monotonic() + 5        # the log line may still be on its way through the pipe
        while "the connection limit (3) is reached" not in proc.output() and time.monotonic() < deadline:
            time.sleep(0.02)
        out = proc.output()
        assert "idle for" in out and "the connection limit (3) is reached" in out
        for s in held:
            s.close()
        time.sleep(0.5)
        assert put_ok(proc.port, 1)
    finally:
        proc.stop()


def test_a_message_too_big_or_empty_is_answered_not_dropped(master):
    with socket.create_connection(("127.0.0.1", master.port), timeout=10) as sock:
        sock.sendall(encode(Put(5, 5, b"")))
        decoder = FrameDecoder()
        frames = []
        while not frames:
            frames = decoder.feed(sock.recv(4096))
        assert PutStatus(frames[0].status) is PutStatus.MESSAGE_ILLEGAL
    assert put_ok(master.port, 8)


def test_no_traceback_in_the_whole_log(master):
    assert "Traceback" not in master.output()
