"""A client of the controller (a broker's side of RocketMQ's
BrokerOuterAPI controller calls, or an admin): one TCP connection, requests
multiplexed by id, on asyncio.

    client = await ControllerClient.connect("127.0.0.1", port)
    await client.register("broker-a", 1)
    await client.heartbeat("broker-a", 1, max_offset=4096)
    info = await client.get_replica_info("broker-a")
    await client.alter("broker-a", 1, info["master_epoch"], info["sss_epoch"], {1, 2})

Every call returns the reply as a dict (id, code, reason, info).  An ERROR
frame from the controller, or a lost connection, fails every pending call
with ``ControllerClientError`` naming it.
"""

from __future__ import annotations

import asyncio
import itertools

from reference.failover import wire
from reference.frames import FrameDecoder, FrameError
from reference.real.peerauth import REFUSAL, AuthError, AuthFrame, ClientAuth, auth_aware

MAX_PENDING_CALLS = 1 << 16


class ControllerClientError(Exception):
    pass


class PeerAuthError(ControllerClientError):
    """The controller and this client do not share a secret (or one of them has none)."""


class _Protocol(asyncio.Protocol):
    """Bytes from the socket straight into the client (no reader task, no stream buffer)."""

    def __init__(self) -> None:
        self.client: ControllerClient | None = None

    def data_received(self, data: bytes) -> None:
        self.client._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client._fail(f"connection failed: {exc}" if exc else "connection closed by the controller")


class ControllerClient:
    def __init__(self, transport: asyncio.Transport, protocol: _Protocol, secret: bytes | None = None) -> None:
        self.transport = transport
        protocol.client = self
        self.decoder = FrameDecoder(wire.MAX_FRAME_BYTES, auth_aware(wire.decode))
        self.pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self.error: str | None = None
        self._loop = asyncio.get_running_loop()
        self.auth = ClientAuth(secret, "controller") if secret is not None else None
        self._authenticated: asyncio.Future = self._loop.create_future()
        if self.auth is None:
            self._authenticated.set_result(None)
        else:
            transport.write(self.auth.hello())

    @classmethod
    async def connect(cls, host: str, port: int, secret: bytes | None = None) -> ControllerClient:
        """Connected, and authenticated when ``secret`` is given (the controller's --peer-secret-file)."""
        transport, protocol = await asyncio.get_running_loop().create_connection(_Protocol, host, port)
        client = cls(transport, protocol, secret)
        try:
            await client._authenticated
        except ControllerClientError:
            transport.close()
            raise
        return client

    def _on_data(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
        except FrameError as err:
            self._fail(f"malformed frame from the controller: {err}")
            self.transport.close()
            return
        for frame in frames:
            if isinstance(frame, AuthFrame):
                if self.auth is None or self.auth.done:
                    self._fail(f"the controller sent an authentication frame ({frame.kind}) out of place")
                    self.transport.close()
                    return
                try:
                    self.transport.write(self.auth.receive(frame))
                except AuthError as err:
                    self._fail(str(err))
                    self.transport.close()
                    return
                self._authenticated.set_result(None)
                continue
            if isinstance(frame, wire.ErrorFrame):
                self._fail(f"controller error: {frame.error}")
                return
            fut = self.pending.pop(frame.get("id"), None) if isinstance(frame, dict) else None
            if fut is not None and not fut.done():
                fut.set_result(frame)

    def _fail(self, why: str) -> None:
        if self.error is None:
            self.error = why
        kind = PeerAuthError if REFUSAL in self.error else ControllerClientError
        if not self._authenticated.done():
            self._authenticated.set_exception(kind(self.error))
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(kind(self.error))
        self.pending.clear()

    async def call(self, op: str, group: str, **fields) -> dict:
        if self.error is not None:
            raise ControllerClientError(self.error)
        if len(self.pending) >= MAX_PENDING_CALLS:
            # A controller that answers nothing must not grow its clients without bound either.
            raise ControllerClientError(f"{len(self.pending)} calls wait for the controller's answer "
                                        f"(MAX_PENDING_CALLS = {MAX_PENDING_CALLS})")
        rid = next(self._ids)
        fut = self.pending[rid] = self._loop.create_future()
        self.transport.write(wire.encode_request(rid, op, group, **fields))
        try:
            return await fut
        finally:
            self.pending.pop(rid, None)       # a call cancelled (a timeout) leaves nothing behind

    def send_raw(self, data: bytes) -> None:
        """Bytes as they are (tests: a garbage frame)."""
        self.transport.write(data)

    async def register(self, group: str, broker_id: int, **extra) -> dict:
        return await self.call("register", group, broker_id=broker_id, **extra)

    async def heartbeat(self, group: str, broker_id: int, **extra) -> dict:
        return await self.call("heartbeat", group, broker_id=broker_id, **extra)

    async def alter(self, group: str, master_id: int, master_epoch: int, sss_epoch: int, new_sync_state_set) -> dict:
        return await self.call("alter", group, master_id=master_id, master_epoch=master_epoch, sss_epoch=sss_epoch,
                               sync_state_set=sorted(new_sync_state_set))

    async def elect(self, group: str) -> dict:
        return await self.call("elect", group)

    async def get_replica_info(self, group: str) -> dict:
        return await self.call("info", group)

    async def close(self) -> None:
        self.transport.close()
        self._fail("closed")
