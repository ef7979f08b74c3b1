"""Master and slave processes for the benchmarks: `ackorder broker ...` as
separate OS processes, their output in log files (a pipe nobody reads would
eventually block a chatty broker), stopped with SIGTERM so the master prints
its stats line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path


def _entry(tree: Path | None) -> str:
    """The CLI module of a source tree: ``cli`` now, ``spec.cli`` in trees from before issue 13."""
    if tree is None or (Path(tree) / "cli" / "__main__.py").exists():
        return "cli"
    return "spec.cli"


def cpu_seconds(pid: int) -> float:
    """User + system CPU process ``pid`` used so far (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Broker:
    def __init__(self, argv: list[str], log_path: Path, tree: Path | None = None, prefix: list[str] = (),
                 env: dict[str, str] | None = None) -> None:
        """``tree``: run the broker from another source tree (a baseline to compare with);
        ``prefix``: interpreter options before ``-m cli`` (e.g. a profiler); ``env``: added to the environment."""
        self.log_path = log_path
        self._log = open(log_path, "w")
        env = {**os.environ, **({"PYTHONPATH": str(tree)} if tree else {}), **(env or {})} if tree or env else None
        self.popen = subprocess.Popen([sys.executable, *prefix, "-m", _entry(tree), *argv], stdout=self._log,
                                      stderr=subprocess.STDOUT, text=True, cwd=tree, env=env)
        self.port = self.ha_port = 0

    def cpu_seconds(self) -> float:
        """User + system CPU this process used so far."""
        return cpu_seconds(self.popen.pid)

    def rss_kib(self) -> tuple[int, int]:
        """(resident set now, peak resident set) in KiB."""
        status = Path(f"/proc/{self.popen.pid}/status").read_text()
        now = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
        peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
        return now, peak

    def text(self) -> str:
        return self.log_path.read_text()

    def wait_for(self, pattern: str, timeout_s: float = 30) -> re.Match:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if m := re.search(pattern, self.text()):
                return m
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.log_path.name}: exited {self.popen.returncode}:\n{self.text()[-2000:]}")
            time.sleep(0.02)
        raise TimeoutError(f"{self.log_path.name}: no {pattern!r} within {timeout_s} s:\n{self.text()[-2000:]}")

    def stop(self) -> dict[str, int]:
        """SIGTERM, then the master's last line ``stats k=v ...`` as a dict."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._log.close()
        m = re.search(r"^stats ([^\n]*)", self.text(), re.M)
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))} if m else {}


def start_master(directory: Path, flags: list[str], tree: Path | None = None, prefix: list[str] = ()) -> Broker:
    directory.mkdir(parents=True, exist_ok=True)
    b = Broker(["broker", "master", "--dir", str(directory), "--port", "0", "--ha-port", "0", *flags],
               directory.parent / f"{directory.name}.log", tree, prefix)
    m = b.wait_for(r"listening host=\S+ port=(\d+) ha_port=(\d+)")
    b.port, b.ha_port = int(m.group(1)), int(m.group(2))
    return b


def start_replica(directory: Path, ha_port: int, name: str, flags: list[str], tree: Path | None = None) -> Broker:
    directory.mkdir(parents=True, exist_ok=True)
    b = Broker(["broker", "replica", "--dir", str(directory), "--master", f"127.0.0.1:{ha_port}",
                "--name", name, *flags], directory.parent / f"{directory.name}.log", tree)
    b.wait_for(r"recovered")
    return b
