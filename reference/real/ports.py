"""Ports for the processes a test or a chaos run starts and restarts on the same addresses.

They are picked below the kernel's ephemeral range (``ip_local_port_range``), where no socket bound
to port 0 and no outgoing connection's source port lands: a port picked free and released is then
not taken back meanwhile by the run's own fault proxy (its listeners bind port 0) or by a client's
connection (a chaos run found a node that could not listen on its port, exit 3)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST_PORT = 10_000
MAX_TRIES = 10_000


def ephemeral_low(default: int = 32_768) -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now, below the ephemeral range."""
    high = ephemeral_low()
    assert high - LOWEST_PORT > 10 * n, (LOWEST_PORT, high, n)
    rng = random.Random()                 # seeded by the OS: parallel test workers pick apart
    out: list[int] = []
    for _ in range(MAX_TRIES):
        if len(out) == n:
            return out
        port = rng.randrange(LOWEST_PORT, high)
        if port in out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        out.append(port)
    raise OSError(f"no {n} free ports in {LOWEST_PORT}..{high - 1} after {MAX_TRIES} tries")
