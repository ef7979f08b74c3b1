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
