"""Master and slave processes for the benchmarks: `ackorder broker ...` as
separate OS processes, their output in log files (a pipe nobody reads would
eventually block a chatty broker), stopped with SIGTERM so the master prints
its stats line."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path


class Broker:
    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.popen = subprocess.Popen([sys.executable, "-m", "cli", *argv], stdout=self._log,
                                      stderr=subprocess.STDOUT, text=True)
        self.port = self.ha_port = 0

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


def start_master(directory: Path, flags: list[str]) -> Broker:
    directory.mkdir(parents=True, exist_ok=True)
    b = Broker(["broker", "master", "--dir", str(directory), "--port", "0", "--ha-port", "0", *flags],
               directory.parent / f"{directory.name}.log")
    m = b.wait_for(r"listening host=\S+ port=(\d+) ha_port=(\d+)")
    b.port, b.ha_port = int(m.group(1)), int(m.group(2))
    return b


def start_replica(directory: Path, ha_port: int, name: str, flags: list[str]) -> Broker:
    directory.mkdir(parents=True, exist_ok=True)
    b = Broker(["broker", "replica", "--dir", str(directory), "--master", f"127.0.0.1:{ha_port}",
                "--name", name, *flags], directory.parent / f"{directory.name}.log")
    b.wait_for(r"recovered")
    return b
