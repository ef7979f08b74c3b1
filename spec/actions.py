"""The actions of tla/AckOrder.tla, one function per action, same names.

Each function takes the configuration and a state and returns the list of
successor states (empty when the action is not enabled).  The docstrings
give WHO performs the action; tla/AckOrder.tla has the full headers with
the RocketMQ code each one abstracts.  ``successors`` is MCAckOrder!MCNext:
the same disjuncts, with the perturbations bounded by ``Bounds``.
"""

from __future__ import annotations

from collections.abc import Iterator

from spec.config import Bounds, Config
from spec.seq import Seq
from spec.functions import (
    ack_accepted, early_event, event, file_end, flush_leg_done, handshake_accepts, page_cache_end,
    recovered_log, replica_covered, timeout_statuses,
)
from spec.state import (
    CLIENT_TIMEOUT, MACHINE_DOWN, PROC_DOWN, PUT_OK, SERVICE_NOT_AVAILABLE, TORN, UNKNOWN_ERROR, UP,
    WAITING, Counters, Request, ResponseEvent, State, evolve,
)


def initial_state(cfg: Config) -> State:
    n = len(cfg.replicas)
    return State(
        mstate=UP, log=(), committed=0, flushed=0, durable=0, writable=True, unwritten=frozenset(), landed=0,
        reqs=(),
        connected=(False,) * n, ack=(0,) * n, push2SlaveMaxOffset=0,
        syncStateSet=frozenset(cfg.replicas), rlog=((),) * n, rUp=(True,) * n,
        inv_responses=frozenset(), aux_ctrs=Counters(),
    )


def _bump(s: State, kind: str) -> Counters:
    return evolve(s.aux_ctrs, **{kind: getattr(s.aux_ctrs, kind) + 1})


def _set(t: tuple, k: int, v) -> tuple:
    if isinstance(t, Seq):
        return t.set(k, v)
    return t[:k] + (v,) + t[k + 1:]


def _replace(t: tuple, changes: dict[int, object]) -> tuple:
    """``t`` with the items at the keys of ``changes`` replaced."""
    if isinstance(t, Seq):
        for k, v in changes.items():
            t = t.set(k, v)
        return t
    items = list(t)
    for k, v in changes.items():
        items[k] = v
    return tuple(items)


# --- master -----------------------------------------------------------------

def commits_on_put(cfg: Config) -> bool:
    """CommitsOnPut: the seed-001 fix commits the write buffer when a SYNC_MASTER request starts waiting."""
    return cfg.commit_on_replica_wait and cfg.repl_mode == "SYNC_MASTER"


def put(cfg: Config, s: State) -> list[State]:
    """Producer -> SendMessageProcessor -> CommitLog.asyncPutMessage."""
    if s.mstate != UP:
        return []
    rid = len(s.reqs) + 1
    if s.writable:
        off = len(s.log) + 1
        return [evolve(
            s, log=s.log + (rid,),
            committed=s.committed if cfg.transient_store_pool and not commits_on_put(cfg) else off,
            reqs=s.reqs + (Request(off, not cfg.sync_flush, WAITING),),
        )]
    return [evolve(
        s, reqs=s.reqs + (Request(0, False, SERVICE_NOT_AVAILABLE),),
        inv_responses=s.inv_responses | {early_event(s, rid, 0, SERVICE_NOT_AVAILABLE, "Reject")},
    )]


def commit_to(cfg: Config, s: State, target: int) -> State | None:
    """Commit, copying up to record ``target``; None if that is not a Commit step."""
    if not (cfg.transient_store_pool and s.mstate == UP and s.committed < target <= s.wrote
            and target <= file_end(cfg, s.committed)):
        return None
    return evolve(s, committed=target, landed=max(0, s.landed - (target - s.committed)))


def commit(cfg: Config, s: State) -> list[State]:
    """Master CommitRealTimeService (transient store pool only): up to what was written."""
    reach = min(s.wrote, file_end(cfg, s.committed))
    return [t for target in range(s.committed + 1, reach + 1) if (t := commit_to(cfg, s, target))]


def flush_targets(cfg: Config, s: State) -> range:
    """The offsets one fsync can leave flushed at (up to FlushTarget)."""
    return range(s.flushed + 1, min(s.committed, file_end(cfg, s.flushed)) + 1)


def release(cfg: Config, s: State, target: int) -> tuple[Request, ...]:
    """Release(rs, ReleaseBound(target)): group commit completes every waiter.

    Only requests whose record lies between the old flushed offset and the
    bound can change (a waiter below the old flushed offset was released by
    an earlier flush), so only those log positions are visited."""
    bound = s.committed if cfg.bug("BugFlushOneFileReleasesAll") else target
    changes = {}
    for pos in range(s.flushed, min(bound, len(s.log))):
        rid = s.log[pos]
        if rid == TORN or rid > len(s.reqs):
            continue
        r = s.reqs[rid - 1]
        if r.status == WAITING and not r.flush_done and r.off <= bound:
            changes[rid - 1] = evolve(r, flush_done=True)
    return _replace(s.reqs, changes) if changes else s.reqs


def flush_allowed(cfg: Config, s: State) -> bool:
    """FlushAllowed: the store is writable (BugFsyncCoversFailedWrite: the flag is not looked at)."""
    return s.writable or cfg.bug("BugFsyncCoversFailedWrite")


def flush_to(cfg: Config, s: State, target: int) -> State | None:
    """Flush leaving ``flushed`` at record ``target``; None if that is not a Flush step."""
    if not (s.mstate == UP and flush_allowed(cfg, s) and s.flushed < target <= s.committed
            and target <= file_end(cfg, s.flushed)):
        return None
    # After an ignored fsync error (B1) the durable prefix stops at the hole (fsyncgate); an
    # unwritten record is a hole too.
    durable = min(target, page_cache_end(s)) if s.durable == s.flushed else s.durable
    return evolve(s, flushed=target, durable=durable, reqs=release(cfg, s, target))


def flush(cfg: Config, s: State) -> list[State]:
    """Master GroupCommitService (SYNC_FLUSH) / FlushRealTimeService (ASYNC_FLUSH)."""
    return [t for target in flush_targets(cfg, s) if (t := flush_to(cfg, s, target))]


def flush_fail_to(cfg: Config, s: State, target: int | None) -> State | None:
    """FlushFail; under BugFlushIgnoresFsyncError ``target`` is where flushed goes."""
    if not (s.mstate == UP and flush_allowed(cfg, s) and s.flushed < s.committed):
        return None
    ctrs = _bump(s, "fsyncFailure")
    if cfg.bug("BugFlushIgnoresFsyncError"):
        if target is None or target not in flush_targets(cfg, s):
            return None
        return evolve(s, flushed=target, reqs=release(cfg, s, target), aux_ctrs=ctrs)
    return evolve(s, writable=False, aux_ctrs=ctrs)


def flush_fail(cfg: Config, s: State) -> list[State]:
    """The disk fails an fsync under the flush service."""
    targets = flush_targets(cfg, s) if cfg.bug("BugFlushIgnoresFsyncError") else [None]
    return [t for target in targets if (t := flush_fail_to(cfg, s, target))]


def write_fail_to(cfg: Config, s: State, target: int | None, landed: int, beyond: int = 0) -> State | None:
    """WriteFail: ``landed`` records of the failed write reached the page cache anyway;
    ``target`` is where committed goes under BugFsyncCoversFailedWrite with the pool, and
    ``beyond`` how many records after it a write issued behind the failed one left there."""
    if s.mstate != UP:
        return None
    common = dict(writable=False, aux_ctrs=_bump(s, "writeFailure"))
    bug = cfg.bug("BugFsyncCoversFailedWrite")
    if cfg.transient_store_pool:
        reach = min(s.wrote, file_end(cfg, s.committed))
        if s.committed >= s.wrote:
            return None
        if bug:
            if target is None or not s.committed <= target <= reach:
                return None
            counted = target - s.committed
            if not (min(s.landed, counted) <= landed <= counted and s.landed - counted <= beyond <= reach - target
                    and (beyond == 0 or (landed == counted and not s.unwritten))):
                return None
            failed = frozenset(range(s.committed + landed + 1, target + 1))
            return evolve(s, committed=target, unwritten=s.unwritten | failed, landed=beyond, **common)
        if target is not None or beyond or not s.landed <= landed <= reach - s.committed:
            return None
        return evolve(s, landed=landed, **common)
    if not s.writable or target is not None or beyond or landed not in (0, 1):
        return None
    rid, off = len(s.reqs) + 1, len(s.log) + 1
    if bug:
        return evolve(s, log=s.log + (rid,), committed=off,
                      unwritten=s.unwritten | (frozenset() if landed else {off}),
                      reqs=s.reqs + (Request(off, not cfg.sync_flush, WAITING),), **common)
    return evolve(s, log=s.log + (rid,), landed=landed, reqs=s.reqs + (Request(off, False, UNKNOWN_ERROR),),
                  inv_responses=s.inv_responses | {early_event(s, rid, off, UNKNOWN_ERROR, "WriteFail")}, **common)


def write_fail(cfg: Config, s: State) -> list[State]:
    """Master; the disk: a put's page-cache write, or a commit of the write buffer, fails."""
    if cfg.transient_store_pool:
        reach = min(s.wrote, file_end(cfg, s.committed))
        if cfg.bug("BugFsyncCoversFailedWrite"):
            options = [(target, m, n) for target in range(s.committed, reach + 1)
                       for m in range(0, target - s.committed + 1) for n in range(0, reach - target + 1)]
        else:
            options = [(None, m, 0) for m in range(s.landed, reach - s.committed + 1)]
    else:
        options = [(None, 0, 0), (None, 1, 0)]
    return [t for target, m, n in options if (t := write_fail_to(cfg, s, target, m, n))]


def respond(cfg: Config, s: State, i: int) -> list[State]:
    """Master: the thread completing the last leg (thenCombine) answers PUT_OK."""
    req = s.reqs[i - 1]
    if not (s.mstate == UP and req.status == WAITING and flush_leg_done(cfg, s, i)
            and replica_covered(cfg, s, req.off)):
        return []
    return [evolve(
        s, reqs=_set(s.reqs, i - 1, evolve(req, status=PUT_OK)),
        inv_responses=s.inv_responses | {event(cfg, s, i, PUT_OK, "Respond")},
    )]


def leg_pending(cfg: Config, s: State, i: int) -> bool:
    replica_pending = not replica_covered(cfg, s, s.reqs[i - 1].off)
    if cfg.bug("BugNoFlushDiskWatcher"):
        return replica_pending
    return not flush_leg_done(cfg, s, i) or replica_pending


def timeout_applies(cfg: Config, s: State, i: int) -> bool:
    status = s.reqs[i - 1].status
    return (status == WAITING and leg_pending(cfg, s, i)) or (
        cfg.bug("BugDoubleResponse") and status == PUT_OK and cfg.sync_flush
    )


def timeout_with(cfg: Config, s: State, i: int, status: str) -> State | None:
    """Timeout(i) answering ``status``; None if that is not a Timeout step."""
    if not (s.mstate == UP and timeout_applies(cfg, s, i) and status in timeout_statuses(cfg, s, i)):
        return None
    return evolve(
        s, reqs=_set(s.reqs, i - 1, evolve(s.reqs[i - 1], status=status)),
        inv_responses=s.inv_responses | {event(cfg, s, i, status, "Timeout")},
    )


def timeout(cfg: Config, s: State, i: int) -> list[State]:
    """Master FlushDiskWatcher / GroupTransferService: a deadline passes."""
    if not (s.mstate == UP and timeout_applies(cfg, s, i)):
        return []
    return [timeout_with(cfg, s, i, status) for status in timeout_statuses(cfg, s, i)]


def abort_waiting(cfg: Config, s: State, candidates=None) -> tuple[tuple[Request, ...], frozenset[ResponseEvent]]:
    """Every waiting request answered CLIENT_TIMEOUT (its producer gave up on a dead master).
    ``candidates``: request ids (1-based) among which every waiting one is, when the caller
    knows them (the refinement checker tracks its shadow's waiting requests): then only those
    are read, not the whole history."""
    ids = range(1, len(s.reqs) + 1) if candidates is None else sorted(candidates)
    waiting = [i for i in ids if s.reqs[i - 1].status == WAITING]
    events = frozenset(event(cfg, s, i, CLIENT_TIMEOUT, "Crash") for i in waiting)
    reqs = _replace(s.reqs, {i - 1: evolve(s.reqs[i - 1], status=CLIENT_TIMEOUT) for i in waiting})
    return reqs, s.inv_responses | events


def _master_gone(cfg: Config) -> dict:
    n = len(cfg.replicas)
    return dict(connected=(False,) * n, ack=(0,) * n, push2SlaveMaxOffset=0)


def master_process_crash(cfg: Config, s: State, candidates=None) -> list[State]:
    """The master's process dies; page cache kept, write buffer lost.  (``candidates``:
    ``abort_waiting``'s.)"""
    if s.mstate != UP:
        return []
    reqs, responses = abort_waiting(cfg, s, candidates)
    end = page_cache_end(s)
    return [evolve(
        s, mstate=PROC_DOWN, log=s.log[:end], committed=end, flushed=min(s.flushed, end),
        durable=min(s.durable, end), writable=True, unwritten=frozenset(), landed=0, reqs=reqs,
        inv_responses=responses, aux_ctrs=_bump(s, "masterProcessCrash"), **_master_gone(cfg),
    )]


def master_machine_crash_to(cfg: Config, s: State, keep: int, torn: bool, aborted=None) -> State | None:
    """The machine crash that keeps ``keep`` records (and a torn one after them); ``aborted``:
    ``abort_waiting``'s result when the caller has it (it is the same for every cut)."""
    end = page_cache_end(s)
    if s.mstate not in (UP, PROC_DOWN) or not min(s.durable, end) <= keep <= end or torn and keep >= end:
        return None
    reqs, responses = aborted or abort_waiting(cfg, s)
    return evolve(s, log=s.log[:keep] + ((TORN,) if torn else ()), committed=keep, flushed=keep,
                  durable=keep, mstate=MACHINE_DOWN, writable=True, unwritten=frozenset(), landed=0, reqs=reqs,
                  inv_responses=responses, aux_ctrs=_bump(s, "masterMachineCrash"), **_master_gone(cfg))


def master_machine_crash(cfg: Config, s: State) -> list[State]:
    """The master's machine loses power: a prefix of the page cache survives."""
    if s.mstate not in (UP, PROC_DOWN):
        return []
    end = page_cache_end(s)
    aborted = abort_waiting(cfg, s)
    return [t for keep in range(min(s.durable, end), end + 1) for torn in (False, True)
            if (t := master_machine_crash_to(cfg, s, keep, torn, aborted))]


def recover(cfg: Config, s: State) -> list[State]:
    """The master's process starts: CRC scan, truncate, fsync what is kept."""
    if s.mstate == UP:
        return []
    kept = recovered_log(cfg, s.log)
    n = len(kept)
    return [evolve(s, mstate=UP, log=kept, committed=n, flushed=n, durable=n, writable=True)]


# --- replicas ----------------------------------------------------------------

def replica_connect(cfg: Config, s: State, k: int) -> list[State]:
    """Replica HAClient connects; the master checks its first report."""
    if not (s.mstate == UP and s.rUp[k] and not s.connected[k] and handshake_accepts(cfg, s, k)):
        return []
    reported = len(s.rlog[k])
    return [evolve(
        s, connected=_set(s.connected, k, True), ack=_set(s.ack, k, reported),
        push2SlaveMaxOffset=max(s.push2SlaveMaxOffset, reported),
    )]


def transfer(cfg: Config, s: State, k: int) -> list[State]:
    """Master HAConnection WriteSocketService -> replica: the next record."""
    limit = s.wrote if cfg.bug("BugTransferBeyondCommitted") else s.committed
    if not (s.mstate == UP and s.rUp[k] and s.connected[k] and len(s.rlog[k]) < limit):
        return []
    rlog = s.rlog[k]
    return [evolve(s, rlog=_set(s.rlog, k, rlog + (s.log[len(rlog)],)))]


def take_report(cfg: Config, s: State, k: int, reported: int, **changes) -> State:
    """TakeReport(r, reported): record the report, or close the connection."""
    if ack_accepted(cfg, s, reported):
        return evolve(s, ack=_set(s.ack, k, reported), push2SlaveMaxOffset=max(s.push2SlaveMaxOffset, reported),
                      **changes)
    return evolve(s, connected=_set(s.connected, k, False), ack=_set(s.ack, k, 0), **changes)


def replica_ack_with(cfg: Config, s: State, k: int, reported: int) -> State | None:
    """ReplicaAck(r) with the slave reporting ``reported`` records."""
    if not (s.mstate == UP and s.rUp[k] and s.connected[k] and s.ack[k] < reported <= len(s.rlog[k])):
        return None
    return take_report(cfg, s, k, reported)


def replica_ack(cfg: Config, s: State, k: int) -> list[State]:
    """Replica reports an offset above its last ack; the master records or rejects it."""
    return [t for reported in range(s.ack[k] + 1, len(s.rlog[k]) + 1)
            if (t := replica_ack_with(cfg, s, k, reported))]


def forged_ack_with(cfg: Config, s: State, k: int, reported: int) -> State | None:
    """ForgedAck(r): a report of ``reported`` records that the slave never made."""
    if not (s.mstate == UP and s.connected[k] and max(s.committed, s.ack[k]) < reported <= s.wrote + 1):
        return None
    return take_report(cfg, s, k, reported, aux_ctrs=_bump(s, "forgedReport"))


def forged_ack(cfg: Config, s: State, k: int) -> list[State]:
    """Anything on the HA port: a report beyond committed on r's connection."""
    return [t for reported in range(max(s.committed, s.ack[k]) + 1, s.wrote + 2)
            if (t := forged_ack_with(cfg, s, k, reported))]


def replica_disconnect(cfg: Config, s: State, k: int) -> list[State]:
    """The network drops the HA connection; both processes live on."""
    if not s.connected[k]:
        return []
    return [evolve(s, connected=_set(s.connected, k, False), ack=_set(s.ack, k, 0),
                   aux_ctrs=_bump(s, "replicaDisconnect"))]


def replica_crash(cfg: Config, s: State, k: int) -> list[State]:
    """The replica's process dies (its page cache survives)."""
    if not s.rUp[k]:
        return []
    return [evolve(
        s, rUp=_set(s.rUp, k, False), connected=_set(s.connected, k, False),
        ack=_set(s.ack, k, 0), aux_ctrs=_bump(s, "replicaCrash"),
    )]


def replica_restart(cfg: Config, s: State, k: int) -> list[State]:
    """The replica's process starts again."""
    if s.rUp[k]:
        return []
    return [evolve(s, rUp=_set(s.rUp, k, True))]


# --- next-state relation -------------------------------------------------------

def successors(cfg: Config, bounds: Bounds, s: State,
               only: frozenset[str] | None = None) -> Iterator[tuple[str, State]]:
    """MCAckOrder!MCNext: (action label, successor) pairs, TLA+ action names; with ``only``,
    the successors of the actions named there alone (the same pairs, in the same order, as
    filtering all of them by the label's action name; a state machine that picks an action
    first need not compute the others')."""
    c = s.aux_ctrs
    want = (lambda name: True) if only is None else only.__contains__
    if want("Put") and len(s.reqs) < bounds.max_puts:
        for t in put(cfg, s):
            yield "Put", t
    if want("Commit"):
        for t in commit(cfg, s):
            yield "Commit", t
    if want("Flush"):
        for t in flush(cfg, s):
            yield "Flush", t
    if want("FlushFail") and c.fsyncFailure < bounds.max_fsync_failures:
        for t in flush_fail(cfg, s):
            yield "FlushFail", t
    if want("WriteFail") and c.writeFailure < bounds.max_write_failures and (
            cfg.transient_store_pool or len(s.reqs) < bounds.max_puts):
        for t in write_fail(cfg, s):
            yield "WriteFail", t
    answers = want("Respond"), want("Timeout")
    if any(answers):
        for i in range(1, len(s.reqs) + 1):
            if answers[0]:
                for t in respond(cfg, s, i):
                    yield f"Respond({i})", t
            if answers[1]:
                for t in timeout(cfg, s, i):
                    yield f"Timeout({i})", t
    if want("MasterProcessCrash") and c.masterProcessCrash < bounds.max_master_process_crashes:
        for t in master_process_crash(cfg, s):
            yield "MasterProcessCrash", t
    if want("MasterMachineCrash") and c.masterMachineCrash < bounds.max_master_machine_crashes:
        for t in master_machine_crash(cfg, s):
            yield "MasterMachineCrash", t
    if want("Recover"):
        for t in recover(cfg, s):
            yield "Recover", t
    for k, r in enumerate(cfg.replicas):
        if want("ReplicaConnect"):
            for t in replica_connect(cfg, s, k):
                yield f"ReplicaConnect({r})", t
        if want("Transfer"):
            for t in transfer(cfg, s, k):
                yield f"Transfer({r})", t
        if want("ReplicaAck"):
            for t in replica_ack(cfg, s, k):
                yield f"ReplicaAck({r})", t
        if want("ForgedAck") and c.forgedReport < bounds.max_forged_reports:
            for t in forged_ack(cfg, s, k):
                yield f"ForgedAck({r})", t
        if want("ReplicaDisconnect") and c.replicaDisconnect < bounds.max_replica_disconnects:
            for t in replica_disconnect(cfg, s, k):
                yield f"ReplicaDisconnect({r})", t
        if want("ReplicaCrash") and c.replicaCrash < bounds.max_replica_crashes:
            for t in replica_crash(cfg, s, k):
                yield f"ReplicaCrash({r})", t
        if want("ReplicaRestart"):
            for t in replica_restart(cfg, s, k):
                yield f"ReplicaRestart({r})", t


# Actions under weak fairness in AckOrder!FairnessOver, by label prefix.
FAIR_ACTIONS = ("Commit", "Flush", "Recover", "ReplicaConnect", "Transfer", "ReplicaAck",
                "ReplicaRestart", "Respond", "Timeout")
