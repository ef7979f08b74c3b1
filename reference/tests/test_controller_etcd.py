"""`ackorder controller --store etcd` on a real 3-member etcd cluster on
127.0.0.1 (reference/real/etcd_cluster.py): brokers register, heartbeat,
alter their SyncStateSets and lose masters (elections) while the etcd
leader is killed with SIGKILL; every state the controller answered
SUCCESS with must be in etcd when the reply arrives (the key holds it or a
later state) and still afterwards, each key's MVCC history never goes back, epochs never go back, the controller
keeps serving with one member lost and stops with exit 3 (losing nothing
it acknowledged) with two lost; a restarted controller recovers the same
groups.  BugEtcdNoCompare (a put without the revision compare) lets a
second, stale controller overwrite an acknowledged decision, and the same
check catches it.

etcd missing fails these tests (never a skip): `make test` installs it."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import time
from collections.abc import Callable

import aetcd
import aetcd.exceptions
import attrs
from pathlib import Path

from cli.tests import zygote
from reference.failover.metadata import scan
from reference.real.controller_client import ControllerClient, ControllerClientError
from reference.real.etcd_cluster import EtcdCluster, etcd_binary, free_ports
from reference.tests.realproc import start_controller

PREFIX = "/ackorder/controller/"
HEARTBEAT_TIMEOUT_MS = 600
LONG_TIMEOUT_MS = 600_000
HEARTBEAT_INTERVAL_S = 0.1
GROUPS = [f"broker-{i}" for i in range(6)]
BROKERS = (1, 2, 3)


@attrs.frozen
class Seen:
    """What one SUCCESS reply said a group's durable metadata is."""
    master_id: int
    master_epoch: int
    sync_state_set: tuple[int, ...]
    sss_epoch: int


def _seen(info: dict) -> Seen:
    return Seen(info["master_id"], info["master_epoch"], tuple(info["sync_state_set"]), info["sss_epoch"])


def lost_decisions(acked: dict[str, list[Seen]], stored: dict[str, Seen]) -> list[str]:
    """Every acknowledged state is the stored one or behind it (both epochs only grow); a
    stored state behind an acknowledged one, or a different one at the same epochs, lost it."""
    return [f"{group}: acknowledged {s}, etcd holds {stored.get(group)}"
            for group, seen in acked.items() for s in seen if behind(s, stored.get(group))]


def epochs_went_back(acked: dict[str, list[Seen]]) -> list[str]:
    problems = []
    for group, seen in acked.items():
        for a, b in itertools.pairwise(seen):
            if b.master_epoch < a.master_epoch or b.sss_epoch < a.sss_epoch:
                problems.append(f"{group}: {a} then {b}")
    return problems


def _decode(key: bytes, value: bytes) -> Seen:
    s = scan(value, key.decode())
    assert s.problem is None and len(s.records) == 1, s.problem
    r = s.records[0]
    assert key.decode() == PREFIX + r.group
    return Seen(r.master_id, r.master_epoch, r.sync_state_set, r.sss_epoch)


def history_went_back(cluster: EtcdCluster) -> list[str]:
    """Each key's values in etcd's MVCC history never go back in either epoch.  (An acknowledged
    state need not be in the history itself: a sync writes the last record of each group, so a
    state superseded within one group commit is covered by its successor, as in the file's
    compaction; ``Driver.check_at_ack`` checks what a reply may claim.)"""
    return epochs_went_back({k.decode()[len(PREFIX):]: [_decode(k, v) for v in vs]
                             for k, vs in cluster.history(PREFIX).items()})


def behind(s: Seen, held: Seen | None) -> bool:
    """``held`` (what etcd has) does not cover the acknowledged ``s``."""
    return held is None or s.master_epoch > held.master_epoch or s.sss_epoch > held.sss_epoch or (
        (s.master_epoch, s.sss_epoch) == (held.master_epoch, held.sss_epoch) and s != held)


def stored_states(cluster: EtcdCluster) -> dict[str, Seen]:
    return {key.decode()[len(PREFIX):]: _decode(key, value) for key, value in cluster.read_prefix(PREFIX).items()}


@attrs.define
class Driver:
    """Brokers of GROUPS against one controller: heartbeats, AlterSyncStateSet, and a master that
    stops heartbeating now and then (the controller's tick elects another)."""
    port: int
    cluster: EtcdCluster | None = None       # with it: after each accepted alter, etcd must hold it
    acked: dict[str, list[Seen]] = attrs.Factory(dict)
    silenced: set[tuple[str, int]] = attrs.Factory(set)
    codes: dict[str, int] = attrs.Factory(dict)
    elections: int = 0
    killed_at: float | None = None       # when an etcd member was killed (time.monotonic)
    acked_after_kill: int = 0
    elections_after_kill: int = 0
    running: bool = True
    client_error: str | None = None
    not_durable_at_ack: list[str] = attrs.Factory(list)
    checked_at_ack: int = 0

    def note(self, group: str, reply: dict) -> dict:
        self.codes[reply["code"]] = self.codes.get(reply["code"], 0) + 1
        if reply["code"] == "SUCCESS" and reply.get("info"):
            self.acked.setdefault(group, []).append(_seen(reply["info"]))
            self.acked_after_kill += self.killed_at is not None
        return reply

    async def run(self, client: ControllerClient, seconds: float, until: Callable[[], bool] | None = None,
                  longest_s: float = 60.0) -> None:
        """Drive for ``seconds``, then on until ``until()`` holds (at most ``longest_s`` more): what
        a phase must show, rather than what fits in a fixed time on a loaded machine."""
        tasks = [asyncio.create_task(self._heartbeats(client))]
        tasks += [asyncio.create_task(self._group(client, g)) for g in GROUPS]
        await asyncio.sleep(seconds)
        deadline = time.monotonic() + longest_s
        while until is not None and not until() and time.monotonic() < deadline and self.client_error is None:
            await asyncio.sleep(0.1)
        self.running = False
        await asyncio.gather(*tasks, return_exceptions=True)

    async def register_all(self, client: ControllerClient) -> None:
        for g in GROUPS:
            for b in BROKERS:
                self.note(g, await client.register(g, b))

    async def _heartbeats(self, client: ControllerClient) -> None:
        while self.running:
            try:
                await asyncio.gather(*(client.heartbeat(g, b, max_offset=4096) for g in GROUPS for b in BROKERS
                                       if (g, b) not in self.silenced))
            except ControllerClientError as err:
                self.client_error = str(err)
                return
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)

    async def _group(self, client: ControllerClient, g: str) -> None:
        try:
            while self.running:
                info = self.note(g, await client.get_replica_info(g)).get("info")
                if info is None:
                    await asyncio.sleep(0.05)
                    continue
                m = info["master_id"]
                if m and len(info["sync_state_set"]) >= 2:
                    await self._depose(client, g, m)
                elif m:
                    others = [b for b in info["alive"] if b != m and (g, b) not in self.silenced]
                    if others:
                        r = self.note(g, await client.alter(g, m, info["master_epoch"], info["sss_epoch"],
                                                            {m, others[0]}))
                        if r["code"] == "SUCCESS":
                            await self.check_at_ack(g, _seen(r["info"]))
                await asyncio.sleep(0.02)
        except ControllerClientError as err:
            self.client_error = str(err)

    async def check_at_ack(self, g: str, s: Seen) -> None:
        """A SUCCESS leaves only once its decision is committed (an alter's; an election's, seen
        by GetReplicaInfo, which waits for every decision before it): read the key now
        (linearizable, from any live member) and it must hold this state or a later one."""
        if self.cluster is None:
            return
        deadline = time.monotonic() + 10
        while True:
            member = self.cluster.alive()[0] if self.cluster.alive() else None
            try:
                async with aetcd.Client("127.0.0.1", member.client_port, timeout=2) as c:
                    kv = await c.get((PREFIX + g).encode())
                break
            except (aetcd.exceptions.ClientError, AttributeError):
                if time.monotonic() > deadline:
                    return                       # no majority: the controller stops, checked after
                await asyncio.sleep(0.1)
        self.checked_at_ack += 1
        held = _decode(kv.key, kv.value) if kv is not None else None
        if behind(s, held):
            self.not_durable_at_ack.append(f"{g}: acknowledged {s}, etcd held {held}")

    async def _depose(self, client: ControllerClient, g: str, master: int) -> None:
        """The master stops heartbeating until the controller has elected another."""
        self.silenced.add((g, master))
        try:
            deadline = time.monotonic() + 5
            while self.running and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                info = self.note(g, await client.get_replica_info(g)).get("info")
                if info is not None and info["master_id"] != master:
                    await self.check_at_ack(g, _seen(info))
                    self.elections += 1
                    self.elections_after_kill += self.killed_at is not None
                    return
        finally:
            self.silenced.discard((g, master))


async def _drive(driver: Driver, seconds: float, register: bool = False,
                 until: Callable[[], bool] | None = None) -> None:
    client = await ControllerClient.connect("127.0.0.1", driver.port)
    try:
        if register:
            await driver.register_all(client)
        await driver.run(client, seconds, until)
    finally:
        await client.close()


async def _drive_and_kill(driver: Driver, cluster: EtcdCluster, members: int, before_s: float,
                          after_s: float, register: bool = False, until: Callable[[], bool] | None = None) -> list[str]:
    """Drive; after ``before_s`` kill ``members`` etcd members, the leader first; go on for
    ``after_s``, and then until ``until()``."""
    async def killer() -> list[str]:
        await asyncio.sleep(before_s)
        names = []
        for _ in range(members):
            victim = await asyncio.to_thread(cluster.leader) if len(cluster.alive()) > 1 else cluster.alive()[0]
            await asyncio.to_thread(cluster.kill, victim)
            driver.killed_at = driver.killed_at or time.monotonic()
            names.append(victim.name)
        return names

    kill = asyncio.create_task(killer())
    await _drive(driver, before_s + after_s, register, until)
    return await kill


def _controller(tmp_path, cluster: EtcdCluster, *flags: str, heartbeat_timeout_ms: int = HEARTBEAT_TIMEOUT_MS):
    return start_controller(tmp_path / "ctl", "--store", "etcd", "--etcd-endpoints", cluster.endpoints,
                            "--controller-broker-heartbeat-timeout-ms", str(heartbeat_timeout_ms),
                            "--etcd-timeout-ms", "5000", *flags)


def test_etcd_leader_killed_nothing_acknowledged_lost(tmp_path):
    cluster = EtcdCluster.start(tmp_path, 3)
    proc = again = None
    try:
        proc = _controller(tmp_path, cluster)
        one = Driver(proc.port, cluster)

        def shown() -> bool:      # what the first phase must show (asserted below): it served on after the kill
            return one.elections >= len(GROUPS) and one.acked_after_kill > 0 and one.elections_after_kill > 0
        killed = asyncio.run(_drive_and_kill(one, cluster, 1, 2.0, 4.0, register=True, until=shown))
        assert len(killed) == 1 and len(cluster.alive()) == 2
        assert proc.popen.poll() is None, proc.output()
        # stop it now: with the brokers silent, its scan would soon clear or move their masters
        assert proc.terminate() == 0, proc.output()
        assert one.client_error is None, one.client_error
        assert one.elections >= len(GROUPS), one
        assert one.acked_after_kill > 0 and one.elections_after_kill > 0, one     # it kept serving
        assert one.codes.get("CONTROLLER_METADATA_NOT_DURABLE", 0) == 0, one.codes
        stored = stored_states(cluster)
        assert lost_decisions(one.acked, stored) == [] and epochs_went_back(one.acked) == []
        assert history_went_back(cluster) == []
        assert one.not_durable_at_ack == [] and one.checked_at_ack > 0, one.not_durable_at_ack

        # a restarted controller recovers the same groups from the two live members
        again = _controller(tmp_path, cluster)
        assert f"recovered {len(GROUPS)} broker groups from etcd" in again.output()
        two = Driver(again.port, cluster)
        killed += asyncio.run(_drive_and_kill(two, cluster, 1, 1.5, 5.0))
        first = {g: seen[0] for g, seen in two.acked.items()}
        assert first == {g: s for g, s in stored.items() if g in first} and len(first) == len(GROUPS)

        # two of three members gone: no majority, the controller stops with exit 3 naming the endpoints
        assert again.popen.wait(timeout=20) == 3, again.output()
        assert "no majority reachable" in again.output() and cluster.endpoints in again.output()
        assert two.codes.get("CONTROLLER_METADATA_NOT_DURABLE", 0) + (two.client_error is not None) >= 1, two
        for m in cluster.members:                    # bring the majority back and read what it holds
            if m.popen.poll() is not None:
                cluster.start_member(m)
        cluster.wait_ready()
        stored = stored_states(cluster)
        acked = {g: one.acked.get(g, []) + two.acked.get(g, []) for g in GROUPS}
        assert lost_decisions(acked, stored) == [] and epochs_went_back(acked) == []
        assert history_went_back(cluster) == [] and two.not_durable_at_ack == []
    finally:
        for p in (proc, again):
            if p is not None:
                p.stop()
        cluster.stop()


async def _two_controllers(port_a: int, port_b: int) -> tuple[dict, dict, dict]:
    """A alters the SSS; then B, which recovered the group before that, registers a broker."""
    a = await ControllerClient.connect("127.0.0.1", port_a)
    b = await ControllerClient.connect("127.0.0.1", port_b)
    try:
        await a.heartbeat("broker-a", 2)
        info = (await a.get_replica_info("broker-a"))["info"]
        altered = await a.alter("broker-a", 1, info["master_epoch"], info["sss_epoch"], {1, 2})
        stale = await b.register("broker-a", 3)         # B still believes SSS {1}, sssEpoch 1
        return info, altered, stale
    finally:
        await a.close()
        await b.close()


def _stale_controller_overwrites(tmp_path, *bug: str) -> tuple[list[str], dict, object]:
    cluster = EtcdCluster.start(tmp_path, 1)
    procs = []
    try:
        # no heartbeats here: a long timeout keeps broker 1 the master in both controllers
        procs.append(_controller(tmp_path / "a", cluster, *bug, heartbeat_timeout_ms=LONG_TIMEOUT_MS))
        boot = Driver(procs[0].port)

        async def setup():
            c = await ControllerClient.connect("127.0.0.1", procs[0].port)
            for broker in (1, 2):
                boot.note("broker-a", await c.register("broker-a", broker))
            await c.close()
        asyncio.run(setup())
        procs.append(_controller(tmp_path / "b", cluster, *bug, heartbeat_timeout_ms=LONG_TIMEOUT_MS))
        _, altered, stale = asyncio.run(_two_controllers(procs[0].port, procs[1].port))
        assert altered["code"] == "SUCCESS", altered
        boot.note("broker-a", altered)
        if stale["code"] != "SUCCESS":
            assert procs[1].popen.wait(timeout=20) == 3
        return lost_decisions(boot.acked, stored_states(cluster)) + history_went_back(cluster), stale, procs[1]
    finally:
        for p in procs:
            p.stop()
        cluster.stop()


def test_a_second_controller_cannot_overwrite_a_decision(tmp_path):
    lost, stale, b = _stale_controller_overwrites(tmp_path)
    assert lost == []
    assert stale["code"] == "CONTROLLER_METADATA_NOT_DURABLE" and "changed under this controller" in stale["reason"]
    assert "another controller writes these broker groups" in b.output()


def test_bug_etcd_no_compare_is_caught(tmp_path):
    lost, stale, _ = _stale_controller_overwrites(tmp_path, "--bug", "BugEtcdNoCompare")
    assert stale["code"] == "SUCCESS"
    assert lost and "etcd holds" in lost[0], lost
    assert any("then" in p for p in lost), f"the key's history goes back in epochs: {lost}"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return zygote.run(["controller", "--port", "0", *args], cwd=Path.cwd(), timeout=60)   # a process (cli/tests/zygote.py)


def test_etcd_flags_and_an_unreachable_etcd(tmp_path):
    etcd_binary()
    for args, words in [(("--store", "etcd"), "needs --etcd-endpoints"),
                        (("--store", "etcd", "--etcd-endpoints", "localhost"), "'localhost': expected host:port"),
                        (("--etcd-endpoints", "127.0.0.1:2379"), "only with --store etcd"),
                        (("--bug", "BugEtcdNoCompare"), "needs --store etcd"),
                        (("--store", "etcd", "--etcd-endpoints", "a:1,a:1"), "listed twice")]:
        r = _cli("--dir", str(tmp_path), *args)
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r)
    port = free_ports(1)[0]
    r = _cli("--dir", str(tmp_path), "--store", "etcd", "--etcd-endpoints", f"127.0.0.1:{port}",
             "--etcd-timeout-ms", "500")
    assert r.returncode == 3 and f"127.0.0.1:{port}" in r.stderr and "no majority reachable" in r.stderr, r
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
