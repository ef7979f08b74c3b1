"""The controller's metadata in etcd: one key per broker group, written by
compare-and-set transactions (the store behind ``ackorder controller
--store etcd``; the interface is reference/real/metadata_store.py).

Key ``/ackorder/controller/<group>``, value the group's last
MetadataRecord in the file's framing (reference/failover/metadata.py:
magic, length, CRC32, payload), so a value is checked exactly like a file
record.  The store remembers, per group, the key's ``mod_revision`` it last
read (recovery) or wrote.  A sync writes the staged records, the last one
per group, as transactions of at most MAX_TXN_GROUPS keys::

    if mod_revision(k) == known(k) for every k: put every k   (else: nothing)

Durability: the transaction returned, i.e. etcd committed it through Raft
on a majority of its members, each of which fsync'd its WAL first.

A failed compare means someone else wrote a key since we read it.  Two
cases are told apart by re-reading the keys: every key holds exactly the
value we tried to write — our own earlier attempt committed although its
answer was lost (a member died mid-request) — and the sync succeeds; any
other value means a second controller is writing the same groups.  Then
the sync fails with ``StoreConflict`` and the controller stops (exit 3)
instead of re-reading and going on: its in-memory state and its held
replies were decided on metadata that is no longer current, and adopting
the other writer's state would hide a split brain that an operator must
resolve (run one controller per etcd prefix).

Endpoints: one client at a time; a request that fails (connection
refused, a member without a leader, a timeout) moves to the next endpoint
and is retried until ``timeout_ms`` has passed since the sync began; then
``StoreUnavailable`` names the endpoints and the last error (no majority
reachable) and the controller stops with exit 3.

The client is aetcd (asyncio); it runs on its own thread's event loop,
and the store's blocking calls wait for it there.

Bug switch (this layer only: the spec's controller writes to a single
store and has no such step): ``BugEtcdNoCompare`` puts without the
revision compare, so a stale controller silently overwrites a decision
another controller already acknowledged.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import aetcd
import aetcd.exceptions

from reference.failover.effects import MetadataRecord
from reference.failover.metadata import encode, latest, scan
from reference.real.metadata_store import (
    ETCD_BUG_NAMES,
    ETCD_TIMEOUT_MS_DEFAULT,
    MAX_ENDPOINTS,
    StoreRecovery,
)

KEY_PREFIX = "/ackorder/controller/"
MAX_TXN_GROUPS = 64                 # etcd's --max-txn-ops defaults to 128; two ops per group at most
ATTEMPT_TIMEOUT_MS = 1_000          # one request to one member; a member without a leader answers late
RETRY_PAUSE_MS = 50


class StoreUnavailable(OSError):
    """No majority of etcd answered in time."""


class StoreConflict(OSError):
    """A key changed under us: another controller writes the same groups."""


class StoreCorrupt(OSError):
    """A value in etcd is not a well-formed record of its key's group."""


def group_key(group: str) -> bytes:
    return (KEY_PREFIX + group).encode()


class EtcdEndpoints:
    """aetcd clients of the members, one in use at a time: a request that fails moves to the next
    member and is retried until ``timeout_ms`` has passed (then StoreUnavailable).  Used on one
    asyncio thread (EtcdStore's, reference/real/etcd_shards.py's)."""

    def __init__(self, endpoints: list[tuple[str, int]], timeout_ms: int) -> None:
        assert endpoints and len(endpoints) <= MAX_ENDPOINTS, endpoints
        assert timeout_ms > 0, timeout_ms
        self.endpoints = list(endpoints)
        self.where = "etcd " + ",".join(f"{h}:{p}" for h, p in endpoints)
        self.timeout_ms = timeout_ms
        self.current = 0                           # index of the endpoint in use
        self.clients: dict[int, aetcd.Client] = {}
        self.retries = 0

    async def _client(self) -> aetcd.Client:
        c = self.clients.get(self.current)
        if c is None:
            host, port = self.endpoints[self.current]
            c = self.clients[self.current] = aetcd.Client(host, port, timeout=ATTEMPT_TIMEOUT_MS / 1000)
        return c

    async def _with_retry(self, what: str, op):
        """``op(client)`` on the current endpoint; on an etcd or connection error, the next
        endpoint, until timeout_ms has passed.  Concurrent requests that fail together move on
        once, not once each."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        last = ""
        for _ in range(1_000_000):
            at = self.current
            try:
                return await op(await self._client())
            except (TimeoutError, aetcd.exceptions.ClientError, OSError) as err:
                if isinstance(err, (StoreConflict, StoreCorrupt)):
                    raise
                host, port = self.endpoints[at]
                last = f"{host}:{port}: {type(err).__name__}: {str(err).strip() or 'no detail'}"
            self.retries += 1
            if self.current == at:
                self.current = (at + 1) % len(self.endpoints)
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(RETRY_PAUSE_MS / 1000)
        raise StoreUnavailable(f"{self.where}: could not {what} within {self.timeout_ms} ms "
                               f"(no majority reachable?); last error {last}")


class EtcdStore(EtcdEndpoints):
    def __init__(self, endpoints: list[tuple[str, int]], timeout_ms: int = ETCD_TIMEOUT_MS_DEFAULT,
                 bugs: frozenset[str] = frozenset()) -> None:
        super().__init__(endpoints, timeout_ms)
        assert set(bugs) <= set(ETCD_BUG_NAMES), bugs
        self.bugs = frozenset(bugs)
        self.revisions: dict[str, int] = {}        # group → mod_revision last read or written (worker thread)
        self.staged: list[MetadataRecord] = []     # loop thread
        self.txns = self.reconciled = 0
        self._aloop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._aloop.run_forever, name="etcd-client", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the store interface

    def recover(self) -> StoreRecovery:
        kvs = self._wait(self._with_retry("read the metadata", self._read_prefix))
        records = []
        for kv in kvs:
            key = kv.key.decode(errors="replace")
            s = scan(kv.value, f"etcd key {key}")
            if s.problem is not None or len(s.records) != 1:
                raise StoreCorrupt(s.problem or f"etcd key {key}: holds {len(s.records)} records, not 1")
            r = s.records[0]
            if group_key(r.group) != kv.key:
                raise StoreCorrupt(f"etcd key {key}: holds the record of group {r.group!r}")
            self.revisions[r.group] = kv.mod_revision
            records.append(r)
        return StoreRecovery(tuple(records), f"recovered {len(records)} broker groups from {self.where} "
                                             f"(keys {KEY_PREFIX}*)")

    def stage(self, record: MetadataRecord) -> None:
        self.staged.append(record)

    def sync_job(self) -> Callable[[], None]:
        batch, self.staged = latest(self.staged), []
        return lambda: self._wait(self._commit(batch))

    def close(self) -> None:
        async def close_all():
            for c in self.clients.values():
                try:
                    await asyncio.wait_for(c.close(), 1)
                except Exception:          # noqa: BLE001 — closing a dead member's channel may fail
                    pass
        try:
            self._wait(close_all(), timeout_s=3)
        finally:
            self._aloop.call_soon_threadsafe(self._aloop.stop)
            self._thread.join(timeout=3)

    def stats(self) -> str:
        return f"etcd_txns={self.txns} etcd_retries={self.retries} etcd_reconciled={self.reconciled}"

    # ------------------------------------------------------------------ on the client thread

    def _wait(self, coro, timeout_s: float | None = None):
        limit = timeout_s if timeout_s is not None else self.timeout_ms / 1000 * 2 + 5
        return asyncio.run_coroutine_threadsafe(coro, self._aloop).result(limit)

    async def _read_prefix(self, client: aetcd.Client) -> list:
        return list(await client.get_prefix(KEY_PREFIX.encode()))

    async def _commit(self, batch: list[MetadataRecord]) -> None:
        for at in range(0, len(batch), MAX_TXN_GROUPS):
            chunk = batch[at: at + MAX_TXN_GROUPS]
            await self._with_retry(f"commit {len(chunk)} records", lambda c, chunk=chunk: self._txn(c, chunk))

    async def _txn(self, client: aetcd.Client, chunk: list[MetadataRecord]) -> None:
        t = client.transactions
        compare = [] if "BugEtcdNoCompare" in self.bugs else \
            [t.mod(group_key(r.group)) == self.revisions.get(r.group, 0) for r in chunk]
        values = [encode(r) for r in chunk]
        ok, responses = await client.transaction(
            compare=compare, success=[t.put(group_key(r.group), v) for r, v in zip(chunk, values)], failure=[])
        self.txns += 1
        if ok:
            revision = responses[0].response_put.header.revision
            for r in chunk:
                self.revisions[r.group] = revision
            return
        await self._reconcile(client, chunk, values)

    async def _reconcile(self, client: aetcd.Client, chunk: list[MetadataRecord], values: list[bytes]) -> None:
        """The compare failed: ours after all (an earlier attempt committed), or a second writer."""
        for r, v in zip(chunk, values):
            kv = await client.get(group_key(r.group))
            held = "nothing" if kv is None else f"mod_revision {kv.mod_revision}"
            if kv is None or kv.value != v:
                s = scan(kv.value) if kv is not None else None
                if s is not None and s.records:
                    o = s.records[0]
                    held += f" (masterId {o.master_id}, masterEpoch {o.master_epoch}, sssEpoch {o.sss_epoch})"
                raise StoreConflict(f"{self.where}: key {group_key(r.group).decode()} changed under this "
                                    f"controller: expected mod_revision {self.revisions.get(r.group, 0)}, "
                                    f"etcd holds {held}; another controller writes these broker groups")
            self.revisions[r.group] = kv.mod_revision
        self.reconciled += 1
