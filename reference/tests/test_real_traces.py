"""The real runtime writes traces (`ackorder broker master|replica --trace FILE`, one file per
process): a master and one slave on 127.0.0.1 under `ackorder load`, stopped cleanly, and the two
files merged by causality are a behaviour of the spec for TLC and for the twin; the same trace with
one PUT_OK moved before the flush it needs is rejected by both (exit 1); a broken file is exit 2,
one line naming the file and line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli.tests import zygote
from reference.tests.realproc import start_master, start_replica, wait_for_line

SEG = "65536"
MESSAGES = 6          # TLC checks the merged trace in seconds


def ackorder(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return zygote.run(list(args), cwd=Path.cwd(), timeout=timeout_s)      # a process (cli/tests/zygote.py)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> tuple[Path, Path]:
    """A real SYNC_FLUSH + SYNC_MASTER master and slave r1, each writing its trace."""
    d = tmp_path_factory.mktemp("real-traces")
    master_trace, replica_trace = d / "master.ndjson", d / "r1.ndjson"
    master = start_master(d / "m", "--flush-disk-type", "SYNC_FLUSH", "--broker-role", "SYNC_MASTER",
                          "--replicas", "r1", "--mapped-file-size-commit-log", SEG, "--max-message-size", "4096",
                          "--trace", str(master_trace))
    replica = None
    try:
        replica = start_replica(d / "r1", master, "r1", "--mapped-file-size-commit-log", SEG,
                                "--trace", str(replica_trace))
        wait_for_line(master, r"slave r1 connected")
        load = ackorder("load", "--target", f"127.0.0.1:{master.port}", "--producers", "2",
                        "--count", str(MESSAGES), "--size", "100")
        assert load.returncode == 0, load.stdout + load.stderr
        # The master first: it stops with the slave connected and caught up (its trace can say
        # "complete"); then the slave, which sees the link close.
        assert master.terminate() == 0, master.output()
        assert replica.terminate() == 0, replica.output()
    finally:
        master.stop()
        if replica is not None:
            replica.stop()
    assert "ends as a prefix" not in master.output(), master.output()
    return master_trace, replica_trace


def test_the_real_runtime_writes_one_file_per_process(real_run):
    master_trace, replica_trace = real_run
    master = [json.loads(line) for line in master_trace.read_text().splitlines()]
    replica = [json.loads(line) for line in replica_trace.read_text().splitlines()]
    assert master[0]["process"] == "master" and "config" in master[0]
    assert replica[0]["process"] == "r1" and "config" not in replica[0]     # a slave does not know it
    assert master[-1] == {"end": "complete"} and replica[-1] == {"end": "complete"}
    puts = [x for x in master if x.get("action") == "Put"]
    assert sorted(x["key"] for x in puts) == list(range(1, MESSAGES + 1))
    assert sum(1 for x in replica if x.get("action") == "Transfer(r1)") == MESSAGES
    # The slave's HANDSHAKE and the master's ReplicaConnect name one connection, by the slave's address.
    connect = next(x for x in master if x.get("action") == "ReplicaConnect(r1)")
    handshake = next(x for x in replica if x.get("note") == "HANDSHAKE")
    assert connect["conn"] == handshake["conn"]


def trace_check(checker: str, json_path: Path, *files: Path) -> tuple[subprocess.CompletedProcess, dict | None]:
    r = ackorder("trace-check", *([checker] if checker == "--twin" else []), "--json", str(json_path), *map(str, files))
    return r, json.loads(json_path.read_text()) if json_path.exists() else None


@pytest.mark.parametrize("checker", ["--twin", "tlc"])
def test_a_real_run_is_a_behaviour_of_the_spec(real_run, tmp_path, checker):
    r, verdict = trace_check(checker, tmp_path / "verdict.json", *real_run)
    assert r.returncode == 0, r.stdout + r.stderr
    assert verdict["valid"] and verdict["complete"] and verdict["explained"] == verdict["steps"] > 3 * MESSAGES


def ack_before_flush(master_trace: Path, out: Path) -> int:
    """The master's trace with its first PUT_OK moved before the Flush that made it durable
    (steps renumbered); the line the PUT_OK is on now."""
    lines = [json.loads(line) for line in master_trace.read_text().splitlines()]
    head, steps, tail = lines[0], [x for x in lines[1:] if "seq" in x], [x for x in lines[1:] if "seq" not in x]
    respond = next(i for i, x in enumerate(steps) if str(x.get("action", "")).startswith("Respond("))
    key = int(steps[respond]["action"][len("Respond("):-1])
    off = next(x["obs"]["reqs"]["append"][0]["off"] for x in steps if x.get("action") == "Put" and x["key"] == key)
    flush = next(i for i, x in enumerate(steps) if x.get("action") == "Flush" and x["obs"]["flushed"] >= off)
    assert flush < respond
    steps.insert(flush, steps.pop(respond))
    for seq, x in enumerate(steps, 1):
        x["seq"] = seq
    out.write_text("\n".join(json.dumps(x) for x in [head, *steps, *tail]) + "\n")
    return flush + 2


@pytest.mark.parametrize("checker", ["--twin", "tlc"])
def test_a_tampered_real_trace_is_rejected(real_run, tmp_path, checker):
    master_trace, replica_trace = real_run
    tampered = tmp_path / "master.ndjson"
    line = ack_before_flush(master_trace, tampered)
    r, verdict = trace_check(checker, tmp_path / "verdict.json", tampered, replica_trace)
    assert r.returncode == 1, r.stdout + r.stderr
    assert not verdict["valid"] and verdict["failed"]["action"].startswith("Respond("), verdict
    assert (verdict["failed"]["file"], verdict["failed"]["line"]) == (str(tampered), line) and verdict["state"]


def test_a_broken_real_trace_is_exit_2_naming_the_line(real_run, tmp_path):
    master_trace, replica_trace = real_run
    lines = master_trace.read_text().splitlines()
    broken = tmp_path / "master.ndjson"
    broken.write_text("\n".join([*lines[:3], lines[3][: len(lines[3]) // 2], *lines[4:]]) + "\n")   # a cut line
    r = ackorder("trace-check", "--twin", str(broken), str(replica_trace))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and f"{broken}:4:" in r.stderr and "Traceback" not in r.stderr, r.stderr
    # A slave's file alone cannot be checked: it does not give the configuration.
    r = ackorder("trace-check", "--twin", str(replica_trace))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "configuration" in r.stderr, r.stderr
