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

MAX_PENDING_CALLS = 1 << 16


class ControllerClientError(Exception):
    pass


class ControllerClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder(wire.MAX_FRAME_BYTES, wire.decode)
        self.pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self.error: str | None = None
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, host: str, port: int) -> ControllerClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def _read(self) -> None:
        try:
            while data := await self.reader.read(1 << 16):
                for frame in self.decoder.feed(data):
                    if isinstance(frame, wire.ErrorFrame):
                        self._fail(f"controller error: {frame.error}")
                        return
                    fut = self.pending.pop(frame.get("id"), None) if isinstance(frame, dict) else None
                    if fut is not None and not fut.done():
                        fut.set_result(frame)
            self._fail("connection closed by the controller")
        except (OSError, FrameError) as err:
            self._fail(f"connection failed: {err}")

    def _fail(self, why: str) -> None:
        self.error = why
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(ControllerClientError(why))
        self.pending.clear()

    async def call(self, op: str, group: str, **fields) -> dict:
        if self.error is not None:
            raise ControllerClientError(self.error)
        assert len(self.pending) < MAX_PENDING_CALLS, "pending calls unbounded"
        rid = next(self._ids)
        fut = self.pending[rid] = asyncio.get_running_loop().create_future()
        self.writer.write(wire.encode_request(rid, op, group, **fields))
        return await fut

    def send_raw(self, data: bytes) -> None:
        """Bytes as they are (tests: a garbage frame)."""
        self.writer.write(data)

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
        self._task.cancel()
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (OSError, asyncio.CancelledError):
            pass
