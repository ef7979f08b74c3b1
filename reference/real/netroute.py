"""Where a process connects to reach an address: in a chaos run with a network of faults
(reference/real/netfault.py), each process reaches each other through its own link of the proxy,
so an address another process advertises (a master's HA port, a broker's port in the controller's
metadata) is mapped to this process's link to it.

The map comes from the environment, ``ACKORDER_NET_ROUTES="host:port=host:port,..."``, set by the
harness for the processes it starts (``install`` sets it for the harness's own clients).  Outside a
chaos run it is empty and every address is itself.  A malformed map is a ConfigError (exit 2) at the
process's start, never at its first connection.
"""

from __future__ import annotations

import os

from spec.config import ConfigError

ENV = "ACKORDER_NET_ROUTES"
MAX_ROUTES = 256

_routes: dict[tuple[str, int], tuple[str, int]] | None = None


def _address(text: str, where: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isascii() or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ConfigError(f"{ENV}: {where}: {text!r} is not host:port")
    return host, int(port)


def parse(text: str) -> dict[tuple[str, int], tuple[str, int]]:
    out = {}
    items = [i for i in text.split(",") if i.strip()]
    if len(items) > MAX_ROUTES:
        raise ConfigError(f"{ENV}: {len(items)} routes; at most {MAX_ROUTES}")
    for n, item in enumerate(items, 1):
        frm, sep, to = item.partition("=")
        if not sep:
            raise ConfigError(f"{ENV}: route {n}: {item!r} is not host:port=host:port")
        out[_address(frm, f"route {n}")] = _address(to, f"route {n}")
    return out


def format_routes(routes: dict[tuple[str, int], tuple[str, int]]) -> str:
    return ",".join(f"{a[0]}:{a[1]}={b[0]}:{b[1]}" for a, b in routes.items())


def load() -> None:
    """Read the map from the environment now (a process's start): ConfigError if malformed."""
    global _routes
    _routes = parse(os.environ.get(ENV, ""))


def install(routes: dict[tuple[str, int], tuple[str, int]] | None) -> None:
    """The harness's own map (None: none)."""
    global _routes
    _routes = dict(routes) if routes else {}


def route(address: tuple[str, int]) -> tuple[str, int]:
    if _routes is None:
        load()
    return _routes.get((address[0], int(address[1])), address)
