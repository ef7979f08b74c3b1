"""The properties of tla/AckOrderProperties.tla, same names, same meaning.

``INVARIANTS`` maps each state invariant's name to a function
``(cfg, state) -> bool``; ``ACTION_PROPERTIES`` maps each action property to
``(cfg, state, next_state) -> bool``.  The liveness properties
``EveryRequestAnswered`` and ``ReplicasCatchUp`` are checked by spec/liveness.py.
"""

from __future__ import annotations

from collections.abc import Callable

from spec.config import Config
from spec.functions import holders, holds, is_prefix, policy_holds
from spec.state import (
    CLIENT_TIMEOUT, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, MASTER_STATES, PROC_DOWN, PUT_OK,
    SLAVE_NOT_AVAILABLE, STATUSES, TORN, UNKNOWN_ERROR, UP, WAITING, CAUSES, ResponseEvent, State,
)


def ack_flush_ok(cfg: Config, e: ResponseEvent) -> bool:
    return not (e.status == PUT_OK and cfg.sync_flush) or e.flushed >= e.off


def ack_repl_ok(cfg: Config, e: ResponseEvent) -> bool:
    return not (e.status == PUT_OK and cfg.sync_master) or policy_holds(cfg, e.holders, e.sss)


def ack_write_ok(cfg: Config, e: ResponseEvent) -> bool:
    return e.status != PUT_OK or e.written


def response_digest(cfg: Config, s: State) -> frozenset:
    """ResponseDigest: what the VIEW keeps of the ghost history."""
    return frozenset(
        (e.id, e.status, e.cause, ack_flush_ok(cfg, e), ack_repl_ok(cfg, e), ack_write_ok(cfg, e),
         e.precedenceOK)
        for e in s.inv_responses
    )


def type_ok(cfg: Config, s: State) -> bool:
    n = len(cfg.replicas)
    nat = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    return (
        s.mstate in MASTER_STATES
        and all(nat(x) for x in s.log)
        and nat(s.committed) and nat(s.flushed) and nat(s.durable)
        and isinstance(s.writable, bool)
        and all(nat(x) for x in s.unwritten) and nat(s.landed)
        and all(nat(r.off) and isinstance(r.flush_done, bool) and r.status in STATUSES | {WAITING}
                for r in s.reqs)
        and len(s.connected) == n and len(s.ack) == n and len(s.rlog) == n and len(s.rUp) == n
        and all(nat(a) for a in s.ack) and nat(s.push2SlaveMaxOffset)
        and s.syncStateSet <= frozenset(cfg.replicas)
        and all(nat(x) for rl in s.rlog for x in rl)
        and all(e.status in STATUSES and e.cause in CAUSES and e.holders <= frozenset(cfg.replicas)
                for e in s.inv_responses)
    )


def watermarks_ordered(cfg: Config, s: State) -> bool:
    if s.mstate != UP:
        return True
    committed = s.committed
    if not (s.durable <= s.flushed <= committed <= s.wrote and s.push2SlaveMaxOffset <= committed):
        return False
    # For every connected slave: ack <= its log's length <= committed (a loop: checked on every step).
    connected, ack, rlog = s.connected, s.ack, s.rlog
    for k in range(len(cfg.replicas)):
        if connected[k] and not ack[k] <= len(rlog[k]) <= committed:
            return False
    return True


def log_matching(cfg: Config, s: State) -> bool:
    if s.mstate != UP:
        return True
    return all(is_prefix(s.rlog[k], s.log) for k in range(len(cfg.replicas)) if s.connected[k])


def no_ack_before_flush(cfg: Config, s: State) -> bool:
    return all(ack_flush_ok(cfg, e) for e in s.inv_responses)


def no_ack_before_replicas(cfg: Config, s: State) -> bool:
    return all(ack_repl_ok(cfg, e) for e in s.inv_responses)


def no_ack_before_write(cfg: Config, s: State) -> bool:
    return all(ack_write_ok(cfg, e) for e in s.inv_responses)


def timeout_status_precedence(cfg: Config, s: State) -> bool:
    return all(e.precedenceOK for e in s.inv_responses)


def promised(cfg: Config) -> bool:
    return cfg.sync_flush or cfg.sync_master


def survives(cfg: Config, s: State, i: int) -> bool:
    return holds(s, s.log, i) or (
        cfg.sync_master and policy_holds(cfg, holders(cfg, s, i), s.syncStateSet)
    )


def acked_survives_crash(cfg: Config, s: State) -> bool:
    if not promised(cfg):
        return True
    return all(survives(cfg, s, i) for i, r in enumerate(s.reqs, start=1) if r.status == PUT_OK)


def one_response_per_request(cfg: Config, s: State) -> bool:
    by_id: dict[int, tuple[str, str]] = {}
    for e in s.inv_responses:
        if by_id.setdefault(e.id, (e.status, e.cause)) != (e.status, e.cause):
            return False
        if not (1 <= e.id <= len(s.reqs)) or s.reqs[e.id - 1].status != e.status:
            return False
    return all((r.status == WAITING) == (i not in by_id) for i, r in enumerate(s.reqs, start=1))


def timeout_is_error(cfg: Config, s: State) -> bool:
    return all(e.status != PUT_OK for e in s.inv_responses if e.cause == "Timeout")


def well_formed(log: tuple[int, ...]) -> bool:
    return all(x != TORN for x in log) and all(a < b for a, b in zip(log, log[1:]))


def ambiguous_ack_ordered(cfg: Config, s: State) -> bool:
    return (s.mstate != UP or well_formed(s.log)) and all(well_formed(rl) for rl in s.rlog)


# --- debug (reachability) invariants: each MUST be violated by its cfg ---------

def debug_no_put_ok_under_sync_master(cfg: Config, s: State) -> bool:
    return not cfg.sync_master or all(r.status != PUT_OK for r in s.reqs)


def debug_no_replica_ahead(cfg: Config, s: State) -> bool:
    return s.mstate != UP or all(len(rl) <= s.wrote for rl in s.rlog)


def debug_no_torn_tail(cfg: Config, s: State) -> bool:
    return TORN not in s.log


_AMBIGUOUS = frozenset({FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, CLIENT_TIMEOUT})


def debug_no_ambiguous_survivor(cfg: Config, s: State) -> bool:
    return all(not holders(cfg, s, i) for i, r in enumerate(s.reqs, start=1) if r.status in _AMBIGUOUS)


def debug_no_unknown_error(cfg: Config, s: State) -> bool:
    return all(r.status != UNKNOWN_ERROR for r in s.reqs)


def debug_no_unknown_error_survivor(cfg: Config, s: State) -> bool:
    """A message answered UNKNOWN_ERROR is in the master's committed log (its failed write landed)."""
    return s.mstate != UP or all(not (holds(s, s.log, i) and r.off <= s.committed)
                                 for i, r in enumerate(s.reqs, start=1) if r.status == UNKNOWN_ERROR)


def debug_no_write_buffer_loss(cfg: Config, s: State, t: State) -> bool:
    """~WriteBufferLost: a process crash that drops write-buffer records."""
    return not (s.mstate == UP and t.mstate == PROC_DOWN and len(t.log) < len(s.log))


def debug_no_forged_report_refused(cfg: Config, s: State, t: State) -> bool:
    """~ForgedReportRefused: a forged report that closed a connection."""
    return not (t.aux_ctrs.forgedReport > s.aux_ctrs.forgedReport
                and any(a and not b for a, b in zip(s.connected, t.connected)))


def batch_release(s: State, t: State) -> bool:
    released = sum(1 for a, b in zip(s.reqs, t.reqs) if not a.flush_done and b.flush_done)
    return released >= 2


def debug_no_batch_release(cfg: Config, s: State, t: State) -> bool:
    return not batch_release(s, t)


Invariant = Callable[[Config, State], bool]

INVARIANTS: dict[str, Invariant] = {
    "TypeOK": type_ok,
    "WatermarksOrdered": watermarks_ordered,
    "LogMatching": log_matching,
    "NoAckBeforeFlush": no_ack_before_flush,
    "NoAckBeforeReplicas": no_ack_before_replicas,
    "NoAckBeforeWrite": no_ack_before_write,
    "TimeoutStatusPrecedence": timeout_status_precedence,
    "AckedSurvivesCrash": acked_survives_crash,
    "OneResponsePerRequest": one_response_per_request,
    "TimeoutIsError": timeout_is_error,
    "AmbiguousAckOrdered": ambiguous_ack_ordered,
    "Debug_NoPutOkUnderSyncMaster": debug_no_put_ok_under_sync_master,
    "Debug_NoReplicaAhead": debug_no_replica_ahead,
    "Debug_NoTornTail": debug_no_torn_tail,
    "Debug_NoAmbiguousSurvivor": debug_no_ambiguous_survivor,
    "Debug_NoUnknownError": debug_no_unknown_error,
    "Debug_NoUnknownErrorSurvivor": debug_no_unknown_error_survivor,
}

ACTION_PROPERTIES: dict[str, Callable[[Config, State, State], bool]] = {
    "Debug_NoBatchRelease": debug_no_batch_release,
    "Debug_NoWriteBufferLoss": debug_no_write_buffer_loss,
    "Debug_NoForgedReportRefused": debug_no_forged_report_refused,
}

LIVENESS_PROPERTIES = ("EveryRequestAnswered", "ReplicasCatchUp")


def diverged(cfg: Config, s: State, k: int) -> bool:
    """Diverged(r): the slave's log is not a prefix of the master's committed log."""
    return not is_prefix(s.rlog[k], s.log[: s.committed])


def caught_up(cfg: Config, s: State, k: int) -> bool:
    """CaughtUp(r): connected to a live master, holding and acking all it committed."""
    return (s.mstate == UP and s.rUp[k] and s.connected[k] and len(s.rlog[k]) == s.committed
            and s.ack[k] == s.committed)

# The safety properties every green cfg checks, in the order TLC reports them.
SAFETY = (
    "TypeOK", "OneResponsePerRequest", "TimeoutIsError", "WatermarksOrdered", "LogMatching",
    "NoAckBeforeFlush", "NoAckBeforeReplicas", "AckedSurvivesCrash", "AmbiguousAckOrdered",
    "NoAckBeforeWrite", "TimeoutStatusPrecedence",
)
