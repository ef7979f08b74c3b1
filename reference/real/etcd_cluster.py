"""A real etcd cluster on 127.0.0.1 for the tests and the controller
benchmark: N members (Debian's etcd-server), free ports, data directories
in a given directory; kill -9 a member (the leader, found with the
maintenance Status API) and restart it on its own data directory.

etcd missing is ``EtcdClusterError`` with a clear message (a test fails,
never skips: `make test` installs etcd-server, Makefile target `etcd`).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path

import aetcd
import attrs

from reference.real.ports import free_ports  # noqa: F401  (re-exported: the tests' import)

ETCD = "etcd"
# Short Raft timers: a new leader within about a second of the old one's death.
HEARTBEAT_INTERVAL_MS = 50
ELECTION_TIMEOUT_MS = 500


class EtcdClusterError(RuntimeError):
    """etcd is not installed, or a cluster did not come up."""


def etcd_binary() -> str:
    path = shutil.which(ETCD)
    if path is None:
        raise EtcdClusterError("the etcd binary is not on PATH: run `make test` (it installs Debian's "
                               "etcd-server) or `apt-get install etcd-server`")
    return path


@attrs.define
class Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    popen: subprocess.Popen | None = None
    advertised_peer_port: int = 0      # where the other members reach it (a chaos run's proxy); 0: peer_port

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.advertised_peer_port or self.peer_port}"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"


@attrs.define
class EtcdCluster:
    members: list[Member]

    @classmethod
    def start(cls, directory: Path, n: int = 3, ports: list[int] | None = None,
              advertised_peer_ports: list[int] | None = None) -> EtcdCluster:
        """``ports``: each member's client and peer port (2n); ``advertised_peer_ports``: where the
        members reach each other instead of the peer ports (a chaos run's fault proxy)."""
        etcd_binary()
        ports = ports or free_ports(2 * n)
        assert len(ports) == 2 * n and (advertised_peer_ports is None or len(advertised_peer_ports) == n)
        members = [Member(f"m{i}", ports[2 * i], ports[2 * i + 1], directory / f"m{i}.etcd",
                          directory / f"m{i}.log",
                          advertised_peer_port=advertised_peer_ports[i] if advertised_peer_ports else 0)
                   for i in range(n)]
        cluster = cls(members)
        for m in members:
            cluster.start_member(m)
        cluster.wait_ready()
        return cluster

    @property
    def endpoints(self) -> str:
        return ",".join(m.endpoint for m in self.members)

    def alive(self) -> list[Member]:
        return [m for m in self.members if m.popen is not None and m.popen.poll() is None]

    def start_member(self, m: Member) -> None:
        initial = ",".join(f"{x.name}={x.peer_url}" for x in self.members)
        cmd = [etcd_binary(), "--name", m.name, "--data-dir", str(m.data_dir),
               "--listen-client-urls", f"http://127.0.0.1:{m.client_port}",
               "--advertise-client-urls", f"http://127.0.0.1:{m.client_port}",
               "--listen-peer-urls", f"http://127.0.0.1:{m.peer_port}",
               "--initial-advertise-peer-urls", m.peer_url,
               "--initial-cluster", initial, "--initial-cluster-state", "new",
               "--initial-cluster-token", "ackorder-test",
               "--heartbeat-interval", str(HEARTBEAT_INTERVAL_MS), "--election-timeout", str(ELECTION_TIMEOUT_MS)]
        log = open(m.log_path, "ab")
        m.popen = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def wait_ready(self, timeout_s: float = 20) -> None:
        """Until a linearizable read succeeds on every live member (it has a leader)."""
        deadline = time.monotonic() + timeout_s
        for m in self.alive():
            while True:
                try:
                    asyncio.run(_get(m, b"/ready"))
                    break
                except Exception as err:   # noqa: BLE001 — not up yet
                    if m.popen.poll() is not None:
                        raise EtcdClusterError(f"etcd {m.name} exited ({m.popen.returncode}): "
                                             f"{m.log_path.read_text()[-2000:]}") from None
                    if time.monotonic() > deadline:
                        raise EtcdClusterError(f"etcd {m.name} not ready in {timeout_s} s: {err}") from None
                    time.sleep(0.1)

    def leader(self, timeout_s: float = 10) -> Member:
        """The member every live member names as leader (maintenance Status)."""
        deadline = time.monotonic() + timeout_s
        while True:
            ids = {asyncio.run(_leader_port(m)) for m in self.alive()}
            if len(ids) == 1 and None not in ids:
                port = ids.pop()
                return next(m for m in self.members if m.client_port == port)
            if time.monotonic() >= deadline:
                raise EtcdClusterError(f"no agreed etcd leader in {timeout_s} s: {ids}")
            time.sleep(0.1)

    def kill(self, m: Member) -> None:
        m.popen.kill()
        m.popen.wait(timeout=10)

    def stop(self) -> None:
        for m in self.members:
            if m.popen is not None and m.popen.poll() is None:
                m.popen.kill()
                m.popen.wait(timeout=10)

    def read_prefix(self, prefix: str) -> dict[bytes, bytes]:
        """A linearizable read of every key under ``prefix`` from a live member."""
        return asyncio.run(_read_prefix(self.alive()[0], prefix.encode()))

    def history(self, prefix: str, timeout_s: float = 20) -> dict[bytes, list[bytes]]:
        """Every value each key under ``prefix`` ever held, oldest first (etcd's MVCC history,
        replayed by a watch from revision 1; nothing here compacts it)."""
        return asyncio.run(asyncio.wait_for(_history(self.alive()[0], prefix.encode()), timeout_s))


async def _get(m: Member, key: bytes):
    async with aetcd.Client("127.0.0.1", m.client_port, timeout=2) as c:
        return await c.get(key)


async def _leader_port(m: Member) -> int | None:
    try:
        async with aetcd.Client("127.0.0.1", m.client_port, timeout=2) as c:
            status = await c.status()
    except aetcd.exceptions.ClientError:
        return None
    if status.leader is None:
        return None
    url = status.leader.client_urls[0]
    return int(url.rsplit(":", 1)[1])


async def _read_prefix(m: Member, prefix: bytes) -> dict[bytes, bytes]:
    async with aetcd.Client("127.0.0.1", m.client_port, timeout=5) as c:
        return {kv.key: kv.value for kv in await c.get_prefix(prefix)}


async def _history(m: Member, prefix: bytes) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    async with aetcd.Client("127.0.0.1", m.client_port, timeout=5) as c:
        last = max((kv.mod_revision for kv in await c.get_prefix(prefix)), default=0)
        if last == 0:
            return out
        watch = await c.watch_prefix(prefix, start_revision=1)
        async for event in watch:
            out.setdefault(event.kv.key, []).append(event.kv.value)
            if event.kv.mod_revision >= last:
                break
        await watch.cancel()
    return out
