"""Pure helpers: the twin of tla/AckOrderFunctions.tla, operator by operator."""

from __future__ import annotations

from spec.config import Config
from spec.state import (
    FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, PUT_OK, SLAVE_NOT_AVAILABLE, TORN,
    ResponseEvent, State,
)

_REPLICA_STATUSES = frozenset({FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE})


def file_end(cfg: Config, off: int) -> int:
    """FileEnd(o): end of the commit-log file holding offset o."""
    return (off // cfg.file_size + 1) * cfg.file_size


def is_prefix(s: tuple, t: tuple) -> bool:
    return len(s) <= len(t) and t[: len(s)] == s


def holds(s: State, log: tuple[int, ...], i: int) -> bool:
    """Holds(L, i): request i's record sits at its offset in log L (i is 1-based)."""
    off = s.reqs[i - 1].off
    return 0 < off <= len(log) and log[off - 1] == i


def holders(cfg: Config, s: State, i: int) -> frozenset[str]:
    return frozenset(r for k, r in enumerate(cfg.replicas) if holds(s, s.rlog[k], i))


def effective_policy(cfg: Config) -> str:
    if cfg.bug("BugAnyReplicaForAllInSync") and cfg.ack_policy == "ALL_IN_SYNC":
        return "ANY_REPLICA_MAX"
    return cfg.ack_policy


def replica_covered(cfg: Config, s: State, off: int) -> bool:
    """ReplicaCovered(off): GroupTransferService's ack rule, master's view."""
    if not cfg.sync_master:
        return True
    policy = effective_policy(cfg)
    if policy == "ANY_REPLICA_MAX":
        return s.push2SlaveMaxOffset >= off
    if policy == "AT_LEAST_K":
        acked = sum(1 for k in range(len(cfg.replicas)) if s.connected[k] and s.ack[k] >= off)
        return 1 + acked >= cfg.in_sync_replicas
    index = {r: k for k, r in enumerate(cfg.replicas)}
    return all(s.connected[index[r]] and s.ack[index[r]] >= off for r in s.syncStateSet)


def policy_holds(cfg: Config, holder_set: frozenset[str], sss: frozenset[str]) -> bool:
    """PolicyHolds(holders, sss): the configured promise, on real holders."""
    if cfg.ack_policy == "ANY_REPLICA_MAX":
        return bool(holder_set)
    if cfg.ack_policy == "AT_LEAST_K":
        return 1 + len(holder_set) >= cfg.in_sync_replicas
    return sss <= holder_set


def flush_leg_done(cfg: Config, s: State, i: int) -> bool:
    req = s.reqs[i - 1]
    if cfg.bug("BugAckOnWrote"):
        return s.wrote >= req.off
    if cfg.bug("BugAckOnCommitted"):
        return s.committed >= req.off
    return req.flush_done


def any_replica_connected(s: State) -> bool:
    return any(s.connected)


def timeout_statuses(cfg: Config, s: State, i: int) -> tuple[str, ...]:
    """TimeoutStatuses(i): thenCombine's precedence over the pending legs."""
    if cfg.bug("BugTimeoutAsOK"):
        return (PUT_OK,)
    if cfg.bug("BugFlushTimeoutHidesSlaveTimeout") and not flush_leg_done(cfg, s, i):
        return (FLUSH_DISK_TIMEOUT,)
    if not replica_covered(cfg, s, s.reqs[i - 1].off):
        if any_replica_connected(s):
            return (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)
        return (SLAVE_NOT_AVAILABLE,)
    return (FLUSH_DISK_TIMEOUT,)


def handshake_accepts(cfg: Config, s: State, k: int) -> bool:
    """HandshakeAccepts(r) for the replica at index k."""
    if cfg.bug("BugAcceptAckBeyondLog"):
        return True
    if cfg.bug("BugHandshakeOffsetOnly"):
        return len(s.rlog[k]) <= s.committed
    if cfg.bug("BugHandshakeRefusesCaughtUp"):
        return is_prefix(s.rlog[k], s.log[: s.committed]) and len(s.rlog[k]) < s.committed
    return is_prefix(s.rlog[k], s.log[: s.committed])


def ack_accepted(cfg: Config, s: State, reported: int) -> bool:
    """AckAccepted(reported): the master's check of a slave's report (PR #3016)."""
    if cfg.bug("BugAcceptAckBeyondLog"):
        return True
    return reported <= (s.wrote if cfg.bug("BugAckCheckedAgainstWrote") else s.committed)


def page_cache_end(s: State) -> int:
    """PageCacheEnd: what the page cache really holds (see tla/AckOrderFunctions.tla)."""
    return min(s.unwritten) - 1 if s.unwritten else s.committed + s.landed


def precedence_ok(cfg: Config, s: State, i: int, status: str, cause: str) -> bool:
    """PrecedenceOK(i, status, cause): thenCombine's precedence over the legs pending now."""
    if cause != "Timeout" or status == PUT_OK:
        return True
    repl_pending = not replica_covered(cfg, s, s.reqs[i - 1].off)
    if (status in _REPLICA_STATUSES) != repl_pending:
        return False
    return not (repl_pending and not any_replica_connected(s)) or status == SLAVE_NOT_AVAILABLE


def recovered_log(cfg: Config, log: tuple[int, ...]) -> tuple[int, ...]:
    """RecoveredLog(L): the CRC scan truncates a torn tail record."""
    if log and log[-1] == TORN and not cfg.bug("BugRecoveryKeepsTorn"):
        return log[:-1]
    return log


def event(cfg: Config, s: State, i: int, status: str, cause: str) -> ResponseEvent:
    """Event(i, status, cause): the ghost record of a response."""
    off = s.reqs[i - 1].off
    return ResponseEvent(
        id=i, off=off, status=status, cause=cause,
        wrote=s.wrote, committed=s.committed, flushed=s.flushed, durable=s.durable,
        holders=holders(cfg, s, i), sss=s.syncStateSet,
        written=holds(s, s.log, i) and off not in s.unwritten and (cfg.transient_store_pool or off <= s.committed),
        precedenceOK=precedence_ok(cfg, s, i, status, cause),
    )


def early_event(s: State, rid: int, off: int, status: str, cause: str) -> ResponseEvent:
    """EarlyEvent(id, off, status, cause): a request answered before its record reached the log."""
    return ResponseEvent(
        id=rid, off=off, status=status, cause=cause, wrote=s.wrote, committed=s.committed,
        flushed=s.flushed, durable=s.durable, holders=frozenset(), sss=s.syncStateSet,
        written=False, precedenceOK=True,
    )
