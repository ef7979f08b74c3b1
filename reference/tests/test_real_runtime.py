"""The real runtime: separate master and slave processes, real files and
fdatasync, TCP on 127.0.0.1.  Bad input and faults, and kill -9 under load."""

import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from cli.tests import zygote
from reference.frames import FrameDecoder, Put, Response, encode
from reference.real.load import body_for, run_load
from reference.record import recover_log
from reference.real.disk import SegmentStore
from reference.status import PutStatus
from reference.tests.realproc import start_master, start_replica, wait_for_line

SEG = 64 * 1024
SMALL = ["--mapped-file-size-commit-log", str(SEG), "--max-message-size", "4096"]


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.stop()


def put(port: int, key: int, body: bytes) -> Response:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode(Put(key, key, body)))
        decoder = FrameDecoder()
        while True:
            frames = decoder.feed(sock.recv(4096))
            if frames:
                return frames[0]


def stored_keys(directory) -> dict[int, bytes]:
    store = SegmentStore(directory / "commitlog", SEG)
    data = store.read_all()
    store.close()
    report = recover_log(data, SEG)
    out = {}
    for r in report.records:
        seg = data[r.offset - r.offset % SEG]
        pos = r.offset % SEG
        out[r.key] = seg[pos + 20: pos + r.size]
    return out


@pytest.mark.parametrize("mode", ["DECOUPLED", "BLOCKING"])
def test_sync_master_with_a_real_slave(tmp_path, procs, mode):
    master = start_master(tmp_path / "m", "--flush-disk-type", "SYNC_FLUSH", "--broker-role", "SYNC_MASTER",
                          "--replicas", "r1", "--ack-mode", mode, *SMALL)
    procs.append(master)
    procs.append(start_replica(tmp_path / "r1", master, "r1", "--mapped-file-size-commit-log", str(SEG)))
    wait_for_line(master, r"slave r1 connected")
    result = run_load(("127.0.0.1", master.port), producers=4, count=400, size=200)
    assert result.statuses == {"PUT_OK": 400}
    time.sleep(0.3)
    on_slave = stored_keys(tmp_path / "r1")
    assert all(on_slave.get(k) == body_for(k, 200) for k in result.acked_keys)


def test_malformed_frame_closes_only_that_connection(tmp_path, procs):
    master = start_master(tmp_path / "m", *SMALL)
    procs.append(master)
    bad = socket.create_connection(("127.0.0.1", master.port))
    bad.sendall(struct.pack(">IB", 0, 1))        # length 0: malformed
    bad.settimeout(5)
    assert bad.recv(10) == b""                   # the broker closed this connection...
    bad.close()
    assert PutStatus(put(master.port, 1, b"fine").status) is PutStatus.PUT_OK  # ...and serves others


def test_empty_or_oversized_message_is_illegal_and_writes_nothing(tmp_path, procs):
    master = start_master(tmp_path / "m", *SMALL)
    procs.append(master)
    first = put(master.port, 1, b"a" * 10)
    for body in (b"", b"x" * 4097):
        assert PutStatus(put(master.port, 2, body).status) is PutStatus.MESSAGE_ILLEGAL
    after = put(master.port, 3, b"a" * 10)
    assert after.next_offset - first.next_offset == 30   # nothing was written in between


def test_failed_fsync_never_acks_and_the_store_turns_read_only(tmp_path, procs):
    master = start_master(tmp_path / "m", "--flush-disk-type", "SYNC_FLUSH", "--inject-fsync-eio-after", "5",
                          "--sync-flush-timeout-ms", "300", *SMALL)
    procs.append(master)
    statuses = [PutStatus(put(master.port, k, b"m" * 64).status) for k in range(1, 12)]
    ok = [i for i, s in enumerate(statuses) if s is PutStatus.PUT_OK]
    assert ok and ok == list(range(len(ok))) and len(ok) <= 5        # only what 5 good fsyncs covered
    assert PutStatus.FLUSH_DISK_TIMEOUT in statuses                   # the waiter on the failed fsync
    assert statuses[-1] is PutStatus.SERVICE_NOT_AVAILABLE            # read-only, still answering
    wait_for_line(master, r"fsync failed")


@pytest.mark.parametrize("flush, fault", [("SYNC_FLUSH", "eio"), ("SYNC_FLUSH", "short"), ("ASYNC_FLUSH", "enospc")])
def test_a_failed_write_is_never_acknowledged(tmp_path, procs, flush, fault):
    master = start_master(tmp_path / "m", "--flush-disk-type", flush, "--inject-write-fault-after", "5",
                          "--inject-write-fault", fault, "--sync-flush-timeout-ms", "300", *SMALL)
    procs.append(master)
    statuses = [PutStatus(put(master.port, k, b"w" * 64).status) for k in range(1, 9)]
    assert statuses[:5] == [PutStatus.PUT_OK] * 5                      # one put, one write, each
    assert statuses[5] is PutStatus.UNKNOWN_ERROR                       # the sixth write failed
    assert set(statuses[6:]) == {PutStatus.SERVICE_NOT_AVAILABLE}      # read-only, still answering
    wait_for_line(master, r"write of \d+ bytes at \d+ failed")
    master.stop()
    assert set(stored_keys(tmp_path / "m")) >= {1, 2, 3, 4, 5}           # every PUT_OK is on disk


def test_a_corrupt_segment_is_truncated_at_the_first_bad_record(tmp_path, procs):
    master = start_master(tmp_path / "m", "--flush-disk-type", "SYNC_FLUSH", *SMALL)
    procs.append(master)
    offsets = [put(master.port, k, b"r" * 100).next_offset for k in range(1, 6)]
    master.stop()
    path = sorted((tmp_path / "m" / "commitlog").iterdir())[0]
    data = bytearray(path.read_bytes())
    data[offsets[2] + 50] ^= 0xFF                # inside the 4th record
    path.write_bytes(bytes(data))
    again = start_master(tmp_path / "m", "--flush-disk-type", "SYNC_FLUSH", *SMALL)
    procs.append(again)
    report = "".join(again.lines)
    assert "recovered 3 records" in report and "CRC mismatch" in report
    assert put(again.port, 9, b"new").next_offset == offsets[2] + 23   # serves, appended at the cut
    assert set(stored_keys(tmp_path / "m")) == {1, 2, 3, 9}


KILLS = 8


def test_kill_9_under_sync_flush_load_loses_no_acknowledged_message(tmp_path, procs, record_property):
    acked_total = 0
    key = 1
    for round_no in range(KILLS):
        master = start_master(tmp_path / "m", "--flush-disk-type", "SYNC_FLUSH", *SMALL)
        procs.append(master)
        stop = threading.Event()
        box = {}
        loader = threading.Thread(target=lambda: box.setdefault("r", run_load(
            ("127.0.0.1", master.port), producers=8, count=100_000, size=300, first_key=key, stop=stop)))
        loader.start()
        time.sleep(0.4 + 0.1 * (round_no % 3))
        master.popen.kill()                      # kill -9 in the middle of the load
        master.popen.wait()
        stop.set()
        loader.join(30)
        acked = box["r"].acked_keys
        assert acked, "the load produced no PUT_OK before the kill"
        stored = stored_keys(tmp_path / "m")
        missing = [k for k in acked if k not in stored]
        corrupt = [k for k in acked if k in stored and stored[k] != body_for(k, 300)]
        assert not missing and not corrupt, (round_no, missing[:5], corrupt[:5])
        acked_total += len(acked)
        key += 100_000
    record_property("kills", KILLS)
    record_property("acked_messages_checked", acked_total)
    print(f"\nkill -9 rounds: {KILLS}, acknowledged messages checked: {acked_total}")


def test_load_records_every_acknowledged_message(tmp_path, procs):
    import subprocess
    import sys

    from reference.real.load import read_record

    master = start_master(tmp_path / "m", "--flush-disk-type", "SYNC_FLUSH", *SMALL)
    procs.append(master)
    record = tmp_path / "acked.jsonl"
    result = zygote.run(["load", "--target", f"127.0.0.1:{master.port}", "--producers", "4", "--connections", "2",
                         "--count", "60", "--size", "100", "--record", str(record)],
                        cwd=Path.cwd(), timeout=60)        # a process (cli/tests/zygote.py)
    assert result.returncode == 0, result.stderr
    acked = read_record(record)
    assert sorted(a.key for a in acked) == list(range(1, 61))
    master.stop()
    stored = stored_keys(tmp_path / "m")
    assert all(stored[a.key] == body_for(a.key, a.size) for a in acked)
    ends = sorted(a.next_offset for a in acked)
    assert ends == sorted(set(ends)) and ends[-1] == 60 * 120         # each at its own offset
