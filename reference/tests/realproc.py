"""Start real master and slave processes on 127.0.0.1 for tests; stop them by pid."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import attrs


@attrs.define
class Proc:
    popen: subprocess.Popen
    lines: list[str]
    port: int = 0
    ha_port: int = 0

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)


def _wait_for(proc: subprocess.Popen, pattern: str, timeout_s: float = 30) -> tuple[re.Match, list[str]]:
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise RuntimeError(f"process exited ({proc.returncode}): {''.join(lines)}")
            continue
        lines.append(line)
        if m := re.search(pattern, line):
            return m, lines
    proc.kill()
    raise TimeoutError(f"no {pattern!r} within {timeout_s} s: {''.join(lines)}")


def start_master(directory: Path, *flags: str) -> Proc:
    cmd = [sys.executable, "-m", "cli", "broker", "master", "--dir", str(directory),
           "--port", "0", "--ha-port", "0", *flags]
    popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    m, lines = _wait_for(popen, r"listening host=\S+ port=(\d+) ha_port=(\d+)")
    return Proc(popen, lines, int(m.group(1)), int(m.group(2)))


def start_replica(directory: Path, master: Proc, name: str, *flags: str) -> Proc:
    cmd = [sys.executable, "-m", "cli", "broker", "replica", "--dir", str(directory),
           "--master", f"127.0.0.1:{master.ha_port}", "--name", name, *flags]
    popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    _, lines = _wait_for(popen, r"recovered")
    return Proc(popen, lines)


def wait_for_line(proc: Proc, pattern: str, timeout_s: float = 30) -> re.Match:
    m, lines = _wait_for(proc.popen, pattern, timeout_s)
    proc.lines += lines
    return m
