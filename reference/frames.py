"""Wire frames between producers, the master and the slaves.

``length:u32 | type:u8 | payload | crc32:u32`` with ``length`` counting the
type byte, the payload and the checksum, and the CRC-32 taken over the type
byte and the payload.  RocketMQ's HA protocol has no checksum of its own and
relies on TCP's; the CRC stands in for it, so that a bit flipped on the wire
(the simulator's ``corrupt`` fault) is a malformed frame and never a valid
frame with another name, offset or record count in it.  ``FrameDecoder`` is
incremental (feed it whatever the socket gave) and raises ``FrameError``
naming the problem on a malformed frame: the connection that sent it is
closed, nothing else is affected.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable

import attrs

MAX_FRAME_BYTES_DEFAULT = 8 * 1024 * 1024
_PREFIX = struct.Struct(">IB")
_CRC = struct.Struct(">I")
_MIN_LENGTH = 1 + _CRC.size          # the type byte and the checksum


class FrameType(enum.IntEnum):
    PUT = 1         # producer -> master: req_id u64, key u64, body
    RESPONSE = 2    # master -> producer: req_id u64, status u8, next_offset u64
    HANDSHAKE = 3   # slave -> master: offset u64, records u64, chain 16 bytes, name utf-8
    DATA = 4        # master -> slave: offset u64, epoch u64, epoch_start u64, confirm u64, log bytes
    ACK = 5         # slave -> master: offset u64, records u64
    REFUSE = 6      # master -> slave: reason utf-8, then the master closes
    EPOCH_QUERY = 7  # a following slave -> master, first on its HA connection: (empty) your epoch entries?
    EPOCH_REPLY = 8  # master -> that slave: log_end u64, confirm u64, then (epoch u64, start_offset u64)*
    READ = 9        # consumer -> master (producer port): req_id u64, offset u64, max_bytes u32
    READ_REPLY = 10  # master -> consumer: req_id u64, confirm_offset u64, offset u64, log bytes below confirm


class FrameError(ValueError):
    """A malformed frame; the message says what was wrong."""


@attrs.frozen
class Put:
    req_id: int
    key: int
    body: bytes


@attrs.frozen
class Response:
    req_id: int
    status: int
    next_offset: int


@attrs.frozen
class Handshake:
    offset: int
    chain: bytes
    name: str
    records: int = 0


@attrs.frozen
class Data:
    """A TRANSFER batch: its bytes and its header (AutoSwitchHAConnection's transfer header):
    the epoch entry the batch lies in (a batch never spans two epochs) and the master's
    confirmOffset.  A master outside failover sends epoch 0 from 0."""
    offset: int
    data: bytes
    epoch: int = 0
    epoch_start: int = 0
    confirm_offset: int = 0


@attrs.frozen
class Ack:
    offset: int
    records: int = 0


@attrs.frozen
class Refuse:
    reason: str


@attrs.frozen
class EpochQuery:
    """A following slave's first frame on its HA connection: the master's epoch entries,
    please (AutoSwitchHAClient's HANDSHAKE state); it cuts its log against them before its
    HANDSHAKE (reference/failover/follower.py)."""


@attrs.frozen
class EpochReply:
    log_end_offset: int
    confirm_offset: int
    entries: tuple[tuple[int, int], ...]


@attrs.frozen
class Read:
    """A consumer's pull: log bytes from ``offset``, at most ``max_bytes``."""
    req_id: int
    offset: int
    max_bytes: int


@attrs.frozen
class ReadReply:
    """The bytes [offset, offset + len(data)), never past ``confirm_offset`` (reputEndOffset)."""
    req_id: int
    confirm_offset: int
    offset: int
    data: bytes


MAX_EPOCH_REPLY_ENTRIES = 65_536
MAX_READ_BYTES = 1 << 20
_READ = struct.Struct(">QQI")
_READ_REPLY = struct.Struct(">QQQ")
_DATA = struct.Struct(">QQQQ")
_U64 = struct.Struct(">Q")
_ENTRY = struct.Struct(">QQ")
_PUT = struct.Struct(">QQ")
_RESPONSE = struct.Struct(">QBQ")
_RESPONSE_HEAD = bytes([2])                                       # FrameType.RESPONSE
_RESPONSE_PREFIX = _PREFIX.pack(1 + _RESPONSE.size + _CRC.size, 2)


def encode(frame) -> bytes:
    if isinstance(frame, Put):
        kind, payload = FrameType.PUT, _PUT.pack(frame.req_id, frame.key) + frame.body
    elif isinstance(frame, Response):
        kind, payload = FrameType.RESPONSE, _RESPONSE.pack(frame.req_id, frame.status, frame.next_offset)
    elif isinstance(frame, Handshake):
        assert len(frame.chain) == 16
        kind, payload = (FrameType.HANDSHAKE,
                         _U64.pack(frame.offset) + _U64.pack(frame.records) + frame.chain + frame.name.encode())
    elif isinstance(frame, Data):
        kind, payload = (FrameType.DATA, _DATA.pack(frame.offset, frame.epoch, frame.epoch_start, frame.confirm_offset)
                         + frame.data)
    elif isinstance(frame, Ack):
        kind, payload = FrameType.ACK, _U64.pack(frame.offset) + _U64.pack(frame.records)
    elif isinstance(frame, Refuse):
        kind, payload = FrameType.REFUSE, frame.reason.encode()
    elif isinstance(frame, Read):
        kind, payload = FrameType.READ, _READ.pack(frame.req_id, frame.offset, frame.max_bytes)
    elif isinstance(frame, ReadReply):
        kind, payload = FrameType.READ_REPLY, _READ_REPLY.pack(frame.req_id, frame.confirm_offset, frame.offset) \
            + frame.data
    elif isinstance(frame, EpochQuery):
        kind, payload = FrameType.EPOCH_QUERY, b""
    elif isinstance(frame, EpochReply):
        assert len(frame.entries) <= MAX_EPOCH_REPLY_ENTRIES
        kind, payload = (FrameType.EPOCH_REPLY, _ENTRY.pack(frame.log_end_offset, frame.confirm_offset)
                         + b"".join(_ENTRY.pack(e, o) for e, o in frame.entries))
    else:
        raise TypeError(f"not a frame: {frame!r}")
    return frame_bytes(kind, payload)


def frame_bytes(kind: int, payload: bytes) -> bytes:
    """``length | type | payload | crc32``: the framing every protocol of the project uses."""
    body = bytes([kind]) + payload
    return _PREFIX.pack(len(body) + _CRC.size, kind) + payload + _CRC.pack(zlib.crc32(body))


def encode_response(req_id: int, status: int, next_offset: int) -> bytes:
    """``encode(Response(...))`` without the object: the master sends one per message."""
    body = _RESPONSE_HEAD + _RESPONSE.pack(req_id, status, next_offset)
    return _RESPONSE_PREFIX + body[1:] + _CRC.pack(zlib.crc32(body))


def _decode(kind: int, payload: bytes):
    try:
        t = FrameType(kind)
    except ValueError:
        raise FrameError(f"unknown frame type {kind}") from None
    need = {FrameType.PUT: 16, FrameType.RESPONSE: 17, FrameType.HANDSHAKE: 32,
            FrameType.DATA: 32, FrameType.ACK: 16, FrameType.REFUSE: 0, FrameType.EPOCH_QUERY: 0,
            FrameType.EPOCH_REPLY: 16, FrameType.READ: 20, FrameType.READ_REPLY: 24}[t]
    if len(payload) < need:
        raise FrameError(f"{t.name} frame has {len(payload)} payload bytes, needs at least {need}")
    if t is FrameType.PUT:
        req_id, key = _PUT.unpack_from(payload)
        return Put(req_id, key, payload[16:])
    if t is FrameType.RESPONSE:
        if len(payload) != 17:
            raise FrameError(f"RESPONSE frame has {len(payload)} payload bytes, expected 17")
        return Response(*_RESPONSE.unpack(payload))
    if t is FrameType.HANDSHAKE:
        try:
            name = payload[32:].decode()
        except UnicodeDecodeError:
            raise FrameError("HANDSHAKE frame: replica name is not UTF-8") from None
        offset, records = _U64.unpack_from(payload)[0], _U64.unpack_from(payload, 8)[0]
        return Handshake(offset, payload[16:32], name, records)
    if t is FrameType.DATA:
        offset, epoch, epoch_start, confirm = _DATA.unpack_from(payload)
        return Data(offset, payload[32:], epoch, epoch_start, confirm)
    if t is FrameType.ACK:
        if len(payload) != 16:
            raise FrameError(f"ACK frame has {len(payload)} payload bytes, expected 16")
        return Ack(_U64.unpack_from(payload)[0], _U64.unpack_from(payload, 8)[0])
    if t is FrameType.READ:
        if len(payload) != 20:
            raise FrameError(f"READ frame has {len(payload)} payload bytes, expected 20")
        req_id, offset, max_bytes = _READ.unpack(payload)
        if not 0 < max_bytes <= MAX_READ_BYTES:
            raise FrameError(f"READ frame asks for {max_bytes} bytes: 1..{MAX_READ_BYTES}")
        return Read(req_id, offset, max_bytes)
    if t is FrameType.READ_REPLY:
        return ReadReply(*_READ_REPLY.unpack_from(payload), payload[24:])
    if t is FrameType.EPOCH_QUERY:
        if payload:
            raise FrameError(f"EPOCH_QUERY frame has {len(payload)} payload bytes, expected 0")
        return EpochQuery()
    if t is FrameType.EPOCH_REPLY:
        if (len(payload) - 16) % 16 or (len(payload) - 16) // 16 > MAX_EPOCH_REPLY_ENTRIES:
            raise FrameError(f"EPOCH_REPLY frame has {len(payload)} payload bytes: 16 and then up to "
                             f"{MAX_EPOCH_REPLY_ENTRIES} entries of 16")
        end, confirm = _ENTRY.unpack_from(payload)
        return EpochReply(end, confirm, tuple(_ENTRY.unpack_from(payload, i) for i in range(16, len(payload), 16)))
    try:
        return Refuse(payload.decode())
    except UnicodeDecodeError:
        raise FrameError("REFUSE frame: reason is not UTF-8") from None


def decode_frames(data: bytes, max_frame_bytes: int) -> tuple[list, int]:
    """The whole frames at the start of ``data`` and how many bytes they took
    (a partial frame at the end waits for more bytes).

    pre: max_frame_bytes >= 1
    raises: FrameError
    post: 0 <= __return__[1] <= len(data)
    post: b"".join(encode(f) for f in __return__[0]) == data[:__return__[1]]
    post: len(data) - __return__[1] < 5 or len(data) - __return__[1] < 4 + int.from_bytes(data[__return__[1]:__return__[1] + 4], "big")
    """
    return split_frames(data, max_frame_bytes, _decode)


def split_frames(data: bytes, max_frame_bytes: int, decode: Callable[[int, bytes], object]) -> tuple[list, int]:
    """``decode_frames`` for any protocol: ``decode(type byte, payload)`` makes each frame."""
    frames = []
    used = 0
    while len(data) - used >= 5:
        length, kind = _PREFIX.unpack_from(data, used)
        if length < _MIN_LENGTH:
            raise FrameError(f"frame length {length} (a frame has at least its type byte and a checksum)")
        if length > max_frame_bytes:
            raise FrameError(f"frame of {length} bytes exceeds the limit of {max_frame_bytes}")
        if len(data) - used < 4 + length:
            break
        body_end = used + 4 + length - _CRC.size
        body = bytes(data[used + 4: body_end])
        (crc,) = _CRC.unpack_from(data, body_end)
        if crc != zlib.crc32(body):
            raise FrameError(f"frame checksum mismatch ({len(body) - 1} payload bytes, type byte {kind})")
        frames.append(decode(kind, body[1:]))
        used += 4 + length
    return frames, used


class FrameDecoder:
    """Turns a byte stream into frames; one per connection."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES_DEFAULT,
                 decode: Callable[[int, bytes], object] | None = None) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.decode = decode or _decode
        self._buf = bytearray()

    def feed(self, data: bytes) -> list:
        self._buf += data
        frames, used = split_frames(self._buf, self.max_frame_bytes, self.decode)
        del self._buf[:used]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)


decode_frame = _decode       # one frame's (type byte, payload) -> its object, for FrameDecoder's callers
