"""Unbounded proofs with z3: the safety invariants are inductive.

TLC checks models with 2-3 puts.  Here the spec is abstracted to integer
watermarks (no bound on messages or offsets), per-slave integers, and one
*arbitrary* request (its offset is symbolic, so what holds for it holds for
every request).  For each configuration of the green cfgs we check

* base:  Init => Inv
* step:  Inv /\\ Next => Inv'      for every conjunct of Inv

where Inv is the properties below plus a documented strengthening (the
properties alone are not inductive).  A step that fails yields a
counterexample to induction (CTI): a pair of states and the action between.
For every bug variant the step check fails, and the CTI is then confirmed
reachable by bounded model checking from Init (the pre-state is reached
exactly, in k steps, then the action leads to the post-state).

The abstraction of each spec action (tla/AckOrder.tla, same names):

| abstract step | spec |
|---|---|
| Put | Put: one record appended; the arbitrary request may be this put |
| Commit, Flush, FlushFail | the same, with symbolic targets |
| WriteFail | the same: without the pool a put whose write fails (the arbitrary request may be it), with the pool a failed commit; ``PC`` is where the page cache really ends |
| Transfer(i), ReplicaAck(i) | the same, on slave i's length and ack |
| ForgedAck(i) | a report beyond committed on slave i's connection, checked like ReplicaAck |
| Respond, Timeout | on the arbitrary request |
| ReplicaConnect(i) | the handshake (content check, or offset only under the bug) |
| ReplicaDisconnect(i), ReplicaCrash(i) | the connection drops (the slave keeps its log) |
| MasterProcessCrash | MasterProcessCrash then Recover: the write buffer is lost |
| MasterMachineCrash | MasterMachineCrash then Recover: a prefix between durable and committed survives, perhaps with a torn record |

Offsets: record k occupies [k-1, k).  ``agree_i`` is the length of the
prefix of slave i's log that equals the master's log (contents abstracted
to "agrees or not"); ``rh_i`` says slave i holds the arbitrary request's
record; ``in_master`` says the master's log still holds it.  ``PC`` is the
end of what the page cache really holds (committed plus what failed writes
left there, or, under BugFsyncCoversFailedWrite, less than committed); the
answer's snapshot keeps ``eWr`` (its record was written) and ``ePrec`` (its
status followed thenCombine's precedence; ``ekind`` is the status kind).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import attrs
import z3

from spec import proofmemo
from spec.config import Config

WAIT, OK, ERR = 0, 1, 2
NONE, RESPOND, TIMEOUT, CRASH, WRITEFAIL = 0, 1, 2, 3, 4
K_NONE, K_FLUSH, K_SLAVE_TIMEOUT, K_SLAVE_NA = 0, 1, 2, 3      # error kinds of a deadline (ekind)
STATUS_NAMES = {WAIT: "WAITING", OK: "PUT_OK", ERR: "error"}
CAUSE_NAMES = {NONE: "-", RESPOND: "Respond", TIMEOUT: "Timeout", CRASH: "Crash", WRITEFAIL: "WriteFail"}
MAX_BMC_DEPTH = 10


@attrs.frozen
class Abstract:
    """The configuration the proof is about (bounds play no part)."""
    cfg: Config

    @property
    def n(self) -> int:
        return len(self.cfg.replicas)

    def bug(self, name: str) -> bool:
        return self.cfg.bug(name)


class S:
    """One state: z3 variables with a suffix."""

    INTS = ("W", "C", "F", "D", "PC", "p2", "off", "status", "cause", "answers", "eF", "ekind")
    BOOLS = ("up", "writable", "torn", "exists", "flushDone", "deadline", "in_master", "eWr", "ePrec")
    PER_REPLICA_INTS = ("ack", "recv", "agree")
    PER_REPLICA_BOOLS = ("conn", "rh", "eh")

    def __init__(self, a: Abstract, tag: str) -> None:
        self.a, self.tag = a, tag
        for name in self.INTS:
            setattr(self, name, z3.Int(f"{name}_{tag}"))
        for name in self.BOOLS:
            setattr(self, name, z3.Bool(f"{name}_{tag}"))
        for name in self.PER_REPLICA_INTS:
            setattr(self, name, [z3.Int(f"{name}{i}_{tag}") for i in range(a.n)])
        for name in self.PER_REPLICA_BOOLS:
            setattr(self, name, [z3.Bool(f"{name}{i}_{tag}") for i in range(a.n)])

    def all_vars(self) -> list:
        out = [getattr(self, n) for n in self.INTS + self.BOOLS]
        for n in self.PER_REPLICA_INTS + self.PER_REPLICA_BOOLS:
            out += getattr(self, n)
        return out

    def same(self, other: S, *changed: str) -> z3.BoolRef:
        """Every variable not named in ``changed`` keeps its value (``ack.1`` names one slave's)."""
        eqs = []
        for n in self.INTS + self.BOOLS:
            if n not in changed:
                eqs.append(getattr(other, n) == getattr(self, n))
        for n in self.PER_REPLICA_INTS + self.PER_REPLICA_BOOLS:
            for i in range(self.a.n):
                if n not in changed and f"{n}.{i}" not in changed:
                    eqs.append(getattr(other, n)[i] == getattr(self, n)[i])
        return z3.And(eqs)


# ------------------------------------------------------------------ policies

def policy_on_acks(a: Abstract, s: S) -> z3.BoolRef:
    """ReplicaCovered(off): GroupTransferService's rule on the master's view."""
    cfg = a.cfg
    if not cfg.sync_master:
        return z3.BoolVal(True)
    policy = cfg.ack_policy
    if a.bug("BugAnyReplicaForAllInSync") and policy == "ALL_IN_SYNC":
        policy = "ANY_REPLICA_MAX"
    if policy == "ANY_REPLICA_MAX":
        return s.p2 >= s.off
    acked = [z3.And(s.conn[i], s.ack[i] >= s.off) for i in range(a.n)]
    if policy == "AT_LEAST_K":
        return 1 + z3.Sum([z3.If(x, 1, 0) for x in acked]) >= cfg.in_sync_replicas
    return z3.And(acked)


def policy_holds(a: Abstract, holders: list) -> z3.BoolRef:
    """PolicyHolds(holders, sss) on real holders (the SyncStateSet is every slave until failover)."""
    cfg = a.cfg
    if cfg.ack_policy == "ANY_REPLICA_MAX":
        return z3.Or(holders) if holders else z3.BoolVal(False)
    if cfg.ack_policy == "AT_LEAST_K":
        return 1 + z3.Sum([z3.If(h, 1, 0) for h in holders]) >= cfg.in_sync_replicas
    return z3.And(holders)


# ------------------------------------------------------------------ Init and Next

def init(a: Abstract, s: S) -> z3.BoolRef:
    return z3.And(
        s.up, s.writable, z3.Not(s.torn), s.W == 0, s.C == 0, s.F == 0, s.D == 0, s.PC == 0, s.p2 == 0,
        z3.Not(s.exists), s.off == 0, s.status == WAIT, s.cause == NONE, s.answers == 0, s.eF == 0,
        s.ekind == K_NONE, z3.Not(s.eWr), s.ePrec,
        z3.Not(s.flushDone), z3.Not(s.deadline), z3.Not(s.in_master),
        *[z3.And(s.ack[i] == 0, s.recv[i] == 0, s.agree[i] == 0, z3.Not(s.conn[i]), z3.Not(s.rh[i]),
                 z3.Not(s.eh[i])) for i in range(a.n)])


def handshake_accepts(a: Abstract, s: S, i: int) -> z3.BoolRef:
    """HandshakeAccepts(i): the correct check compares contents up to committed, 4.9.x only
    the offset, B3 nothing; the off-by-one bug refuses a slave exactly at committed."""
    if a.bug("BugAcceptAckBeyondLog"):
        return z3.BoolVal(True)
    if a.bug("BugHandshakeOffsetOnly"):
        return s.recv[i] <= s.C
    accept = z3.And(s.recv[i] <= s.C, s.agree[i] == s.recv[i])
    if a.bug("BugHandshakeRefusesCaughtUp"):
        accept = z3.And(accept, s.recv[i] < s.C)
    return accept


def ack_accepted(a: Abstract, s: S, reported) -> z3.BoolRef:
    """AckAccepted: nothing beyond what the transfer may ship (committed data)."""
    if a.bug("BugAcceptAckBeyondLog"):
        return z3.BoolVal(True)
    return reported <= (s.W if a.bug("BugAckCheckedAgainstWrote") else s.C)


def written(a: Abstract, s: S) -> z3.BoolRef:
    """The arbitrary request's record is in the log (page cache, or the pool's buffer), not unwritten."""
    in_log = s.in_master if a.cfg.transient_store_pool else z3.And(s.in_master, s.off <= s.C)
    return z3.And(in_log, z3.Not(z3.And(s.PC < s.off, s.off <= s.C)))


def _max(x, y):
    return z3.If(x > y, x, y)


def actions(a: Abstract, s: S, t: S) -> dict[str, z3.BoolRef]:
    """Each action as a relation between s and t."""
    cfg, n = a.cfg, a.n
    acts: dict[str, z3.BoolRef] = {}
    pool = cfg.transient_store_pool
    commits_on_put = cfg.commit_on_replica_wait and cfg.sync_master
    deadline = cfg.sync_flush and not a.bug("BugNoFlushDiskWatcher")
    request_fields = ("exists", "off", "status", "cause", "answers", "flushDone", "deadline", "in_master", "rh",
                      "eh", "eF", "ekind", "eWr", "ePrec")
    fresh = [*[z3.Not(t.rh[i]) for i in range(n)], *[z3.Not(t.eh[i]) for i in range(n)]]

    def created(status: int, cause: int) -> z3.BoolRef:
        """The arbitrary request is the one this step creates (its record at W + 1)."""
        answered = status != WAIT
        return z3.And(z3.Not(s.exists), t.exists, t.off == t.W, t.status == status, t.cause == cause,
                      t.answers == (1 if answered else 0), t.flushDone == (not cfg.sync_flush),
                      t.deadline == deadline, t.in_master, *fresh, t.eF == (s.F if answered else 0),
                      t.ekind == K_NONE, z3.Not(t.eWr), t.ePrec)

    # Put: one record at W+1; the arbitrary request may be this one.
    new_c = t.W if (not pool or commits_on_put) else s.C
    acts["Put"] = z3.And(s.up, s.writable, t.W == s.W + 1, t.C == new_c, t.PC == _max(s.PC, new_c),
                         z3.Or(s.same(t, "W", "C", "PC"),
                               z3.And(created(WAIT, NONE), s.same(t, "W", "C", "PC", *request_fields))))
    if pool:
        acts["Commit"] = z3.And(s.up, s.C < t.C, t.C <= s.W, t.PC == _max(s.PC, t.C), s.same(t, "C", "PC"))

    def release(bound) -> z3.BoolRef:
        return t.flushDone == z3.Or(s.flushDone, z3.And(s.exists, s.off <= bound))

    allowed = z3.Or(s.writable, a.bug("BugFsyncCoversFailedWrite"))
    bound = s.C if a.bug("BugFlushOneFileReleasesAll") else t.F
    acts["Flush"] = z3.And(s.up, allowed, s.F < t.F, t.F <= s.C,
                           t.D == z3.If(s.D == s.F, z3.If(t.F < s.PC, t.F, s.PC), s.D),
                           release(bound), s.same(t, "F", "D", "flushDone"))
    if a.bug("BugFlushIgnoresFsyncError"):
        acts["FlushFail"] = z3.And(s.up, allowed, s.F < t.F, t.F <= s.C, release(bound),
                                   s.same(t, "F", "flushDone"))
    else:
        acts["FlushFail"] = z3.And(s.up, allowed, s.F < s.C, z3.Not(t.writable), s.same(t, "writable"))
    # WriteFail: nothing of the failed write is counted; some of it may have landed (PC).
    if pool:
        if a.bug("BugFsyncCoversFailedWrite"):
            landed = z3.If(s.PC < s.C, t.PC == s.PC, z3.And(s.PC <= t.PC, t.PC <= s.W))
            acts["WriteFail"] = z3.And(s.up, s.C < s.W, s.C <= t.C, t.C <= s.W, landed, z3.Not(t.writable),
                                       s.same(t, "writable", "C", "PC"))
        else:
            acts["WriteFail"] = z3.And(s.up, s.C < s.W, s.PC <= t.PC, t.PC <= s.W, z3.Not(t.writable),
                                       s.same(t, "writable", "PC"))
    else:
        if a.bug("BugFsyncCoversFailedWrite"):      # kept as written: the request waits
            committed, landed = t.C == t.W, z3.If(s.PC < s.C, t.PC == s.PC, z3.Or(t.PC == s.C, t.PC == t.C))
            mine = created(WAIT, NONE)
        else:
            committed, landed = t.C == s.C, z3.Or(t.PC == s.C, t.PC == s.C + 1)
            mine = created(ERR, WRITEFAIL)
        acts["WriteFail"] = z3.And(s.up, s.writable, t.W == s.W + 1, committed, landed, z3.Not(t.writable),
                                   z3.Or(s.same(t, "W", "C", "PC", "writable"),
                                         z3.And(mine, s.same(t, "W", "C", "PC", "writable", *request_fields))))
    limit = s.W if a.bug("BugTransferBeyondCommitted") else s.C
    for i in range(n):
        # Transfer(i): the slave appends the master's data after its end (its log agrees so far).
        got = z3.And(s.exists, s.in_master, s.recv[i] < s.off, s.off <= t.recv[i])
        acts[f"Transfer({i})"] = z3.And(
            s.up, s.conn[i], s.agree[i] == s.recv[i], s.recv[i] < t.recv[i], t.recv[i] <= limit,
            t.agree[i] == t.recv[i], t.rh[i] == z3.Or(s.rh[i], got), s.same(t, f"recv.{i}", f"agree.{i}", f"rh.{i}"))
        # ReplicaAck(i): the slave reports what it holds; the master rejects an ack beyond what it shipped (B3).
        acts[f"ReplicaAck({i})"] = z3.And(
            s.up, s.conn[i], s.ack[i] < t.ack[i], t.ack[i] <= s.recv[i], ack_accepted(a, s, t.ack[i]),
            t.p2 == _max(t.ack[i], s.p2), s.same(t, f"ack.{i}", "p2"))
        # ForgedAck(i): a report beyond committed that the slave never made.
        reported = z3.Int(f"forged{i}_{t.tag}")
        acts[f"ForgedAck({i})"] = z3.And(
            s.up, s.conn[i], _max(s.C, s.ack[i]) < reported, reported <= s.W + 1,
            z3.If(ack_accepted(a, s, reported),
                  z3.And(t.conn[i], t.ack[i] == reported, t.p2 == _max(reported, s.p2)),
                  z3.And(z3.Not(t.conn[i]), t.ack[i] == 0, t.p2 == s.p2)),
            s.same(t, f"conn.{i}", f"ack.{i}", "p2"))
        # ReplicaConnect(i): the slave's length becomes its ack.
        acts[f"ReplicaConnect({i})"] = z3.And(
            s.up, z3.Not(s.conn[i]), handshake_accepts(a, s, i), t.conn[i], t.ack[i] == s.recv[i],
            t.p2 == _max(s.recv[i], s.p2), s.same(t, f"conn.{i}", f"ack.{i}", "p2"))
        acts[f"ReplicaDisconnect({i})"] = z3.And(s.conn[i], z3.Not(t.conn[i]), t.ack[i] == 0,
                                                 s.same(t, f"conn.{i}", f"ack.{i}"))
    # Respond: both legs done.
    if a.bug("BugAckOnWrote") and cfg.sync_flush:
        flush_leg = s.off <= s.W
    elif a.bug("BugAckOnCommitted") and cfg.sync_flush:
        flush_leg = s.off <= s.C
    else:
        flush_leg = s.flushDone
    may_answer = s.status == WAIT
    if a.bug("BugDoubleResponse"):
        may_answer = z3.Or(s.status == WAIT, s.status == OK)

    def answered(kind, precedence) -> list:
        return [t.answers == s.answers + 1, t.eF == s.F, *[t.eh[i] == s.rh[i] for i in range(n)],
                t.eWr == written(a, s), t.ekind == kind, t.ePrec == precedence]

    changed = ("status", "cause", "answers", "eF", "eh", "eWr", "ekind", "ePrec")
    acts["Respond"] = z3.And(s.up, s.exists, s.status == WAIT, flush_leg, policy_on_acks(a, s),
                             t.status == OK, t.cause == RESPOND, *answered(K_NONE, True), s.same(t, *changed))
    # Timeout: a deadline answers with thenCombine's precedence over the pending legs.
    repl_pending = z3.Not(policy_on_acks(a, s))
    any_conn = z3.Or(s.conn) if n else z3.BoolVal(False)
    kind = z3.Int(f"kind_{t.tag}")
    allowed_kinds = z3.If(repl_pending, z3.If(any_conn, z3.Or(kind == K_SLAVE_TIMEOUT, kind == K_SLAVE_NA),
                                              kind == K_SLAVE_NA), kind == K_FLUSH)
    if a.bug("BugFlushTimeoutHidesSlaveTimeout"):
        allowed_kinds = z3.If(z3.Not(flush_leg), kind == K_FLUSH, allowed_kinds)
    slave_kind = z3.Or(kind == K_SLAVE_TIMEOUT, kind == K_SLAVE_NA)
    precedence = z3.And(slave_kind == repl_pending, z3.Implies(z3.And(repl_pending, z3.Not(any_conn)),
                                                              kind == K_SLAVE_NA))
    if a.bug("BugTimeoutAsOK"):
        timeout = z3.And(t.status == OK, *answered(K_NONE, True))
    else:
        timeout = z3.And(t.status == ERR, allowed_kinds, *answered(kind, precedence))
    acts["Timeout"] = z3.And(s.up, s.exists, may_answer, t.cause == TIMEOUT, timeout, s.same(t, *changed))

    # Crashes, each with its recovery: the waiting request gets an error; slaves are disconnected.
    def crash_common(keep, torn_kept) -> list:
        aborted = z3.If(z3.And(s.exists, s.status == WAIT),
                        z3.And(t.status == ERR, t.cause == CRASH, *answered(K_NONE, True)),
                        z3.And(*[getattr(t, f) == getattr(s, f) for f in changed if f != "eh"],
                               *[t.eh[i] == s.eh[i] for i in range(n)]))
        end = keep + z3.If(torn_kept, 1, 0)
        return [s.up, t.up, t.writable, t.W == end, t.C == end, t.F == end, t.D == end, t.PC == end, t.p2 == 0,
                t.torn == torn_kept, t.in_master == z3.And(s.in_master, s.off <= keep), aborted,
                *[z3.And(z3.Not(t.conn[i]), t.ack[i] == 0, t.agree[i] == z3.If(s.agree[i] < keep, s.agree[i], keep))
                  for i in range(n)],
                s.same(t, "up", "writable", "W", "C", "F", "D", "PC", "p2", "torn", "in_master", *changed,
                       "conn", "ack", "agree")]

    acts["MasterProcessCrash"] = z3.And(*crash_common(s.PC, z3.BoolVal(False)))
    keep = z3.Int(f"keep_{t.tag}")
    torn = z3.Bool(f"tornkept_{t.tag}")
    torn_kept = z3.And(torn, keep < s.PC) if a.bug("BugRecoveryKeepsTorn") else z3.BoolVal(False)
    low = z3.If(s.D < s.PC, s.D, s.PC)
    acts["MasterMachineCrash"] = z3.And(low <= keep, keep <= s.PC, *crash_common(keep, torn_kept))
    return acts


def next_rel(a: Abstract, s: S, t: S) -> z3.BoolRef:
    return z3.Or(list(actions(a, s, t).values()))


# ------------------------------------------------------------------ properties

def properties(a: Abstract) -> dict[str, Callable[[S], z3.BoolRef]]:
    """The safety properties, in the form the configuration promises (names of
    tla/AckOrderProperties.tla), plus the safety half of EveryRequestAnswered."""
    cfg, n = a.cfg, a.n
    props: dict[str, Callable[[S], z3.BoolRef]] = {
        "WatermarksOrdered": lambda s: z3.Implies(s.up, z3.And(
            0 <= s.D, s.D <= s.F, s.F <= s.C, s.C <= s.W, 0 <= s.p2, s.p2 <= s.C,
            *[z3.Implies(s.conn[i], z3.And(0 <= s.ack[i], s.ack[i] <= s.recv[i], s.recv[i] <= s.C))
              for i in range(n)])),
        "TimeoutIsError": lambda s: z3.Implies(s.cause == TIMEOUT, s.status != OK),
        "OneResponsePerRequest": lambda s: s.answers <= 1,
        "LogMatching": lambda s: z3.Implies(s.up, z3.And([z3.Implies(s.conn[i], s.agree[i] == s.recv[i])
                                                          for i in range(n)])),
        "AmbiguousAckOrdered": lambda s: z3.Implies(s.up, z3.Not(s.torn)),
        "NoAckBeforeWrite": lambda s: z3.Implies(s.status == OK, s.eWr),
        "TimeoutStatusPrecedence": lambda s: z3.Implies(z3.And(s.cause == TIMEOUT, s.status != OK), s.ePrec),
        # The safety half of ReplicasCatchUp: a slave whose log follows the master's can connect.
        "CompatibleSlaveAccepted": lambda s: z3.Implies(s.up, z3.And([
            z3.Implies(z3.And(z3.Not(s.conn[i]), s.agree[i] == s.recv[i], s.recv[i] <= s.C),
                       handshake_accepts(a, s, i)) for i in range(n)])),
    }
    if cfg.sync_flush:
        props["NoAckBeforeFlush"] = lambda s: z3.Implies(s.status == OK, s.eF >= s.off)
        props["EveryWaiterHasDeadline"] = lambda s: z3.Implies(
            z3.And(s.exists, s.status == WAIT, z3.Not(s.flushDone)), s.deadline)
    if cfg.sync_master:
        props["NoAckBeforeReplicas"] = lambda s: z3.Implies(s.status == OK, policy_holds(a, s.eh))
    if cfg.sync_flush or cfg.sync_master:
        def survives(s: S) -> z3.BoolRef:
            kept = s.in_master
            if cfg.sync_master:
                kept = z3.Or(kept, policy_holds(a, s.rh))
            return z3.Implies(z3.And(s.exists, s.status == OK, s.cause == RESPOND), kept)
        props["AckedSurvivesCrash"] = survives
    return props


def strengthening(a: Abstract) -> dict[str, Callable[[S], z3.BoolRef]]:
    """What makes the properties inductive.  Each is an invariant of the spec
    in its own right (checked by the same step query)."""
    cfg, n = a.cfg, a.n
    out: dict[str, Callable[[S], z3.BoolRef]] = {
        # the master is always up between steps (crash and recovery are one abstract step)
        "S_Up": lambda s: s.up,
        "S_Offsets": lambda s: z3.And(0 <= s.D, s.D <= s.F, s.F <= s.C, s.C <= s.W, s.PC <= s.W,
                                      *[z3.And(0 <= s.agree[i], s.agree[i] <= s.recv[i], 0 <= s.ack[i])
                                        for i in range(n)], 0 <= s.p2, s.answers >= 0),
        # what a slave shares with the master is committed data (slaves copy only committed data,
        # and a crash truncates both); so the handshake's content check admits only committed data
        "S_AgreeCommitted": lambda s: z3.And([s.agree[i] <= s.C for i in range(n)]),
        # a connected slave has only what the master committed (B3's check keeps acks in the log)
        "S_ConnectedBelowCommitted": lambda s: z3.And([z3.Implies(s.conn[i], z3.And(
            s.agree[i] == s.recv[i], s.recv[i] <= s.C, s.ack[i] <= s.recv[i])) for i in range(n)]),
        "S_Push2InLog": lambda s: z3.And(s.p2 <= s.C, z3.Implies(
            z3.And(s.exists, s.status == WAIT, s.p2 >= s.off),
            # push2SlaveMaxOffset outlives a disconnect: the slave that acked still holds the record
            z3.Or([s.rh[i] for i in range(n)]) if n else z3.BoolVal(False))),
        # what the page cache really holds: the committed records and perhaps some a failed write left;
        # a writable store without the pool has had no failed write since its last start
        "S_PageCache": lambda s: z3.And(
            s.C <= s.PC if not a.bug("BugFsyncCoversFailedWrite") else z3.BoolVal(True),
            z3.Implies(s.writable, s.PC == s.C) if not cfg.transient_store_pool else z3.BoolVal(True),
            z3.Implies(s.writable, s.C == s.W) if not cfg.transient_store_pool else z3.BoolVal(True)),
        "S_Request": lambda s: z3.And(
            z3.Implies(s.exists, s.off >= 1),
            # a waiting request's record was written (the write of a failed one answered it)
            z3.Implies(z3.And(s.exists, s.status == WAIT),
                       s.off <= s.C if not cfg.transient_store_pool else z3.BoolVal(True)),
            z3.Implies(z3.Not(s.exists), z3.And(s.status == WAIT, s.answers == 0, z3.Not(s.in_master),
                                                 *[z3.Not(s.rh[i]) for i in range(n)])),
            z3.Implies(s.in_master, z3.And(s.exists, s.off <= s.W)),
            z3.Implies(z3.And(s.exists, s.status == WAIT), z3.And(s.in_master, s.answers == 0,
                                                                  s.cause == NONE)),
            z3.Implies(s.status != WAIT, z3.And(s.exists, s.answers >= 1, s.cause != NONE)),
            *[z3.Implies(s.rh[i], z3.And(s.exists, s.recv[i] >= s.off)) for i in range(n)],
            # a slave connected to the master that still holds the record holds the same record
            *[z3.Implies(z3.And(s.in_master, s.agree[i] >= s.off), s.rh[i]) for i in range(n)],
        ),
        # fields that mean nothing yet hold their initial values (so CTIs are reachable as printed)
        "S_Canonical": lambda s: z3.And(
            z3.Implies(z3.Not(s.exists), z3.And(s.off == 0, z3.Not(s.flushDone), z3.Not(s.deadline))),
            z3.Implies(s.exists, s.deadline == (cfg.sync_flush and not a.bug("BugNoFlushDiskWatcher"))),
            z3.Implies(s.exists, z3.Or(s.flushDone, bool(cfg.sync_flush))),
            z3.Implies(s.status == WAIT, z3.And(s.eF == 0, *[z3.Not(s.eh[i]) for i in range(n)], z3.Not(s.eWr),
                                                s.ePrec, s.ekind == K_NONE)),
            *[z3.Implies(z3.Not(s.conn[i]), s.ack[i] == 0) for i in range(n)],
            z3.Or(s.status == WAIT, s.status == OK, s.status == ERR),
            z3.Or(s.cause == NONE, s.cause == RESPOND, s.cause == TIMEOUT, s.cause == CRASH, s.cause == WRITEFAIL),
            z3.And(K_NONE <= s.ekind, s.ekind <= K_SLAVE_NA)),
        "S_Durable": lambda s: z3.And(
            z3.Implies(z3.And(s.exists, s.status == WAIT, s.flushDone, bool(cfg.sync_flush)), s.off <= s.F),
            s.D == s.F),
    }
    if cfg.sync_flush:
        out["S_AckedDurable"] = lambda s: z3.Implies(z3.And(s.status == OK, s.cause == RESPOND),
                                                     z3.And(s.in_master, s.off <= s.D))
    if cfg.sync_master and not cfg.sync_flush:
        out["S_AckedHeld"] = lambda s: z3.Implies(z3.And(s.status == OK, s.cause == RESPOND),
                                                  z3.Or(s.in_master, policy_holds(a, s.rh)))
    if cfg.sync_master:
        out["S_AckedHolders"] = lambda s: z3.Implies(
            z3.And(s.status == OK, s.cause == RESPOND),
            z3.And([z3.Implies(s.eh[i], s.rh[i]) for i in range(n)]))
    return out


# ------------------------------------------------------------------ checking

@attrs.frozen
class Result:
    config: str                  # the model's name in tla/manifest.json
    invariant: str
    result: str                  # "proved" | "CTI" | "base fails" | "no CTI" | "unknown" (z3 could not tell)
    seconds: float
    cti: dict | None = None      # {"action", "pre", "post", "reachable_in"}


def _model_state(m: z3.ModelRef, s: S) -> dict:
    def val(x):
        v = m.eval(x, model_completion=True)
        return v.as_long() if z3.is_int_value(v) else z3.is_true(v)

    out = {n: val(getattr(s, n)) for n in S.INTS + S.BOOLS}
    out["status"] = STATUS_NAMES.get(out["status"], out["status"])
    out["cause"] = CAUSE_NAMES.get(out["cause"], out["cause"])
    for n in S.PER_REPLICA_INTS + S.PER_REPLICA_BOOLS:
        out[n] = [val(x) for x in getattr(s, n)]
    return out


def _pin(s: S, m: z3.ModelRef) -> z3.BoolRef:
    return z3.And([x == m.eval(x, model_completion=True) for x in s.all_vars()])


def _bounded(a: Abstract, s: S, bound: int) -> z3.BoolRef:
    ints = [getattr(s, n) for n in ("W", "C", "F", "D", "PC", "p2", "off", "eF", "answers")]
    for n in S.PER_REPLICA_INTS:
        ints += getattr(s, n)
    return z3.And([z3.And(x >= 0, x <= bound) for x in ints])


# Set by a Ctrl-C handler that only records it (cli/prove.py): a KeyboardInterrupt raised wherever the
# signal lands can land in a z3 object's finalizer, where Python prints it and drops it.  The next
# check raises it instead, from a place where it propagates.
STOP = threading.Event()


def check(solver: z3.Solver, *assumptions) -> z3.CheckSatResult:
    """``solver.check(*assumptions)``, but a Ctrl-C is a KeyboardInterrupt: z3 takes SIGINT itself,
    stops and answers ``unknown`` ("interrupted from keyboard"), after which the proofs went on as if
    nothing had happened (and one run ended as a failed assertion, another as all proved); and one
    recorded in ``STOP`` outside a check is raised here."""
    if STOP.is_set():
        raise KeyboardInterrupt
    # z3's own SIGINT handler off: with it on, z3 took the signal itself, and one that landed where
    # z3 did not cancel the check (its end) was lost — Python's handler never ran, no STOP was
    # recorded, and `ackorder prove` went on to "all proofs hold", exit 0.  Now the signal reaches
    # Python's handler, which runs when the check returns (each check here takes seconds at most).
    solver.set("ctrl_c", False)
    answer = solver.check(*assumptions)
    # (kept for a solver whose ctrl_c a caller turned back on: "interrupted from keyboard" under
    # Python's own SIGINT handler, "canceled" under another; no timeout or resource limit is ever
    # set here, so nothing else cancels a check)
    if STOP.is_set() or (answer == z3.unknown and any(w in solver.reason_unknown() for w in ("interrupt", "cancel"))):
        raise KeyboardInterrupt
    return answer


def find_cti(a: Abstract, inv: Callable[[S], z3.BoolRef], prop: Callable[[S], z3.BoolRef]):
    """A small CTI for ``prop``: the smallest offsets bound that admits one.  The unbounded
    query goes first: when it has no model (the conjunct is proved, the usual case) no bounded
    one has, and the three bounded queries would only repeat that answer."""
    s, t = S(a, "pre"), S(a, "post")

    def solve(bound: int | None) -> z3.ModelRef | None:
        solver = z3.Solver()
        solver.add(inv(s), next_rel(a, s, t), z3.Not(prop(t)))
        if bound is not None:
            solver.add(_bounded(a, s, bound), _bounded(a, t, bound))
        return solver.model() if check(solver) == z3.sat else None

    unbounded = solve(None)
    if unbounded is None:
        return None
    m = next((m for m in map(solve, (2, 3, 5)) if m is not None), unbounded)
    return s, t, m, _action_taken(a, m, s, t)


def reachable_in(a: Abstract, s: S, t: S, m: z3.ModelRef) -> int | None:
    """Bounded model checking: the shortest k such that Init reaches the CTI's
    pre-state in k steps and its post-state in one more (None if not within the bound)."""
    for k in range(MAX_BMC_DEPTH + 1):
        states = [S(a, f"bmc{k}_{j}") for j in range(k + 2)]
        solver = z3.Solver()
        solver.add(init(a, states[0]))
        for j in range(k + 1):
            solver.add(next_rel(a, states[j], states[j + 1]))
        pre = z3.substitute(_pin(s, m), *[(x, y) for x, y in zip(s.all_vars(), states[k].all_vars())])
        post = z3.substitute(_pin(t, m), *[(x, y) for x, y in zip(t.all_vars(), states[k + 1].all_vars())])
        solver.add(pre, post)
        if check(solver) == z3.sat:
            return k
    return None


def shortest_violation(a: Abstract, prop: Callable[[S], z3.BoolRef], tag: str):
    """Bounded model checking: the fewest steps (0..MAX_BMC_DEPTH) from Init to a
    state violating ``prop``, as (states, model), or None."""
    for k in range(0, MAX_BMC_DEPTH + 1):
        states = [S(a, f"{tag}{k}_{j}") for j in range(k + 1)]
        solver = z3.Solver()
        solver.add(init(a, states[0]), z3.Not(prop(states[k])))
        for j in range(k):
            solver.add(next_rel(a, states[j], states[j + 1]))
        if check(solver) == z3.sat:
            return states, solver.model()
    return None


def _action_taken(a: Abstract, m: z3.ModelRef, s: S, t: S) -> str:
    acts = actions(a, s, t)
    return next(n for n, rel in acts.items() if z3.is_true(m.eval(rel, model_completion=True)))


def satisfiable_with(solver: z3.Solver, formula: z3.BoolRef, tag: str) -> z3.CheckSatResult:
    """Whether what ``solver`` holds, and ``formula``, can be true together (the model is then
    ``solver.model()``).  The formula is asserted under an assumption literal of its own, so that
    one solver answers many such questions about the same assertions (an invariant and the step
    relation) and keeps what z3 learned about them from one question to the next: the step cases
    of every green failover configuration took 6.4 CPU-s with a solver per conjunct and 1.0 so
    (measured 2026-11-26).  A formula found impossible is retracted for good."""
    literal = z3.Bool(f"assume_{tag}")
    solver.add(z3.Implies(literal, formula))
    answer = check(solver, literal)
    if answer == z3.unsat:
        solver.add(z3.Not(literal))
    return answer


def conjunct_checks(init_state: z3.BoolRef, invariant_and_step: list[z3.BoolRef]) -> tuple[z3.Solver, z3.Solver]:
    """The two solvers every conjunct of an inductive invariant is checked on: Init, and the
    invariant with the step relation."""
    base, step = z3.Solver(), z3.Solver()
    base.add(init_state)
    step.add(*invariant_and_step)
    # Contradictory assertions would prove every conjunct: each solver must have a model first.
    assert check(base) == z3.sat, "Init has no state"
    assert check(step) == z3.sat, "no state satisfying the invariant takes a step"
    return base, step


@proofmemo.memo("write_path.prove")
def prove(name: str, cfg: Config) -> list[Result]:
    """Every conjunct of the inductive invariant (the properties, then the
    strengthening) of one configuration: proved, or a CTI confirmed reachable
    (or not, within MAX_BMC_DEPTH steps) by bounded model checking.  A question
    z3 cannot answer (``unknown``) is reported as such, never as proved."""
    a = Abstract(cfg)
    every = {**properties(a), **strengthening(a)}

    def inv(s: S) -> z3.BoolRef:
        return z3.And([f(s) for f in every.values()])

    results = []
    s0, pre, post = S(a, "init"), S(a, "pre"), S(a, "post")
    base, step = conjunct_checks(init(a, s0), [inv(pre), next_rel(a, pre, post)])
    for i, (pname, prop) in enumerate(every.items()):
        start = time.perf_counter()
        answer = satisfiable_with(base, z3.Not(prop(s0)), f"base{i}")
        if answer != z3.unsat:
            results.append(Result(name, pname, "base fails" if answer == z3.sat else "unknown",
                                  round(time.perf_counter() - start, 3)))
            continue
        answer = satisfiable_with(step, z3.Not(prop(post)), f"step{i}")
        if answer != z3.sat:
            results.append(Result(name, pname, "proved" if answer == z3.unsat else "unknown",
                                  round(time.perf_counter() - start, 3)))
            continue
        found = find_cti(a, inv, prop)      # the smallest CTI, on solvers of its own
        assert found is not None, f"{name} {pname}: the step case has a model, find_cti none"
        s, t, m, action = found
        k = reachable_in(a, s, t, m)
        results.append(Result(name, pname, "CTI", round(time.perf_counter() - start, 3),
                              {"action": action, "pre": _model_state(m, s), "post": _model_state(m, t),
                               "reachable_in": k}))
    return results


@proofmemo.memo("write_path.vacuous_actions")
def vacuous_actions(cfg: Config) -> list[str]:
    """Actions no state satisfying the invariant can take: a proof over them would be empty."""
    a = Abstract(cfg)
    every = {**properties(a), **strengthening(a)}
    s, t = S(a, "vpre"), S(a, "vpost")
    solver = z3.Solver()
    solver.add(*[f(s) for f in every.values()])
    return [name for k, (name, rel) in enumerate(actions(a, s, t).items())
            if satisfiable_with(solver, rel, f"action{k}") != z3.sat]


# The bug cfgs name the property TLC finds violated; the liveness one has its safety half here.
SAFETY_HALF = {"EveryRequestAnswered": "EveryWaiterHasDeadline", "ReplicasCatchUp": "CompatibleSlaveAccepted"}


@attrs.frozen(eq=False)
class Witness:
    """A bounded model check's path from Init to a violation, as plain data (it is shared
    between processes by spec/proofmemo.py): every state, every step's action, and per state
    which conjuncts of the inductive invariant hold."""
    states: tuple[dict, ...]
    actions: tuple[str, ...]
    holds: tuple[dict[str, bool], ...]


def witness(a, found, every: dict, model_state: Callable, action_taken: Callable,
            actions: Sequence[str] | None = None) -> Witness | None:
    """``found`` (states and a z3 model, or None) as a Witness; shared with spec/failover/proofs.py.
    Each step's action is ``actions``' when the path was pinned to them, else read from the model."""
    if found is None:
        return None
    states, m = found
    assert actions is None or len(actions) == len(states) - 1, (len(actions), len(states))
    return Witness(tuple(model_state(m, s) for s in states),
                   tuple(actions) if actions is not None else
                   tuple(action_taken(a, m, states[j], states[j + 1]) for j in range(len(states) - 1)),
                   tuple({n: z3.is_true(m.eval(f(s), model_completion=True)) for n, f in every.items()}
                         for s in states))


def cti_on_path(name: str, prop_name: str, w: Witness | None, seconds: float) -> Result:
    """The first step of the witness where the inductive invariant breaks: a CTI reachable by
    construction (the Init state itself when it breaks it: a failed base case)."""
    if w is None:
        return Result(name, prop_name, "no CTI", seconds)
    holds = w.holds
    if not all(holds[0].values()):
        return Result(name, prop_name, "CTI", seconds,
                      {"action": "Init", "pre": w.states[0], "post": w.states[0], "reachable_in": 0,
                       "violated": [n for n, ok in holds[0].items() if not ok], "property_violated_after": 0,
                       "path": []})
    j = next(j for j in range(len(holds) - 1) if all(holds[j].values()) and not all(holds[j + 1].values()))
    return Result(name, prop_name, "CTI", seconds,
                  {"action": w.actions[j], "pre": w.states[j], "post": w.states[j + 1], "reachable_in": j,
                   "violated": [n for n, ok in holds[j + 1].items() if not ok],
                   "property_violated_after": len(w.states) - 1, "path": list(w.actions)})


@proofmemo.memo("write_path.bug_witness")
def _bug_witness(cfg: Config, prop_name: str) -> Witness | None:
    """The shortest path to a violation of ``prop_name`` (bug_cti and cti_path share it)."""
    a = Abstract(cfg)
    props = properties(a)
    return witness(a, shortest_violation(a, props[prop_name], "bug"), {**props, **strengthening(a)},
                   _model_state, _action_taken)


def bug_cti(name: str, cfg: Config, expected: str) -> Result:
    """For a bug variant: the shortest path from Init to a violation of the
    expected property (bounded model checking), and on it the first step where
    the inductive invariant breaks: a CTI that is reachable by construction."""
    prop_name = SAFETY_HALF.get(expected, expected)
    start = time.perf_counter()
    w = _bug_witness(cfg, prop_name)
    return cti_on_path(name, prop_name, w, round(time.perf_counter() - start, 3))


def cti_path(cfg: Config, expected: str) -> list[str] | None:
    """The spec actions of the shortest path to a violation of ``expected``
    (the path bug_cti finds; [] when the initial state violates it), for
    replaying through the twin, or None when there is none within the bound."""
    w = _bug_witness(cfg, SAFETY_HALF.get(expected, expected))
    return None if w is None else list(w.actions)


def changed(pre: dict, post: dict) -> dict:
    """The fields a step changed, for printing a CTI as a readable pair."""
    return {k: (pre[k], post[k]) for k in pre if pre[k] != post[k]}


@attrs.frozen
class GreenProof:
    configuration: str
    results: tuple[Result, ...]
    properties: frozenset[str]        # the safety properties (the rest of results strengthen them)
    vacuous: tuple[str, ...]          # actions the abstraction can never take in this configuration

    @property
    def ok(self) -> bool:
        return all(r.result == "proved" for r in self.results) and not self.vacuous


@attrs.frozen
class ProofReport:
    green: tuple[GreenProof, ...]
    bugs: tuple[Result, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(g.ok for g in self.green) and all(r.result == "CTI" for r in self.bugs)


def prove_all(green: list[tuple[str, Config, str]], bugs: list[tuple[str, Config, str]],
              on_done: Callable[[str], None] = lambda name: None) -> ProofReport:
    """Every green configuration's invariants proved inductive, a reachable CTI for every bug."""
    start = time.perf_counter()
    proofs = []
    for name, cfg, _ in green:
        proofs.append(GreenProof(name, tuple(prove(name, cfg)), frozenset(properties(Abstract(cfg))),
                                 tuple(vacuous_actions(cfg))))
        on_done(name)
    ctis = []
    for name, cfg, expected in bugs:
        ctis.append(bug_cti(name, cfg, expected))
        on_done(name)
    return ProofReport(tuple(proofs), tuple(ctis), round(time.perf_counter() - start, 2))
