"""cli/tests/zygote.py: a forked `ackorder` is a process like `python -m cli` — its exit status,
its stdout and stderr apart, the environment and working directory it was given, killed at its
timeout — and the zygote keeps serving after each."""

import shutil
import subprocess
import sys

import pytest

from cli.tests import zygote

TRACE = zygote.ROOT / "tla" / "tests" / "traces" / "legal_keys.ndjson"


def test_a_forked_command_is_what_python_m_cli_gives():
    for argv in (["--version"], ["tlc", "sync_flsh"], ["no-such-command"]):
        forked = zygote.run(argv)
        real = subprocess.run([sys.executable, "-m", "cli", *argv], cwd=zygote.ROOT, capture_output=True, text=True)
        assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)


def test_the_working_directory_and_environment_are_the_commands(tmp_path):
    shutil.copy(TRACE, tmp_path / "t.ndjson")
    assert zygote.run(["trace-check", "t.ndjson", "--twin"], cwd=tmp_path).returncode == 0
    assert zygote.run(["trace-check", "t.ndjson", "--twin"]).returncode == 2        # not in the project root
    no_java = zygote.run(["tlc", "sync_flush"], env={"PATH": str(tmp_path)})
    assert no_java.returncode == 3 and "java not found" in no_java.stderr


def test_a_command_past_its_timeout_is_killed_and_the_zygote_serves_on(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.run(["broker", "master", "--dir", str(tmp_path / "d"), "--port", "0", "--ha-port", "0"], timeout=2)
    assert zygote.run(["--version"]).returncode == 0


def test_a_reply_already_read_is_not_waited_for():
    """A command that ends at once: its pid and its exit status reach the pipe together and are read
    together.  The exit status must come from what was read, not from a select() on a pipe that holds
    nothing more, which waited out the command's whole timeout (make test hung 300 s on a usage
    error of trace-check, then failed)."""
    import os

    r, w = os.pipe()
    try:
        os.write(w, b'{"pid": 7}\n{"returncode": 2}\n')
        replies = zygote._Replies(r)
        assert replies.line(None) == '{"pid": 7}'
        assert replies.line(0) == '{"returncode": 2}'       # with a zero timeout: nothing left to wait for
        assert replies.line(0) is None                       # and then truly nothing
        os.write(w, b'{"pid"')
        assert replies.line(0) is None                       # half a line is no reply
        os.write(w, b': 8}\n')
        assert replies.line(0) == '{"pid": 8}'
    finally:
        os.close(r), os.close(w)
