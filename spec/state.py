"""State of the ackorder spec, as immutable attrs values.

One field per TLA+ variable (tla/AckOrderTypes.tla), same meaning, snake_case
names.  Per-replica functions ([Replicas -> ...]) are tuples indexed by the
position of the replica in ``Config.replicas`` (sorted names).
"""

from __future__ import annotations

from operator import attrgetter

import attrs

TORN = 0  # a partly written tail record (request ids start at 1)

# PutMessageStatus values the spec produces, plus the producer-side outcome.
PUT_OK = "PUT_OK"
FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
CLIENT_TIMEOUT = "CLIENT_TIMEOUT"
UNKNOWN_ERROR = "UNKNOWN_ERROR"
WAITING = "WAITING"

STATUSES = frozenset(
    {PUT_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE,
     SERVICE_NOT_AVAILABLE, CLIENT_TIMEOUT, UNKNOWN_ERROR}
)
CAUSES = frozenset({"Respond", "Timeout", "Reject", "WriteFail", "Crash"})

UP, PROC_DOWN, MACHINE_DOWN = "UP", "PROC_DOWN", "MACHINE_DOWN"
MASTER_STATES = frozenset({UP, PROC_DOWN, MACHINE_DOWN})



@attrs.frozen(slots=True)
class Request:
    """reqs[i]: nextOffset, whether the flush leg completed, and the status."""

    off: int
    flush_done: bool
    status: str


@attrs.frozen(slots=True, cache_hash=True)   # hashed again at every full check (a frozenset of the history)
class ResponseEvent:
    """One element of inv_responses: the response and the watermarks then."""

    id: int
    off: int
    status: str
    cause: str
    wrote: int
    committed: int
    flushed: int
    durable: int
    holders: frozenset[str]
    sss: frozenset[str]
    written: bool          # the record was in the log when answered
    precedenceOK: bool     # the status followed thenCombine's precedence (PrecedenceOK)


@attrs.frozen(slots=True)
class Counters:
    """aux_ctrs: perturbations used so far, by kind."""

    masterProcessCrash: int = 0
    masterMachineCrash: int = 0
    replicaCrash: int = 0
    replicaDisconnect: int = 0
    fsyncFailure: int = 0
    writeFailure: int = 0
    forgedReport: int = 0


@attrs.frozen(slots=True, cache_hash=True)
class State:
    """One state of the spec; see tla/AckOrderTypes.tla for each variable."""

    mstate: str
    log: tuple[int, ...]
    committed: int
    flushed: int
    durable: int
    writable: bool
    unwritten: frozenset[int]     # committed records whose write failed ({} unless BugFsyncCoversFailedWrite)
    landed: int                   # records after committed a failed write left in the page cache anyway
    reqs: tuple[Request, ...]
    connected: tuple[bool, ...]
    ack: tuple[int, ...]
    push2SlaveMaxOffset: int
    syncStateSet: frozenset[str]
    rlog: tuple[tuple[int, ...], ...]
    rUp: tuple[bool, ...]
    inv_responses: frozenset[ResponseEvent]
    aux_ctrs: Counters

    @property
    def wrote(self) -> int:
        return len(self.log)



_LAYOUTS: dict[type, tuple] = {}      # class -> (getter of all its fields, field name -> position)


def evolve(inst, **changes):
    """``attrs.evolve`` for the spec's value classes, by position instead of by keyword: the
    twin's steps make one or two per step, and the refinement checker takes millions of steps.
    Every field of these classes is an ``__init__`` argument under its own name (checked once
    per class); reference/tests/test_twin_evolve.py checks the result equals ``attrs.evolve``'s."""
    cls = inst.__class__
    layout = _LAYOUTS.get(cls)
    if layout is None:
        fields = attrs.fields(cls)
        assert len(fields) > 1 and all(f.init and f.alias == f.name for f in fields), cls
        layout = _LAYOUTS[cls] = (attrgetter(*(f.name for f in fields)), {f.name: k for k, f in enumerate(fields)})
    get, position = layout
    values = list(get(inst))
    for name, value in changes.items():
        values[position[name]] = value
    return cls(*values)
