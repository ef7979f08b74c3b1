"""Frames between brokers (or an admin) and the controller.

The framing is reference/frames.py's (``length | type | payload | crc32``);
the payload is a JSON object.  A REQUEST names its ``op`` (register,
heartbeat, alter, elect, info) and carries the client's ``id``, echoed in
the REPLY.  Anything malformed (not JSON, an unknown op, a field missing or
of the wrong type) is a ``FrameError`` saying which: the server answers
with one ERROR frame naming it and closes that connection only.
"""

from __future__ import annotations

import enum
import json
import reprlib

import attrs

from reference.failover.controller import ELECTION_PRIORITY_DEFAULT, MAX_BROKER_ID, MAX_GROUP_NAME_BYTES
from reference.failover.effects import ReplicaInfo, Reply
from reference.frames import FrameError, frame_bytes

MAX_FRAME_BYTES = 64 * 1024
MAX_INT = 2**63 - 1


class ControllerFrame(enum.IntEnum):
    REQUEST = 16    # client -> controller
    REPLY = 17      # controller -> client
    ERROR = 18      # controller -> client, then the controller closes the connection


OPS = {
    # op: the fields it needs beyond id and group, with (type, minimum)
    "register": {"broker_id": (int, 1)},
    "heartbeat": {"broker_id": (int, 1)},
    "alter": {"master_id": (int, 0), "master_epoch": (int, 0), "sss_epoch": (int, 0), "sync_state_set": (list, 1)},
    "elect": {},
    "info": {},
}
MAX_ADDRESS_BYTES = 128    # "address": where a broker serves (HOST:PORT:HA_PORT), BrokerLiveInfo.brokerAddr
# forwarded: 1 when a controller passes a request to the owner of the group's shard (it is not passed on again)
OPTIONAL = {"epoch": 0, "max_offset": 0, "confirm_offset": 0, "election_priority": ELECTION_PRIORITY_DEFAULT,
            "forwarded": 0}


@attrs.frozen
class Request:
    id: int
    op: str
    group: str
    fields: dict = attrs.field(factory=dict, eq=False)     # the op's fields, and OPTIONAL's


@attrs.frozen
class ErrorFrame:
    error: str


# A value quoted in an error: bounded in length and nesting, so that the ERROR frame naming it is
# short (and a value nested deeper than the stack is not recursed into).
_show = reprlib.Repr()
_show.maxstring = _show.maxother = _show.maxlong = 60
_show.maxlevel = 3


def _utf8_bytes(text: str) -> int | None:
    """Bytes of ``text`` in UTF-8, or None when it has no UTF-8 form (a lone surrogate: JSON's
    "\\ud800" decodes to one)."""
    try:
        return len(text.encode())
    except UnicodeEncodeError:
        return None


def _int(obj: dict, key: str, minimum: int, where: str) -> int:
    v = obj[key]
    if not isinstance(v, int) or isinstance(v, bool) or not minimum <= v <= MAX_INT:
        raise FrameError(f"{where}: {key} = {_show.repr(v)} must be an integer >= {minimum}")
    return v


def parse_request(obj) -> Request:
    if not isinstance(obj, dict):
        raise FrameError(f"REQUEST payload is a JSON {type(obj).__name__}, expected an object")
    rid = obj.get("id")
    if not isinstance(rid, int) or isinstance(rid, bool) or not 0 <= rid <= MAX_INT:
        raise FrameError(f"REQUEST id = {_show.repr(rid)}: must be an integer >= 0")
    op = obj.get("op")
    if not isinstance(op, str) or op not in OPS:       # a list or an object is no op (nor hashable)
        raise FrameError(f"request {rid}: op = {_show.repr(op)}, expected one of {', '.join(OPS)}")
    where = f"request {rid} ({op})"
    group = obj.get("group")
    size = _utf8_bytes(group) if isinstance(group, str) else None
    if size is None or not 1 <= size <= MAX_GROUP_NAME_BYTES:
        raise FrameError(f"{where}: group = {_show.repr(group)} must be a UTF-8 name of 1-{MAX_GROUP_NAME_BYTES} "
                         "bytes")
    fields = {}
    for key, (kind, minimum) in OPS[op].items():
        if key not in obj:
            raise FrameError(f"{where}: field {key!r} is missing")
        if kind is int:
            fields[key] = _int(obj, key, minimum, where)
        else:
            members = obj[key]
            if (not isinstance(members, list) or len(members) < minimum
                    or not all(isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= MAX_BROKER_ID
                               for b in members)):
                raise FrameError(f"{where}: {key} = {_show.repr(members)} must be a non-empty list of broker ids")
            fields[key] = frozenset(members)
    if "broker_id" in fields and fields["broker_id"] > MAX_BROKER_ID:
        raise FrameError(f"{where}: broker_id {fields['broker_id']} exceeds {MAX_BROKER_ID}")
    for key, default in OPTIONAL.items():
        fields[key] = _int(obj, key, 0, where) if key in obj else default
    address = obj.get("address", "")
    size = _utf8_bytes(address) if isinstance(address, str) else None
    if size is None or size > MAX_ADDRESS_BYTES:
        raise FrameError(f"{where}: address = {_show.repr(address)} must be a UTF-8 string of at most "
                         f"{MAX_ADDRESS_BYTES} bytes")
    fields["address"] = address
    return Request(rid, op, group, fields)


def _decode(kind: int, payload: bytes):
    try:
        t = ControllerFrame(kind)
    except ValueError:
        raise FrameError(f"unknown frame type {kind} (the controller takes REQUEST frames, type 16)") from None
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError) as err:
        # ValueError: JSONDecodeError, UnicodeDecodeError, and an integer of more digits than
        # int() converts (sys.get_int_max_str_digits, 4,300); RecursionError: arrays or objects
        # nested deeper than the stack.  Each escaped the server's `except FrameError` before.
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise FrameError(f"{t.name} payload is not JSON: {why}") from None
    if t is ControllerFrame.REQUEST:
        return parse_request(obj)
    if t is ControllerFrame.ERROR:
        error = obj.get("error") if isinstance(obj, dict) else obj
        return ErrorFrame(error if isinstance(error, str) else _show.repr(error))
    return obj            # a REPLY, as the client reads it: a dict


decode = _decode


def encode_request(rid: int, op: str, group: str, **fields) -> bytes:
    body = {"id": rid, "op": op, "group": group}
    for k, v in fields.items():
        body[k] = sorted(v) if isinstance(v, (set, frozenset, tuple)) else v
    return frame_bytes(ControllerFrame.REQUEST, json.dumps(body, separators=(",", ":")).encode())


def info_json(info: ReplicaInfo | None) -> dict | None:
    if info is None:
        return None
    return {"group": info.group, "master_id": info.master_id, "master_epoch": info.master_epoch,
            "sync_state_set": list(info.sync_state_set), "sss_epoch": info.sss_epoch, "alive": list(info.alive)}


def encode_reply(client_id: int, reply: Reply, addresses: dict[int, str] | None = None) -> bytes:
    """``addresses``: the brokers' addresses of the reply's group (liveness data the server
    keeps beside the core, as RocketMQ's BrokerLiveInfo does; not metadata)."""
    info = info_json(reply.info)
    if info is not None:
        info["addresses"] = {str(b): a for b, a in sorted((addresses or {}).items())}
    body = {"id": client_id, "code": reply.code, "reason": reply.reason, "info": info}
    return frame_bytes(ControllerFrame.REPLY, json.dumps(body, separators=(",", ":")).encode())


def encode_error(error: str) -> bytes:
    return frame_bytes(ControllerFrame.ERROR, json.dumps({"error": error}).encode())
