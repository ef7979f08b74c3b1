"""The real controller (`ackorder controller`) as a subprocess over TCP on
127.0.0.1: requests, metadata that survives kill -9, a garbage frame, and
the exit codes."""

import asyncio
import signal
import subprocess

from pathlib import Path

import pytest

from cli.tests import zygote

from reference.real.controller_client import ControllerClient, ControllerClientError
from reference.tests.realproc import start_controller


def run(coro):
    return asyncio.run(coro)


async def _setup_group(port: int) -> dict:
    c = await ControllerClient.connect("127.0.0.1", port)
    try:
        assert (await c.register("broker-a", 1))["code"] == "SUCCESS"
        assert (await c.register("broker-a", 2))["code"] == "SUCCESS"
        assert (await c.heartbeat("broker-a", 2, max_offset=4096))["code"] == "SUCCESS"
        info = (await c.get_replica_info("broker-a"))["info"]
        reply = await c.alter("broker-a", 1, info["master_epoch"], info["sss_epoch"], {1, 2})
        assert reply["code"] == "SUCCESS", reply
        stale = await c.alter("broker-a", 1, info["master_epoch"], info["sss_epoch"], {1})
        assert stale["code"] == "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH", stale
        return reply["info"]
    finally:
        await c.close()


async def _info(port: int, group: str) -> dict:
    c = await ControllerClient.connect("127.0.0.1", port)
    try:
        return await c.get_replica_info(group)
    finally:
        await c.close()


@pytest.mark.parametrize("design", ["serial", "pipelined"])
def test_metadata_survives_kill_9(tmp_path, design):
    proc = start_controller(tmp_path, "--design", design)
    try:
        after_alter = run(_setup_group(proc.port))
        assert after_alter["sync_state_set"] == [1, 2] and after_alter["sss_epoch"] == 2
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(timeout=10)
    finally:
        proc.stop()
    again = start_controller(tmp_path, "--design", design)
    try:
        assert "recovered 1 broker groups" in again.output()
        reply = run(_info(again.port, "broker-a"))
        info = reply["info"]
        assert (info["master_id"], info["master_epoch"], info["sync_state_set"], info["sss_epoch"]) == (1, 1, [1, 2], 2)
        assert again.terminate() == 0
    finally:
        again.stop()


def test_a_torn_record_is_cut_and_named(tmp_path):
    proc = start_controller(tmp_path)
    try:
        run(_setup_group(proc.port))
    finally:
        assert proc.terminate() == 0
    with open(tmp_path / "controller.meta", "ab") as f:
        f.write(b"\xc0\xa7\x00\x01\x00\x00\x01\x00")       # a header torn by a crash
    again = start_controller(tmp_path)
    try:
        assert "torn record header" in again.output() and "controller.meta offset" in again.output()
        assert run(_info(again.port, "broker-a"))["info"]["sss_epoch"] == 2
    finally:
        again.stop()


async def _garbage_then_serve(port: int) -> tuple[str, dict]:
    bad = await ControllerClient.connect("127.0.0.1", port)
    bad.send_raw(b"\x00\x00\x00\x09\x10garbage!")
    try:
        await bad.get_replica_info("broker-a")
        error = ""
    except ControllerClientError as err:
        error = str(err)
    await bad.close()
    bad2 = await ControllerClient.connect("127.0.0.1", port)
    try:
        await bad2.call("explode", "broker-a")
    except ControllerClientError as err:
        error += " | " + str(err)
    await bad2.close()
    return error, await _info(port, "broker-a")


def test_a_garbage_frame_gets_an_error_and_the_server_keeps_serving(tmp_path):
    proc = start_controller(tmp_path)
    try:
        run(_setup_group(proc.port))
        error, reply = run(_garbage_then_serve(proc.port))
        assert "malformed frame: frame checksum mismatch" in error, error
        assert "op = 'explode', expected one of register" in error, error
        assert reply["code"] == "SUCCESS" and reply["info"]["sync_state_set"] == [1, 2]
        assert proc.terminate() == 0
        assert "bad_frames=2" in proc.output()
    finally:
        proc.stop()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return zygote.run(["controller", *args], cwd=Path.cwd(), timeout=60)      # a process (cli/tests/zygote.py)


def test_exit_codes(tmp_path):
    proc = start_controller(tmp_path / "a")
    try:
        busy = _cli("--port", str(proc.port), "--dir", str(tmp_path / "b"))
        assert busy.returncode == 3 and "Address already in use" in busy.stderr
        assert len(busy.stderr.strip().splitlines()) == 1
    finally:
        proc.stop()
    usage = _cli("--port", "0", "--design", "fast")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr
    timeout = _cli("--port", "0", "--dir", str(tmp_path / "c"), "--controller-broker-heartbeat-timeout-ms", "0")
    assert timeout.returncode == 2 and "--controller-broker-heartbeat-timeout-ms" in timeout.stderr
    (tmp_path / "file").write_text("x")
    not_dir = _cli("--port", "0", "--dir", str(tmp_path / "file"))
    assert not_dir.returncode == 2 and "not a directory" in not_dir.stderr
    unwritable = _cli("--port", "0", "--dir", "/sys/ackorder-controller")     # even root may not create it
    assert unwritable.returncode == 3 and "/sys/ackorder-controller: Operation not permitted" in unwritable.stderr
    assert len(unwritable.stderr.strip().splitlines()) == 1
    # the input's, as `broker master` says (cli/errors.py os_error_exit): no such path, not this machine's address
    nowhere = _cli("--port", "0", "--dir", "/proc/no/such/dir")
    assert nowhere.returncode == 2 and "No such file or directory" in nowhere.stderr, nowhere.stderr
    foreign = _cli("--port", "0", "--dir", str(tmp_path / "f"), "--host", "192.0.2.1")
    assert foreign.returncode == 2 and len(foreign.stderr.strip().splitlines()) == 1, foreign.stderr
    # issue 34: the bounds on what clients feed it, and peer authentication off loopback
    for flags, needle in ((("--max-pending", "0"), "--max-pending 0"), (("--max-connections", "70000"), "1..65536"),
                          (("--idle-timeout-ms", "0"), "--idle-timeout-ms 0"),
                          (("--frame-deadline-ms", "-1"), "--frame-deadline-ms -1"),
                          (("--partial-frame-budget-bytes", "10"), "at least one frame"),
                          (("--host", "0.0.0.0"), "--peer-secret-file"),
                          (("--peer-secret-file", str(tmp_path / "none")), "no such file")):
        bad = _cli("--port", "0", "--dir", str(tmp_path / "g"), *flags)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and needle in lines[0], (flags, bad.stderr)
    # metadata that parses but names what no controller writes: refused at start, the file named
    from reference.failover.effects import MetadataRecord
    from reference.failover.metadata import FILE_NAME, encode
    for name, record, needle in (("h", MetadataRecord("g", (0, 1), 1, 1, (1,), 1), "broker ids [0]"),
                                 ("i", MetadataRecord("g", (1,), 1, 0, (1,), 1), "masterEpoch 0")):
        (tmp_path / name).mkdir()
        (tmp_path / name / FILE_NAME).write_bytes(encode(record))
        bad = _cli("--port", "0", "--dir", str(tmp_path / name))
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1, bad.stderr
        assert f"{tmp_path / name / FILE_NAME}: " in lines[0] and needle in lines[0], bad.stderr
