"""Start real master and slave processes on 127.0.0.1 for tests; stop them by pid.
A thread drains each process's output (a broker logs one line per closed
connection: a pipe nobody reads would block it)."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import attrs

ENTRY = "cli"           # the module that runs `ackorder`


@attrs.define
class Proc:
    popen: subprocess.Popen
    lines: list[str]
    port: int = 0
    ha_port: int = 0
    pending: queue.Queue = attrs.Factory(queue.Queue)   # lines not yet looked at by wait_for_line

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)

    def terminate(self, timeout_s: float = 30) -> int:
        """SIGTERM (a clean stop: the runtime finishes what it writes), then the exit code."""
        if self.popen.poll() is None:
            self.popen.terminate()
        return self.popen.wait(timeout=timeout_s)

    def output(self) -> str:
        """Everything the process printed so far."""
        while True:
            try:
                line = self.pending.get_nowait()
            except queue.Empty:
                return "".join(self.lines)
            if line is None:              # the end of the output (kept for wait_for_line)
                self.pending.put(None)
                return "".join(self.lines)
            self.lines.append(line)


def _drain(popen: subprocess.Popen, out: queue.Queue) -> None:
    for line in popen.stdout:
        out.put(line)
    out.put(None)


def _python(switch_interval_s: float | None) -> list[str]:
    """The interpreter and entry module of a broker; with ``switch_interval_s`` the
    process switches threads that often (a race test's way to widen the windows
    between two threads, without any hook in the product)."""
    if switch_interval_s is None:
        return [sys.executable, "-m", ENTRY]
    prelude = (f"import runpy, sys; sys.setswitchinterval({switch_interval_s!r}); "
               f"sys.argv[0] = {ENTRY!r}; runpy.run_module({ENTRY!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", prelude]


def _spawn(cmd: list[str]) -> Proc:
    popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    proc = Proc(popen, [])
    threading.Thread(target=_drain, args=(popen, proc.pending), daemon=True).start()
    return proc


def wait_for_line(proc: Proc, pattern: str, timeout_s: float = 30) -> re.Match:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            line = proc.pending.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            line = ""
        if line is None:
            proc.pending.put(None)
            proc.popen.wait(timeout=10)
            raise RuntimeError(f"process exited ({proc.popen.returncode}): {''.join(proc.lines)}")
        if line:
            proc.lines.append(line)
            if m := re.search(pattern, line):
                return m
        if time.monotonic() >= deadline:
            proc.popen.kill()
            raise TimeoutError(f"no {pattern!r} within {timeout_s} s: {''.join(proc.lines)}")


def start_master(directory: Path, *flags: str, switch_interval_s: float | None = None) -> Proc:
    proc = _spawn([*_python(switch_interval_s), "broker", "master", "--dir", str(directory),
                   "--port", "0", "--ha-port", "0", *flags])
    m = wait_for_line(proc, r"listening host=\S+ port=(\d+) ha_port=(\d+)")
    proc.port, proc.ha_port = int(m.group(1)), int(m.group(2))
    return proc


def start_replica(directory: Path, master: Proc, name: str, *flags: str) -> Proc:
    proc = _spawn([*_python(None), "broker", "replica", "--dir", str(directory),
                   "--master", f"127.0.0.1:{master.ha_port}", "--name", name, *flags])
    wait_for_line(proc, r"recovered")
    return proc


def start_controller(directory: Path, *flags: str) -> Proc:
    proc = _spawn([sys.executable, "-m", "cli", "controller", "--dir", str(directory), "--port", "0", *flags])
    m = wait_for_line(proc, r"listening host=\S+ port=(\d+)")
    proc.port = int(m.group(1))
    return proc
