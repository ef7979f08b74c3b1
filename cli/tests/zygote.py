"""`ackorder ARGS` as a process of its own, without paying a Python start-up and the project's
imports for each one (~0.55 CPU-s, most of a usage error's cost): one zygote process per test
process imports the whole project once, then forks a child for each command.  The child is a
real process, as a user's `ackorder` is: its own stdout and stderr (files, not a terminal), its
own exit status, signal handlers and atexit handlers; it runs `python -m cli` through runpy with
the command's argv, environment and working directory, and what escapes it is what the
interpreter makes of it (a traceback on stderr, exit 1).  What differs is only that its modules
were imported before the fork, under the zygote's environment: a command whose imports depend on
the environment must be run with ``subprocess`` (cli/tests/test_exit_codes.py's ``ackorder``).

The zygote is single-threaded (it reads one request, forks, waits, answers), so forking it is
safe; a command that outlives its timeout is killed, as ``subprocess.run`` kills it."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_ZYGOTE = r"""
import atexit, io, json, os, runpy, sys, tempfile, traceback
from stateful_tests.constants_pool import import_every_project_module
import_every_project_module()
replies = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
replies.write("ready\n")
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            os.chdir(req["cwd"])
            os.environ.clear(); os.environ.update(req["env"])
            tempfile.tempdir = None      # TMPDIR as the command's environment says, as in a fresh process
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(os.open(req["stdout"], os.O_WRONLY | os.O_TRUNC), 1)
            os.dup2(os.open(req["stderr"], os.O_WRONLY | os.O_TRUNC), 2)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
            sys.argv = [sys.executable, *req["argv"]]
            try:
                runpy.run_module("cli", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    code = e.code or 0
                else:
                    print(e.code, file=sys.stderr); code = 1
            except BaseException:
                traceback.print_exc(); code = 1
            atexit._run_exitfuncs()
            sys.stdout.flush(); sys.stderr.flush()
        finally:
            os._exit(code)
    replies.write(json.dumps({"pid": pid}) + "\n")
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
"""

_zygote: subprocess.Popen | None = None


def _start() -> subprocess.Popen:
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        # The replies are read with os.read (_Replies), never by the pipe's buffered reader, whose
        # buffer select() cannot see.
        _zygote = subprocess.Popen([sys.executable, "-c", _ZYGOTE], cwd=ROOT, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, bufsize=1)
        _zygote.replies = _Replies(os.dup(_zygote.stdout.fileno()))
        _zygote.stdout.close()
        ready = _zygote.replies.line(None)
        assert ready == "ready", f"the zygote did not start: {ready!r}"
        atexit.register(_stop, _zygote)
    return _zygote


def _stop(zygote: subprocess.Popen) -> None:
    """End of input ends the zygote; waiting for it puts its CPU time, and its children's, into
    this process's (RUSAGE_CHILDREN), where a timing of the tests looks for it."""
    zygote.stdin.close()
    try:
        zygote.wait(timeout=30)
    except subprocess.TimeoutExpired:
        zygote.kill()
        zygote.wait()


class _Replies:
    """The zygote's reply lines, read from its pipe with os.read.  Both replies to a command that
    ends at once can arrive in one read: the second one must then be answered from what was read,
    not waited for with select() on a pipe that holds nothing more (a buffered readline hid it,
    and a fast command then waited out its whole timeout: cli/tests/test_zygote.py)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = b""

    def line(self, timeout_s: float | None) -> str | None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self.pending:
            if deadline is not None and not select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                return None
            chunk = os.read(self.fd, 65536)
            assert chunk, "the zygote died"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode()


def _reply(zygote: subprocess.Popen, timeout_s: float | None) -> dict | None:
    line = zygote.replies.line(timeout_s)
    return None if line is None else json.loads(line)


def run(argv: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run([python, -m, cli, *argv], capture_output=True, text=True, ...)``, forked."""
    zygote = _start()
    with tempfile.TemporaryDirectory(prefix="ackorder-zygote-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        out.touch(), err.touch()
        zygote.stdin.write(json.dumps({"argv": list(argv), "cwd": str(cwd), "env": dict(os.environ if env is None
                                                                                       else env),
                                       "stdout": str(out), "stderr": str(err)}) + "\n")
        zygote.stdin.flush()
        pid = _reply(zygote, None)["pid"]
        done = _reply(zygote, timeout)
        if done is None:
            os.killpg(pid, signal.SIGKILL)
            _reply(zygote, None)
            raise subprocess.TimeoutExpired(["ackorder", *argv], timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess(["ackorder", *argv], done["returncode"], out.read_text(),
                                           err.read_text())
