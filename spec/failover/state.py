"""State of the failover spec, as immutable attrs values.

One field per TLA+ variable of tla/AckOrderFailoverTypes.tla, same names.
Per-broker functions ([Brokers -> ...]) are tuples indexed by the broker's
position in ``FailoverConfig.brokers`` (sorted names); broker references
(masterId, bMasterId, sets of brokers) hold names.
"""

from __future__ import annotations

import attrs

MASTER, SLAVE = "MASTER", "SLAVE"
PUT_OK = "PUT_OK"
FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
CLIENT_TIMEOUT = "CLIENT_TIMEOUT"
WAITING = "WAITING"
STATUSES = frozenset({PUT_OK, FLUSH_SLAVE_TIMEOUT, CLIENT_TIMEOUT})

COUNTER_KINDS = ("brokerCrash", "powerLoss", "cutOff", "disconnect", "sssProposal", "election")


@attrs.frozen(slots=True)
class FRequest:
    """reqs[i]: where (offset), in which epoch and by which master it was put, and its status."""

    off: int
    status: str
    epoch: int
    master: str


@attrs.frozen(slots=True)
class FCounters:
    """aux_ctrs: perturbations used so far, by kind."""

    brokerCrash: int = 0
    powerLoss: int = 0
    cutOff: int = 0
    disconnect: int = 0
    sssProposal: int = 0
    election: int = 0


@attrs.frozen(slots=True, cache_hash=True)
class FState:
    """One state of the failover spec; see tla/AckOrderFailoverTypes.tla."""

    masterId: str
    masterEpoch: int
    syncStateSet: frozenset[str]
    sssEpoch: int
    reachable: tuple[bool, ...]
    up: tuple[bool, ...]
    role: tuple[str, ...]
    bMasterId: tuple[str, ...]
    bEpoch: tuple[int, ...]
    bSSS: tuple[frozenset[str], ...]
    bSssEpoch: tuple[int, ...]
    bRemoteSSS: tuple[frozenset[str], ...]
    alterPending: tuple[bool, ...]
    blog: tuple[tuple[int, ...], ...]
    epochCache: tuple[tuple[tuple[int, int], ...], ...]
    confirm: tuple[int, ...]
    staleTail: tuple[tuple[int, ...], ...]
    connected: tuple[bool, ...]
    ack: tuple[int, ...]
    cursorEpoch: tuple[int, ...]
    reqs: tuple[FRequest, ...]
    inv_pcLost: frozenset[int]
    aux_ctrs: FCounters


PER_BROKER = ("reachable", "up", "role", "bMasterId", "bEpoch", "bSSS", "bSssEpoch", "bRemoteSSS", "alterPending",
              "blog", "epochCache", "confirm", "staleTail", "connected", "ack", "cursorEpoch")
BROKER_VALUED = ("bMasterId",)                  # per-broker fields whose values name brokers
BROKER_SET_VALUED = ("bSSS", "bRemoteSSS")      # per-broker fields whose values are sets of brokers


def _plain(value):
    """A field's value as JSON: sets sorted, tuples as lists, records as objects."""
    if isinstance(value, (frozenset, set)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if attrs.has(type(value)):
        return {f.name: _plain(getattr(value, f.name)) for f in attrs.fields(type(value))}
    return value


def state_json(s: FState) -> dict:
    """The state as a JSON object, one key per TLA+ variable, in one canonical form: two states are
    equal exactly when their objects are (what a failover trace's ``state`` holds)."""
    return {f.name: _plain(getattr(s, f.name)) for f in attrs.fields(FState)}
