"""State of the ackorder spec, as immutable attrs values.

One field per TLA+ variable (tla/AckOrderTypes.tla), same meaning, snake_case
names.  Per-replica functions ([Replicas -> ...]) are tuples indexed by the
position of the replica in ``Config.replicas`` (sorted names).
"""

from __future__ import annotations

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


@attrs.frozen(slots=True)
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

