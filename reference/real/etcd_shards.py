"""The etcd side of a replicated controller (reference/real/controller_cluster.py):
its lease and member key, the survey of members and shard keys, taking and
giving back a shard, reading a shard's groups, a group read for
GetReplicaInfo, the fenced commits (reference/failover/shards.py decides
what they compare), and requests forwarded to another controller.

Two asyncio threads, each with its own etcd clients: the lease thread (the
lease, keep-alives, surveys), so a flood of forwards and commits never
queues a keep-alive behind it and costs the controller its shards; and the
I/O thread (takes, commits, reads, forwards).  The runtime's loop thread
calls ``submit(coro, done, failed, call_soon[, lease=True])`` and hears back
through ``call_soon``.  Many requests are in flight at once (one gRPC channel
multiplexes them): commits of different shards, reads and forwards do not
wait for each other.

Reads are linearizable (etcd's default: ReadIndex, so the member the
controller talks to serves them, leader or follower).  The first endpoint
is this controller's own member; a request that fails moves to the next
one and is retried until ``timeout_ms`` has passed (``StoreUnavailable``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import aetcd

from reference.failover import shards as sh
from reference.real.controller_client import ControllerClient, ControllerClientError
from reference.real.netroute import route   # a chaos run's link to the owner, if it has one
from reference.real.etcd_store import EtcdEndpoints

MAX_PEER_CLIENTS = sh.MAX_MEMBERS
FORWARD_TIMEOUT_S = 5.0


class ClusterMismatch(ValueError):
    """This controller's --shards or --controller-id cannot join the ones etcd already has."""


class EtcdShards(EtcdEndpoints):
    def __init__(self, endpoints: list[tuple[str, int]], me: str, address: str, lease_ttl_s: int,
                 timeout_ms: int, secret: bytes | None = None, shards: int = sh.SHARDS_DEFAULT) -> None:
        super().__init__(endpoints, timeout_ms)
        assert lease_ttl_s >= 1, lease_ttl_s
        self.me, self.address = me, address
        self.lease_ttl_s, self.secret, self.shards = lease_ttl_s, secret, shards
        self._connecting: dict[str, asyncio.Future] = {}
        self.peers: dict[str, ControllerClient] = {}
        self.lease_id: int | None = None
        self.lease_ok_s = 0.0              # monotonic time the last keep-alive etcd answered was sent
        self.txns = self.forwards = 0
        self.lease_endpoints = EtcdEndpoints(endpoints, timeout_ms)    # the lease thread's own clients
        self._aloop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._aloop.run_forever, name="etcd-shards", daemon=True)
        self._thread.start()
        self._lease_aloop = asyncio.new_event_loop()
        self._lease_thread = threading.Thread(target=self._lease_aloop.run_forever, name="etcd-lease", daemon=True)
        self._lease_thread.start()

    # ------------------------------------------------------------------ from the loop thread

    def submit(self, coro, done: Callable, failed: Callable, call_soon: Callable, lease: bool = False) -> None:
        fut = asyncio.run_coroutine_threadsafe(coro, self._lease_aloop if lease else self._aloop)

        def finished(f) -> None:
            err = f.exception()
            if err is None:
                call_soon(done, f.result())
            else:
                call_soon(failed, err if isinstance(err, OSError) else OSError(f"{type(err).__name__}: {err}"))
        fut.add_done_callback(finished)

    def wait(self, coro, timeout_s: float | None = None, lease: bool = False):
        limit = timeout_s if timeout_s is not None else self.timeout_ms / 1000 * 2 + 5
        return asyncio.run_coroutine_threadsafe(coro, self._lease_aloop if lease else self._aloop).result(limit)

    def close(self) -> None:
        async def close_lease():
            if self.lease_id is not None:       # our shards go free at once, not after the TTL
                try:
                    await asyncio.wait_for((await self.lease_endpoints._client()).revoke_lease(self.lease_id), 2)
                except Exception:      # noqa: BLE001 — etcd gone: the lease expires by itself
                    pass
            await _close_clients(self.lease_endpoints)

        async def close_io():
            await _close_clients(self)
            for p in self.peers.values():
                await p.close()
        for coro, lease in ((close_lease(), True), (close_io(), False)):
            try:
                self.wait(coro, timeout_s=5, lease=lease)
            except Exception:              # noqa: BLE001 — closing must not raise
                pass
        for loop, thread in ((self._aloop, self._thread), (self._lease_aloop, self._lease_thread)):
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=3)

    def stats(self) -> str:
        return (f"etcd_txns={self.txns} etcd_retries={self.retries + self.lease_endpoints.retries} "
                f"forwards={self.forwards}")

    # ------------------------------------------------------------------ on the lease thread

    async def join(self) -> None:
        """The shard count etcd records (the first controller's), a lease, and our member key on it,
        created only if no live controller has our id (a restarted one waits for its old lease)."""
        key, config = sh.CONFIG.encode(), f"shards={self.shards}".encode()

        async def agree(c: aetcd.Client) -> bytes:
            t = c.transactions
            ok, got = await c.transaction(compare=[t.create(key) == 0], success=[t.put(key, config)],
                                          failure=[t.get(key)])
            return config if ok else got[0][0][0]
        pool = self.lease_endpoints
        held = await pool._with_retry("read the controllers' shard count", agree)
        if held != config:
            raise ClusterMismatch(f"--shards {self.shards}: the controllers of {self.where} use "
                                  f"{held.decode(errors='replace')!r}; every controller must use the same")

        async def grant(c: aetcd.Client) -> bool:
            started = time.monotonic()
            lease = await c.lease(self.lease_ttl_s)
            t, mkey = c.transactions, sh.member_key(self.me)
            ok, _ = await c.transaction(compare=[t.create(mkey) == 0],
                                        success=[t.put(mkey, sh.owner_value(self.me, self.address), lease=lease.id)],
                                        failure=[])
            if not ok:
                await c.revoke_lease(lease.id)
                return False
            self.lease_id, self.lease_ok_s = lease.id, started
            return True
        deadline = time.monotonic() + self.lease_ttl_s + self.timeout_ms / 1000
        while not await pool._with_retry("grant this controller's lease", grant):
            if time.monotonic() > deadline:
                raise ClusterMismatch(f"--controller-id {self.me}: a live controller of {self.where} has this id")
            await asyncio.sleep(0.2)

    async def keep_alive(self) -> bool:
        """One keep-alive; False: etcd says the lease is gone (expired while we could not reach it)."""
        async def refresh(c: aetcd.Client) -> bool:
            sent = time.monotonic()          # this attempt's, not the first's: a retry renews from its own send
            reply = await c.refresh_lease(self.lease_id)
            if reply is not None and reply.TTL > 0:
                self.lease_ok_s = max(self.lease_ok_s, sent)
                return True
            return False
        return await self.lease_endpoints._with_retry("keep the lease alive", refresh)

    async def survey(self) -> sh.Survey:
        async def read(c: aetcd.Client) -> sh.Survey:
            members = {}
            for kv in await c.get_prefix(sh.MEMBERS.encode()):
                parsed = sh.parse_owner(kv.value)
                if parsed is not None and len(members) < sh.MAX_MEMBERS:
                    members[parsed[0]] = parsed[1]
            owners = {}
            for kv in await c.get_prefix(sh.SHARDS.encode()):
                parsed = sh.parse_owner(kv.value)
                tail = kv.key[len(sh.SHARDS):]
                if parsed is not None and tail.isascii() and tail.isdigit() and len(tail) <= 4:
                    owners[int(tail)] = (parsed[0], kv.create_revision)
            return sh.Survey(members, owners)
        return await self.lease_endpoints._with_retry("read the members and shards", read)

    # ------------------------------------------------------------------ on the I/O thread

    async def take(self, shard: int) -> tuple[int, list[tuple[bytes, bytes, int]]] | None:
        """Put our shard key if absent, then read the shard's keys: (create_revision, [(key, value,
        mod_revision)]), or None if another took it first."""
        key = sh.shard_key(shard)

        async def txn(c: aetcd.Client):
            t = c.transactions
            ok, responses = await c.transaction(
                compare=[t.create(key) == 0],
                success=[t.put(key, sh.owner_value(self.me, self.address), lease=self.lease_id)], failure=[])
            self.txns += 1
            if not ok:
                return None
            token = responses[0].response_put.header.revision
            kvs = [(kv.key, kv.value, kv.mod_revision) for kv in await c.get_prefix(sh.shard_prefix(shard))]
            return token, kvs
        return await self._with_retry(f"take shard {shard}", txn)

    async def give_back(self, shard: int, token: int) -> None:
        key = sh.shard_key(shard)

        async def txn(c: aetcd.Client) -> None:
            t = c.transactions
            await c.transaction(compare=[t.create(key) == token], success=[t.delete(key)], failure=[])
            self.txns += 1
        await self._with_retry(f"give back shard {shard}", txn)

    async def read_group(self, shard: int, group: str) -> list[tuple[bytes, bytes]]:
        prefix = sh.group_prefix(shard, group)
        return await self._with_retry(f"read group {group!r}", lambda c: self._range(c, prefix))

    @staticmethod
    async def _range(c: aetcd.Client, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return [(kv.key, kv.value) for kv in await c.get_prefix(prefix)]

    async def commit(self, commit: sh.Commit):
        """("ok", revision) or ("failed", shard owner now or None, {key: (value, mod_revision)})."""
        skey = sh.shard_key(commit.shard)

        async def txn(c: aetcd.Client):
            t = c.transactions
            compare = [t.mod(p.key) == p.expect_mod_revision for p in commit.puts if p.expect_mod_revision is not None]
            if commit.token:
                compare.insert(0, t.create(skey) == commit.token)
            failure = [t.get(skey), *(t.get(p.key) for p in commit.puts if p.expect_mod_revision is not None)]
            ok, responses = await c.transaction(compare=compare, success=[t.put(p.key, p.value) for p in commit.puts],
                                                failure=failure)
            self.txns += 1
            if ok:
                return "ok", responses[0].response_put.header.revision
            owner, held = None, {}
            for got in responses:
                for value, meta in got:
                    if meta.key == skey:
                        parsed = sh.parse_owner(value)
                        owner = (parsed[0], meta.create_revision) if parsed else None
                    else:
                        held[meta.key] = (value, meta.mod_revision)
            return "failed", owner, held
        return await self._with_retry(f"commit {len(commit.puts)} keys of shard {commit.shard}", txn)

    def _connected(self, address: str, fut: asyncio.Future) -> None:
        self._connecting.pop(address, None)
        if not fut.cancelled() and fut.exception() is None:
            old = self.peers.get(address)
            self.peers[address] = fut.result()
            if old is not None and old is not fut.result():
                asyncio.ensure_future(old.close())

    async def forward(self, address: str, op: str, group: str, fields: dict) -> dict:
        """The request to the shard's owner (marked forwarded: it does not forward again)."""
        peer = self.peers.get(address)
        if peer is None or peer.error is not None:
            # one connection per owner: concurrent forwards to a new one wait for the same connect
            connecting = self._connecting.get(address)
            if connecting is None:
                if len(self.peers) >= MAX_PEER_CLIENTS:
                    for a in [a for a, p in self.peers.items() if p.error is not None]:
                        del self.peers[a]
                connecting = self._connecting[address] = asyncio.ensure_future(
                    asyncio.wait_for(ControllerClient.connect(*route(sh.split_address(address)), self.secret),
                                     FORWARD_TIMEOUT_S))
                connecting.add_done_callback(lambda f, a=address: self._connected(a, f))
            try:
                peer = await asyncio.shield(connecting)
            except (OSError, ControllerClientError, asyncio.TimeoutError) as err:
                raise OSError(f"forward to {address}: {type(err).__name__}: {err}") from None
        self.forwards += 1
        try:
            return await asyncio.wait_for(peer.call(op, group, forwarded=1, **fields), FORWARD_TIMEOUT_S)
        except ControllerClientError as err:
            raise OSError(f"forward to {address}: {err}") from None


async def _close_clients(pool: EtcdEndpoints) -> None:
    for c in [*pool.clients.values()]:
        try:
            await asyncio.wait_for(c.close(), 1)
        except Exception:      # noqa: BLE001 — a dead member's channel may fail to close
            pass
