"""Unbounded proofs with z3 for the failover module (tla/AckOrderFailover*.tla).

TLC checks three brokers and two or three puts.  Here the failover spec is
abstracted to one *arbitrary offset* K (symbolic, >= 1) and one *arbitrary
request* R that, once put, sits at K: what holds for them holds for every
offset and every request.  Logs are their lengths plus the record each
broker holds at K (an id, 0 for none), the epoch that record was written
in, and whether the broker's epoch cache attributes K to that epoch
(``acc``); epoch caches are further abstracted to whether they are ordered
(E1, ``ord``) and the epoch and start of their last entry.  Controller
state, every broker's view of it (local and proposed SSS as membership
bits), roles, epochs, connections, acks and confirmOffset are kept as in
the spec.  Messages, elections, SSS proposals and faults are unbounded.

The handshake's truncation point (findConsistentPoint over the two epoch
caches) is abstracted by its guarantee when both caches are accurate and
ordered: it keeps the record at K exactly when the master holds the same
record there (the epoch-prefix agreement that makes the handshake correct);
with an inaccurate or disordered cache it may cut anywhere in the slave's
log.  The bugs that corrupt caches (B13, B14, B21, the unchecked append)
clear those flags; the others change the rules the spec changes.

For each green failover cfg's configuration: base ``Init => Inv`` and step
``Inv /\\ Next => Inv'`` for every conjunct (the properties, then the
documented strengthening).  For every bug: the shortest path from Init to a
violation of the property its cfg names (bounded model checking), and on it
the first step where the inductive invariant breaks: a reachable CTI.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
import z3

from spec import proofmemo
from spec import proofs as write_path
from spec.failover.config import FailoverConfig

WAIT, OK, ERR = 0, 1, 2
STATUS_NAMES = {WAIT: "WAITING", OK: "PUT_OK", ERR: "error"}
NONE = -1
MAX_BMC_DEPTH = 14

SCALARS_INT = ("mid", "mep", "sep", "rid", "rSt", "rEp", "rM", "nid")
SCALARS_BOOL = ("rEx", "lostR", "office")   # office: ghost, the controller's master has taken up its epoch
BROKER_INT = ("bm", "be", "lsep", "len", "conf", "ack", "cur", "est", "lastE", "rec", "recE", "stl", "stk", "stkE")
BROKER_BOOL = ("up", "reach", "isM", "apend", "conn", "acc", "ord", "recLost")
MATRIX_BOOL = ("lss", "rss")        # [master][member]
SET_BOOL = ("sssC",)                # [member]


@attrs.frozen
class Abstract(write_path.Abstract):
    """The configuration the proof is about (bounds play no part): brokers instead of replicas."""
    cfg: FailoverConfig

    @property
    def n(self) -> int:
        return len(self.cfg.brokers)

    @property
    def first(self) -> int:
        return self.cfg.index(self.cfg.initial_master)


class FS:
    """One abstract state: a dict of z3 variables keyed by name, (name, b) or (name, b, x)."""

    def __init__(self, a: Abstract, tag: str, k: z3.ArithRef) -> None:
        self.a, self.tag, self.K = a, tag, k
        v: dict = {}
        for name in SCALARS_INT:
            v[name] = z3.Int(f"{name}_{tag}")
        for name in SCALARS_BOOL:
            v[name] = z3.Bool(f"{name}_{tag}")
        for b in range(a.n):
            for name in BROKER_INT:
                v[(name, b)] = z3.Int(f"{name}{b}_{tag}")
            for name in BROKER_BOOL:
                v[(name, b)] = z3.Bool(f"{name}{b}_{tag}")
            for name in SET_BOOL:
                v[(name, b)] = z3.Bool(f"{name}{b}_{tag}")
            for name in MATRIX_BOOL:
                for x in range(a.n):
                    v[(name, b, x)] = z3.Bool(f"{name}{b}_{x}_{tag}")
        self.v = v
        self.unchanged: tuple[FS, dict] | None = None     # frame's equalities from one pre-state, built once

    def __getitem__(self, key):
        return self.v[key]

    def all_vars(self) -> list:
        return list(self.v.values())


def frame(s: FS, t: FS, changes: dict) -> z3.BoolRef:
    """t equals s except for ``changes`` (key -> new value)."""
    if t.unchanged is None or t.unchanged[0] is not s:
        # every action's frame from s to t shares these (z3 shares equal terms anyway; building them
        # once per pair instead of once per action was most of a pinned path's cost)
        t.unchanged = (s, {k: t[k] == s[k] for k in s.v})
    same = t.unchanged[1]
    return z3.And([same[k] if k not in changes else t[k] == changes[k] for k in s.v])


def _max(x, y):
    return z3.If(x > y, x, y)


def _min(x, y):
    return z3.If(x < y, x, y)


# ------------------------------------------------------------------ helpers (the spec's functions)

def alive(s: FS, b: int) -> z3.BoolRef:
    return z3.And(s[("up", b)], s[("reach", b)])


def is_broker(s: FS, key, b: int) -> z3.BoolRef:
    return s[key] == b


def view(s: FS, m: int, x: int) -> z3.BoolRef:
    """x is in SSSView(m): local or proposed."""
    return z3.Or(s[("lss", m, x)], s[("rss", m, x)])


def applied_view(s: FS, m: int, x: int) -> z3.BoolRef:
    """The local SSS, and the proposed set once the controller has applied it (no request pending)."""
    return z3.Or(s[("lss", m, x)], z3.And(s[("rss", m, x)], z3.Not(s[("apend", m)])))


def ack_view(a: Abstract, s: FS, m: int, x: int) -> z3.BoolRef:
    if a.bug("BugCommittedSssOnly"):
        return s[("lss", m, x)]
    if a.bug("BugShrinkBeforeCommit"):
        proposing = z3.Or([s[("rss", m, y)] for y in range(a.n)])
        return z3.If(proposing, s[("rss", m, x)], view(s, m, x))
    return view(s, m, x)


def connected_to(s: FS, x: int, m: int) -> z3.BoolRef:
    return z3.And(s[("conn", x)], s[("bm", x)] == m)


def ack_covered(a: Abstract, s: FS, m: int, off) -> z3.BoolRef:
    if a.bug("BugNoAllAck"):
        return z3.BoolVal(True)
    others = [x for x in range(a.n) if x != m]
    return z3.And([z3.Implies(ack_view(a, s, m, x), z3.And(connected_to(s, x, m), s[("ack", x)] >= off))
                   for x in others])


def confirm_with(a: Abstract, s: FS, m: int, member: Callable[[int], z3.BoolRef], conn: Callable[[int], z3.BoolRef],
                 acks: Callable[[int], z3.ArithRef], old) -> z3.ArithRef:
    """ConfirmWith(m, view, conn, acks, old)."""
    others = [x for x in range(a.n) if x != m]
    length = s[("len", m)]
    live = {x: z3.And(conn(x), s[("bm", x)] == m) for x in others}
    value = length
    for x in others:
        value = z3.If(member(x), _min(value, acks(x)), value)
    if a.bug("BugConfirmOverConnected"):
        value = length
        for x in others:
            value = z3.If(z3.And(member(x), live[x]), _min(value, acks(x)), value)
        return value
    none_other = z3.And([z3.Not(member(x)) for x in others])
    all_live = z3.And([z3.Implies(member(x), live[x]) for x in others])
    return z3.If(none_other, length, z3.If(all_live, value, old))


def header_confirm(a: Abstract, s: FS, m: int):
    return s[("len", m)] if a.bug("BugSlaveConfirmFromMaxOffset") else s[("conf", m)]


def caches_sound(s: FS, *bs: int) -> z3.BoolRef:
    return z3.And([z3.And(s[("acc", b)], s[("ord", b)]) for b in bs])


# ------------------------------------------------------------------ Init and Next

def init(a: Abstract, s: FS) -> z3.BoolRef:
    f = a.first
    c = [s["mid"] == f, s["mep"] == 1, s["sep"] == 1, s["office"], s["rid"] == 0, s["rSt"] == WAIT, s["rEp"] == 0, s["rM"] == 0,
         s["nid"] == 1, z3.Not(s["rEx"]), z3.Not(s["lostR"]), s.K >= 1]
    for b in range(a.n):
        first = b == f
        c += [s[("up", b)], s[("reach", b)], s[("isM", b)] == first, s[("bm", b)] == f, s[("be", b)] == 1,
              s[("lsep", b)] == (1 if first else 0), s[("len", b)] == 0, s[("conf", b)] == 0, s[("ack", b)] == 0,
              s[("cur", b)] == 0, s[("est", b)] == 0, s[("lastE", b)] == (1 if first else 0), s[("rec", b)] == 0,
              s[("recE", b)] == 0, s[("stl", b)] == 0, s[("stk", b)] == 0, s[("stkE", b)] == 0,
              z3.Not(s[("apend", b)]), z3.Not(s[("conn", b)]), s[("acc", b)], s[("ord", b)],
              z3.Not(s[("recLost", b)]), s[("sssC", b)] == first]
        for x in range(a.n):
            c += [s[("lss", b, x)] == (first and x == f), z3.Not(s[("rss", b, x)])]
    return z3.And(c)


def _die(a: Abstract, s: FS, b: int) -> dict:
    """Die(b): what a broker's process takes with it."""
    ch = {("up", b): z3.BoolVal(False), ("isM", b): z3.BoolVal(False), ("bm", b): z3.IntVal(NONE),
          ("be", b): z3.IntVal(0), ("lsep", b): z3.IntVal(0), ("apend", b): z3.BoolVal(False)}
    for x in range(a.n):
        ch[("lss", b, x)] = z3.BoolVal(False)
        ch[("rss", b, x)] = z3.BoolVal(False)
    for x in range(a.n):
        dropped = z3.BoolVal(True) if x == b else z3.And(s[("isM", b)], s[("bm", x)] == b)
        ch[("conn", x)] = z3.And(s[("conn", x)], z3.Not(dropped))
        ch[("ack", x)] = z3.If(dropped, 0, s[("ack", x)])
        ch[("cur", x)] = z3.If(dropped, 0, s[("cur", x)])
    aborted = z3.And(s["rEx"], s["rSt"] == WAIT, s["rM"] == b)
    ch["rSt"] = z3.If(aborted, ERR, s["rSt"])
    return ch


def actions(a: Abstract, s: FS, t: FS) -> dict[str, z3.BoolRef]:
    """Each abstract action as a relation between s and t (names as the twin's labels, brokers by index)."""
    n, K = a.n, s.K
    acts: dict[str, z3.BoolRef] = {}

    # ElectMaster: a live SSS member (any live broker under B16), or none (the epoch still bumps).
    master_gone = z3.Or(s["mid"] == NONE, z3.And([z3.Implies(s["mid"] == b, z3.Not(alive(s, b))) for b in range(n)]))
    if a.bug("BugElectOnlyOnMasterDeath"):
        master_gone = z3.And(master_gone, s["mid"] != NONE)
    pool = (lambda b: z3.BoolVal(True)) if a.bug("BugUncleanElection") else (lambda b: s[("sssC", b)])
    cand = [z3.And(pool(b), alive(s, b)) for b in range(n)]
    nxt = s["mep"] if a.bug("BugElectKeepsEpoch") else s["mep"] + 1
    elect = []
    for c in range(n):
        ch = {"mid": z3.IntVal(c), "mep": nxt, "sep": s["sep"] + 1, "office": z3.BoolVal(False)}
        ch.update({("sssC", x): z3.BoolVal(x == c) for x in range(n)})
        elect.append(z3.And(cand[c], frame(s, t, ch)))
    elect.append(z3.And(z3.Not(z3.Or(cand)), s["mid"] != NONE,
                        frame(s, t, {"mid": z3.IntVal(NONE), "mep": nxt, "office": z3.BoolVal(False)})))
    acts["ElectMaster"] = z3.And(master_gone, z3.Or(elect))

    for m in range(n):
        # AlterSyncStateSet(m): CAS and E3, or a refusal that clears the proposal.
        fenced = z3.BoolVal(True) if a.bug("BugAlterWithoutFencing") else z3.And(
            s["mid"] == m, s["mep"] == s[("be", m)], s["sep"] == s[("lsep", m)])
        accepted = z3.And(fenced, s[("rss", m, m)],
                          z3.And([z3.Implies(s[("rss", m, x)], alive(s, x)) for x in range(n)]))
        apply = {("apend", m): z3.BoolVal(False), "sep": s["sep"] + 1}
        apply.update({("sssC", x): s[("rss", m, x)] for x in range(n)})
        refuse = {("apend", m): z3.BoolVal(False)}
        refuse.update({("rss", m, x): z3.BoolVal(False) for x in range(n)})
        alone = z3.And([z3.Not(s[("lss", m, x)]) for x in range(n) if x != m])
        refuse[("conf", m)] = z3.If(alone, s[("len", m)], s[("conf", m)])
        acts[f"AlterSyncStateSet({m})"] = z3.And(
            s[("apend", m)], s[("up", m)], s[("reach", m)],
            z3.If(accepted, frame(s, t, apply), frame(s, t, refuse)))

    for b in range(n):
        up, master = s[("up", b)], s[("isM", b)]
        # Put(b): one record at len+1; at K it is a fresh record and may be R.
        at_k = s[("len", b)] + 1 == K
        alone = z3.And([z3.Not(view(s, b, x)) for x in range(n) if x != b])
        base = {("len", b): s[("len", b)] + 1, ("conf", b): z3.If(alone, s[("len", b)] + 1, s[("conf", b)])}
        fresh = dict(base)
        fresh.update({("rec", b): s["nid"], ("recE", b): s[("be", b)], ("acc", b): z3.BoolVal(True),
                      ("recLost", b): z3.BoolVal(False), ("stk", b): z3.IntVal(0), ("stkE", b): z3.IntVal(0),
                      "nid": s["nid"] + 1})
        stale_shift = {("stl", b): _max(s[("stl", b)] - 1, 0)}
        base.update(stale_shift)
        fresh.update(stale_shift)
        is_r = dict(fresh)
        is_r.update({"rEx": z3.BoolVal(True), "rid": s["nid"], "rSt": z3.IntVal(WAIT), "rEp": s[("be", b)],
                     "rM": z3.IntVal(b)})
        acts[f"Put({b})"] = z3.And(up, master, z3.If(
            at_k, z3.Or(frame(s, t, fresh), z3.And(z3.Not(s["rEx"]), frame(s, t, is_r))), frame(s, t, base)))

        # ChangeToMaster(b): a larger epoch naming b; truncate the cache by epoch, append <<mep, len>>.
        was = s[("isM", b)]
        ch = {("isM", b): z3.BoolVal(True), ("bm", b): z3.IntVal(b), ("be", b): s["mep"], ("lsep", b): s["sep"],
              ("apend", b): z3.BoolVal(False), ("est", b): s[("len", b)], ("lastE", b): s["mep"],
              ("conn", b): z3.And(was, s[("conn", b)]), ("ack", b): z3.If(was, s[("ack", b)], 0),
              ("cur", b): z3.If(was, s[("cur", b)], 0), "office": z3.BoolVal(True)}
        ch.update({("lss", b, x): s[("sssC", x)] for x in range(n)})
        ch.update({("rss", b, x): z3.BoolVal(False) for x in range(n)})
        new_conn = lambda x: z3.And(was, s[("conn", x)]) if x == b else s[("conn", x)]  # noqa: E731
        ch[("conf", b)] = confirm_with(a, s, b, lambda x: s[("sssC", x)], new_conn,
                                       lambda x: z3.If(z3.And(x == b, z3.Not(was)), 0, s[("ack", x)]),
                                       s[("conf", b)])
        acts[f"ChangeToMaster({b})"] = z3.And(up, s[("reach", b)], s["mid"] == b, s["mep"] > s[("be", b)],
                                              frame(s, t, ch))

        # ChangeToSlave(b): another master in a larger epoch.
        other_master = z3.And(s["mid"] != b, s["mid"] != NONE)
        same = z3.And(z3.Not(s[("isM", b)]), s[("bm", b)] == s["mid"])
        follow = {("be", b): s["mep"], ("isM", b): z3.BoolVal(False), ("bm", b): s["mid"], ("lsep", b): z3.IntVal(0),
                  ("apend", b): z3.BoolVal(False)}
        follow.update({("lss", b, x): z3.BoolVal(False) for x in range(n)})
        follow.update({("rss", b, x): z3.BoolVal(False) for x in range(n)})
        for x in range(n):
            dropped = z3.BoolVal(True) if x == b else z3.And(s[("isM", b)], s[("bm", x)] == b)
            follow[("conn", x)] = z3.And(s[("conn", x)], z3.Not(dropped))
            follow[("ack", x)] = z3.If(dropped, 0, s[("ack", x)])
            follow[("cur", x)] = z3.If(dropped, 0, s[("cur", x)])
        acts[f"ChangeToSlave({b})"] = z3.And(up, s[("reach", b)], other_master, s["mep"] > s[("be", b)], z3.If(
            same, frame(s, t, {("be", b): s["mep"]}), frame(s, t, follow)))

        # ChangeSyncStateSet(b): the master learns the controller's SSS.
        ch = {("lsep", b): s["sep"], ("apend", b): z3.BoolVal(False)}
        ch.update({("lss", b, x): s[("sssC", x)] for x in range(n)})
        ch.update({("rss", b, x): z3.BoolVal(False) for x in range(n)})
        ch[("conf", b)] = confirm_with(a, s, b, lambda x: s[("sssC", x)], lambda x: s[("conn", x)],
                                       lambda x: s[("ack", x)], s[("conf", b)])
        acts[f"ChangeSyncStateSet({b})"] = z3.And(up, s[("reach", b)], master, s["mid"] == b,
                                                  s["mep"] == s[("be", b)], s["sep"] > s[("lsep", b)], frame(s, t, ch))

        # ReplicaConnect(b): handshake truncation to p, first header, first report.
        p = z3.Int(f"point{b}_{t.tag}")
        conn_parts = []
        for m in range(n):
            if m == b:
                continue
            holds_same = z3.And(s[("len", b)] >= K, s[("len", m)] >= K, s[("rec", b)] == s[("rec", m)])
            guarantee = z3.And(p <= s[("len", m)], z3.Implies(p >= K, holds_same), z3.Implies(holds_same, p >= K))
            point_ok = z3.And(p >= 0, p <= s[("len", b)],
                              z3.Implies(caches_sound(s, b, m), guarantee))
            kept = p >= K
            had = s[("len", b)] >= K
            ch = {("len", b): p, ("conn", b): z3.BoolVal(True), ("ack", b): p,
                  ("rec", b): z3.If(kept, s[("rec", b)], 0), ("recE", b): z3.If(kept, s[("recE", b)], 0),
                  ("recLost", b): z3.And(kept, s[("recLost", b)]),
                  ("acc", b): z3.Or(z3.Not(kept), s[("acc", b)]),
                  ("cur", b): s[("lastE", m)] if a.bug("BugTransferCursorNotReset") else z3.IntVal(0)}
            # the header appends the master's entry covering p; the cache's last epoch can only grow
            ch[("lastE", b)] = z3.If(s[("lastE", m)] > s[("lastE", b)], s[("lastE", m)], s[("lastE", b)])
            if a.bug("BugEpochAppendUnchecked"):   # a reconnect appends the same entry again
                ch[("ord", b)] = z3.And(s[("ord", b)], p == 0)
            if a.bug("BugTruncateNotDurable"):     # the truncated records stay on disk
                ch[("stl", b)] = s[("len", b)] + s[("stl", b)] - p
                ch[("stk", b)] = z3.If(z3.And(had, z3.Not(kept)), s[("rec", b)], s[("stk", b)])
                ch[("stkE", b)] = z3.If(z3.And(had, z3.Not(kept)), s[("recE", b)], s[("stkE", b)])
            else:
                ch[("stl", b)] = z3.IntVal(0)
                ch[("stk", b)] = z3.IntVal(0)
                ch[("stkE", b)] = z3.IntVal(0)
            ch[("conf", b)] = _min(header_confirm(a, s, m), p)
            in_local = s[("lss", m, b)]
            ch[("conf", m)] = z3.If(in_local, confirm_with(
                a, s, m, lambda x: view(s, m, x), lambda x: z3.BoolVal(True) if x == b else s[("conn", x)],
                lambda x: p if x == b else s[("ack", x)], s[("conf", m)]), s[("conf", m)])
            conn_parts.append(z3.And(s[("bm", b)] == m, s[("up", m)], s[("isM", m)], point_ok, frame(s, t, ch)))
        acts[f"ReplicaConnect({b})"] = z3.And(up, z3.Not(s[("isM", b)]), z3.Not(s[("conn", b)]), z3.Or(conn_parts))

        # Transfer(b): the master's next record; at K it carries its epoch label.
        parts = []
        for m in range(n):
            if m == b:
                continue
            at_k = s[("len", b)] + 1 == K
            label_ok = s[("acc", m)]
            if a.bug("BugTransferCursorNotReset"):
                label_ok = z3.And(label_ok, z3.Or(s[("cur", b)] == 0, s[("recE", m)] <= s[("cur", b)]))
            ch = {("len", b): s[("len", b)] + 1, ("conf", b): _min(header_confirm(a, s, m), s[("len", b)]),
                  ("stl", b): _max(s[("stl", b)] - 1, 0),
                  ("lastE", b): z3.If(s[("lastE", m)] > s[("lastE", b)], s[("lastE", m)], s[("lastE", b)])}
            at = dict(ch)
            at.update({("rec", b): s[("rec", m)], ("recE", b): s[("recE", m)], ("recLost", b): s[("recLost", m)],
                       ("acc", b): label_ok, ("stk", b): z3.IntVal(0), ("stkE", b): z3.IntVal(0)})
            parts.append(z3.And(s[("bm", b)] == m, s[("up", m)], s[("isM", m)], s[("len", b)] < s[("len", m)],
                                z3.If(at_k, frame(s, t, at), frame(s, t, ch))))
        acts[f"Transfer({b})"] = z3.And(up, s[("conn", b)], z3.Or(parts))

        # ReplicaAck(b): the slave reports its length; the master may recompute confirmOffset.
        parts = []
        for m in range(n):
            if m == b:
                continue
            ch = {("ack", b): s[("len", b)]}
            ch[("conf", m)] = z3.If(s[("lss", m, b)], confirm_with(
                a, s, m, lambda x: view(s, m, x), lambda x: s[("conn", x)],
                lambda x: s[("len", b)] if x == b else s[("ack", x)], s[("conf", m)]), s[("conf", m)])
            parts.append(z3.And(s[("bm", b)] == m, s[("up", m)], s[("isM", m)], frame(s, t, ch)))
        acts[f"ReplicaAck({b})"] = z3.And(up, s[("conn", b)], s[("ack", b)] < s[("len", b)], z3.Or(parts))

        acts[f"ReplicaDisconnect({b})"] = z3.And(s[("conn", b)], frame(s, t, {
            ("conn", b): z3.BoolVal(False), ("ack", b): z3.IntVal(0), ("cur", b): z3.IntVal(0)}))

        # ShrinkSyncStateSet(b, x) / ExpandSyncStateSet(b, x): a proposal to the controller.
        no_proposal = z3.And([z3.Not(s[("rss", b, x)]) for x in range(n)])
        for x in range(n):
            if x == b:
                continue
            shrink = {("apend", b): z3.BoolVal(True)}
            shrink.update({("rss", b, y): z3.And(s[("lss", b, y)], y != x) for y in range(n)})
            acts[f"ShrinkSyncStateSet({b},{x})"] = z3.And(
                up, master, no_proposal, s[("lss", b, x)],
                z3.Or(z3.Not(connected_to(s, x, b)), s[("ack", x)] < s[("len", b)]), frame(s, t, shrink))
            expand = {("apend", b): z3.BoolVal(True)}
            expand.update({("rss", b, y): z3.Or(s[("lss", b, y)], y == x) for y in range(n)})
            acts[f"ExpandSyncStateSet({b},{x})"] = z3.And(
                up, master, no_proposal, z3.Not(s[("lss", b, x)]), connected_to(s, x, b),
                s[("ack", x)] == s[("len", b)], s[("ack", x)] >= s[("conf", b)], s[("ack", x)] >= s[("est", b)],
                frame(s, t, expand))

        # Failures.
        acts[f"BrokerCrash({b})"] = z3.And(up, frame(s, t, _die(a, s, b)))
        keep = z3.Int(f"keep{b}_{t.tag}")
        last_lost = z3.Bool(f"lastlost{b}_{t.tag}")
        dropped = z3.And(s[("len", b)] >= K, keep < K)
        ch = _die(a, s, b)
        ch.update({("len", b): keep, ("rec", b): z3.If(dropped, 0, s[("rec", b)]),
                   ("recE", b): z3.If(dropped, 0, s[("recE", b)]), ("stl", b): z3.IntVal(0),
                   ("stk", b): z3.IntVal(0), ("stkE", b): z3.IntVal(0),
                   ("recLost", b): z3.And(z3.Not(dropped), s[("recLost", b)]),
                   "lostR": z3.Or(s["lostR"], z3.And(dropped, s[("rec", b)] == s["rid"], s["rEx"]))})
        for x in range(n):
            if x != b:
                ch[("recLost", x)] = z3.Or(s[("recLost", x)], z3.And(dropped, s[("rec", x)] == s[("rec", b)],
                                                                     s[("len", x)] >= K))
        kept_k = z3.Not(z3.Or(dropped, s[("len", b)] < K))
        if a.bug("BugEpochFileNotDurable"):        # the file may have lost its last entry
            ch[("acc", b)] = z3.Or(z3.Not(kept_k), z3.And(s[("acc", b)], z3.Not(last_lost)))
        else:
            ch[("acc", b)] = z3.Or(z3.Not(kept_k), s[("acc", b)])
        acts[f"BrokerPowerLoss({b})"] = z3.And(up, keep >= 0, keep <= s[("len", b)], frame(s, t, ch))

        recovered = s[("len", b)] + (s[("stl", b)] if a.bug("BugTruncateNotDurable") else 0)
        revived = z3.And(s[("len", b)] < K, recovered >= K, s[("stk", b)] != 0) \
            if a.bug("BugTruncateNotDurable") else z3.BoolVal(False)
        wrong = z3.Bool(f"wrongepoch{b}_{t.tag}")
        ch = {("up", b): z3.BoolVal(True), ("len", b): recovered, ("stl", b): z3.IntVal(0),
              ("stk", b): z3.IntVal(0), ("stkE", b): z3.IntVal(0),
              ("rec", b): z3.If(revived, s[("stk", b)], s[("rec", b)]),
              ("recE", b): z3.If(revived, s[("stkE", b)], s[("recE", b)]),
              # a revived record is attributed to whatever epoch the truncated cache now says
              ("acc", b): z3.If(revived, z3.Not(wrong), s[("acc", b)]),
              ("conf", b): s[("conf", b)] if a.bug("BugConfirmNotClamped") else _min(s[("conf", b)], recovered)}
        acts[f"BrokerRestart({b})"] = z3.And(z3.Not(up), s["mid"] != b, frame(s, t, ch))

        acts[f"CutFromController({b})"] = z3.And(s[("reach", b)], frame(s, t, {("reach", b): z3.BoolVal(False)}))
        acts[f"ReconnectToController({b})"] = z3.And(z3.Not(s[("reach", b)]),
                                                     frame(s, t, {("reach", b): z3.BoolVal(True)}))

    # Respond / Timeout on the arbitrary request R (its offset is K).
    rm = s["rM"]
    can = z3.Or([z3.And(rm == m, s[("up", m)], s[("isM", m)], s[("be", m)] == s["rEp"], ack_covered(a, s, m, K))
                 for m in range(n)])
    acts["Respond"] = z3.And(s["rEx"], s["rSt"] == WAIT, can, frame(s, t, {"rSt": z3.IntVal(OK)}))
    acts["Timeout"] = z3.And(s["rEx"], s["rSt"] == WAIT, z3.Not(can), frame(s, t, {"rSt": z3.IntVal(ERR)}))
    return acts


def next_rel(a: Abstract, s: FS, t: FS) -> z3.BoolRef:
    return z3.Or(list(actions(a, s, t).values()))


# ------------------------------------------------------------------ properties

def later_master(s: FS, b: int, e) -> z3.BoolRef:
    return z3.Or(z3.And(s["mid"] == b, s["mep"] >= e), z3.And(s[("up", b)], s[("isM", b)], s[("be", b)] >= e))


def holds_r(s: FS, b: int) -> z3.BoolRef:
    return z3.And(s[("len", b)] >= s.K, s[("rec", b)] == s["rid"])


def acked(s: FS) -> z3.BoolRef:
    return z3.And(s["rEx"], s["rSt"] == OK)


def elect_enabled(a: Abstract, s: FS) -> z3.BoolRef:
    """ElectMaster's guard with a candidate: the safety half of MasterEventuallyStable."""
    gone = z3.Or(s["mid"] == NONE, z3.And([z3.Implies(s["mid"] == b, z3.Not(alive(s, b))) for b in range(a.n)]))
    if a.bug("BugElectOnlyOnMasterDeath"):
        gone = z3.And(gone, s["mid"] != NONE)
    return gone


def properties(a: Abstract) -> dict[str, Callable[[FS], z3.BoolRef]]:
    """The safety properties (names of tla/AckOrderFailoverProperties.tla) at the arbitrary offset K
    and for the arbitrary request R, plus the safety half of MasterEventuallyStable."""
    n = a.n
    pairs = [(x, y) for x in range(n) for y in range(n) if x < y]
    return {
        "AckedSurvivesFailover": lambda s: z3.Implies(z3.And(acked(s), z3.Not(s["lostR"])), z3.And(
            [z3.Implies(later_master(s, b, s["rEp"]), holds_r(s, b)) for b in range(n)])),
        "OneMasterPerEpoch": lambda s: z3.And([z3.Implies(
            z3.And(s[("up", x)], s[("up", y)], s[("isM", x)], s[("isM", y)]), s[("be", x)] != s[("be", y)])
            for x, y in pairs]),
        "EpochsMonotone": lambda s: z3.And([z3.And(s[("ord", b)], s[("be", b)] <= s["mep"],
                                                   s[("lastE", b)] <= s["mep"]) for b in range(n)]),
        "EpochCacheAccurate": lambda s: z3.And([z3.Implies(z3.And(s[("up", b)], s[("len", b)] >= s.K), s[("acc", b)])
                                                for b in range(n)]),
        "LogMatchingAcrossEpochs": lambda s: z3.And([z3.Implies(
            z3.And(s[("up", x)], s[("up", y)], s[("conf", x)] >= s.K, s[("conf", y)] >= s.K,
                   s[("len", x)] >= s.K, s[("len", y)] >= s.K),
            z3.Or(s[("rec", x)] == s[("rec", y)], s[("recLost", x)], s[("recLost", y)])) for x, y in pairs]),
        "VisibleImpliesReplicated": lambda s: z3.And([z3.Implies(
            z3.And(s[("up", m)], s[("isM", m)], s[("conf", m)] >= s.K, s[("len", m)] >= s.K,
                   z3.Not(s[("recLost", m)])),
            z3.And([z3.Implies(view(s, m, x), z3.And(s[("len", x)] >= s.K, s[("rec", x)] == s[("rec", m)]))
                    for x in range(n) if x != m])) for m in range(n)]),
        "SSSContainsMaster": lambda s: z3.And(
            *[z3.Implies(s["mid"] == b, s[("sssC", b)]) for b in range(n)],
            *[z3.Implies(z3.And(s[("up", b)], s[("isM", b)]), z3.And(
                s[("lss", b, b)], z3.Implies(z3.Or([s[("rss", b, x)] for x in range(n)]), s[("rss", b, b)])))
              for b in range(n)]),
        "ConfirmWithinLog": lambda s: z3.And([z3.Implies(s[("up", b)], s[("conf", b)] <= s[("len", b)])
                                              for b in range(n)]),
        "ElectionEnabled": lambda s: z3.Implies(
            z3.And(s["mid"] == NONE, z3.Or([z3.And(s[("sssC", b)], alive(s, b)) for b in range(n)])),
            elect_enabled(a, s)),
    }


def witness(s: FS, m: int) -> z3.BoolRef:
    """A member of m's applied view that is not connected to m and follows another broker."""
    return z3.Or([z3.And(applied_view(s, m, x), z3.Not(connected_to(s, x, m)), s[("bm", x)] != m)
                  for x in range(s.a.n) if x != m])


def holders_of(s: FS, rec, epoch) -> z3.BoolRef:
    """Who holds an acked record of ``epoch`` at K: the controller's SSS, every acting master of that
    epoch or later with every member of its view, and the acting master a broker follows in such an
    epoch or while holding the record (the handshake with it keeps what both hold)."""
    n = s.a.n
    has = lambda x: z3.And(s[("len", x)] >= s.K, s[("rec", x)] == rec)  # noqa: E731
    out = [*[z3.Implies(s[("sssC", x)], has(x)) for x in range(n)]]
    for x in range(n):
        for m in range(n):
            if m != x:
                out.append(z3.Implies(z3.And(s[("bm", x)] == m, z3.Not(s[("isM", x)]), s[("isM", m)],
                                                 z3.Or(s[("be", x)] >= epoch, has(x))), has(m)))
    out += [z3.Implies(z3.And(s[("isM", m)], s[("be", m)] >= epoch),
                           z3.And(has(m), *[z3.Implies(view(s, m, x), has(x)) for x in range(n)])) for m in range(n)]
    return z3.And(out)


# Properties z3 states at K but does not prove inductive here: they are model-checked by TLC, and
# serve the bug CTIs as bounded-model-checking targets (B12, BugSlaveConfirmFromMaxOffset).
BMC_ONLY = ("LogMatchingAcrossEpochs", "VisibleImpliesReplicated")


def proved_properties(a: Abstract) -> dict[str, Callable[[FS], z3.BoolRef]]:
    return {k: v for k, v in properties(a).items() if k not in BMC_ONLY}


def strengthening(a: Abstract) -> dict[str, Callable[[FS], z3.BoolRef]]:
    """What makes the properties inductive; each conjunct is an invariant of the spec in its own right."""
    n = a.n
    bs = range(n)
    return {
        "S_Shape": lambda s: z3.And(
            s.K >= 1, s["mep"] >= 1, s["sep"] >= 1, s["nid"] >= 1, s["mid"] >= NONE, s["mid"] < n,
            z3.Or([s[("sssC", b)] for b in bs]),
            *[z3.Implies(z3.And(s["rEx"], s[("rec", b)] == s["rid"]), s[("recLost", b)] == s["lostR"]) for b in bs],
            *[z3.Implies(z3.And(s[("rec", x)] == s[("rec", y)], s[("rec", x)] != 0),
                         z3.And(s[("recE", x)] == s[("recE", y)], s[("recLost", x)] == s[("recLost", y)]))
              for x in bs for y in bs if x < y],
            *[z3.And(s[("len", b)] >= 0, s[("conf", b)] >= 0, s[("ack", b)] >= 0, s[("stl", b)] >= 0,
                     s[("bm", b)] >= NONE, s[("bm", b)] < n, s[("be", b)] >= 0, s[("lsep", b)] >= 0,
                     s[("est", b)] >= 0, s[("lastE", b)] >= 0, s[("cur", b)] >= 0,
                     (s[("rec", b)] != 0) == (s[("len", b)] >= s.K),
                     s[("rec", b)] < s["nid"], s[("rec", b)] >= 0,
                     z3.Implies(s[("rec", b)] != 0, z3.And(s[("recE", b)] >= 1, s[("recE", b)] <= s["mep"])),
                     z3.Implies(s[("rec", b)] == 0, z3.And(s[("recE", b)] == 0, z3.Not(s[("recLost", b)]))),
                     s[("stl", b)] == 0, s[("stk", b)] == 0, s[("stkE", b)] == 0)
              for b in bs]),
        "S_CachesSound": lambda s: z3.And([z3.And(s[("acc", b)], s[("ord", b)], s[("cur", b)] == 0) for b in bs]),
        "S_Roles": lambda s: z3.And(
            *[z3.Implies(s[("isM", b)], z3.And(s[("up", b)], s[("bm", b)] == b, s[("be", b)] >= 1,
                                               s[("lastE", b)] == s[("be", b)], s[("est", b)] <= s[("len", b)]))
              for b in bs],
            *[z3.Implies(z3.Not(s[("isM", b)]), z3.And(
                s[("lsep", b)] == 0, z3.Not(s[("apend", b)]),
                *[z3.And(z3.Not(s[("lss", b, x)]), z3.Not(s[("rss", b, x)])) for x in bs])) for b in bs],
            *[z3.Implies(z3.Not(s[("up", b)]), z3.And(s[("bm", b)] == NONE, s[("be", b)] == 0)) for b in bs],
            *[(s[("bm", b)] == NONE) == (s[("be", b)] == 0) for b in bs],
            *[z3.Implies(z3.Not(s[("conn", b)]), s[("ack", b)] == 0) for b in bs],
            *[z3.Implies(s[("apend", b)], z3.Or([s[("rss", b, x)] for x in bs])) for b in bs],
            *[z3.Implies(s[("bm", b)] == b, s[("isM", b)]) for b in bs],
            *[s[("be", b)] <= s["mep"] for b in bs],
            *[s[("lsep", b)] <= s["sep"] for b in bs]),
        # A connection carries the master's log: the slave's record at K is the master's.
        "S_ConnectedPrefix": lambda s: z3.And([z3.Implies(s[("conn", x)], z3.And(
            s[("up", x)], z3.Not(s[("isM", x)]), s[("ack", x)] <= s[("len", x)],
            *[z3.Implies(s[("bm", x)] == m, z3.And(
                s[("up", m)], s[("isM", m)], s[("len", x)] <= s[("len", m)],
                z3.Implies(s[("len", x)] >= s.K, s[("rec", x)] == s[("rec", m)])))
              for m in bs if m != x],
            s[("bm", x)] != x, s[("bm", x)] != NONE)) for x in bs]),
        # The controller's master is in its SSS; a master that is the controller's, in the current
        # epoch, has the controller's SSS in its view.
        "S_ControllerView": lambda s: z3.And([z3.Implies(
            z3.And(s["mid"] == m, s[("isM", m)], s[("be", m)] == s["mep"]),
            z3.And(s[("lsep", m)] <= s["sep"],
                   z3.Implies(s[("lsep", m)] == s["sep"], z3.And([s[("sssC", x)] == s[("lss", m, x)] for x in bs])),
                   z3.Implies(s[("lsep", m)] < s["sep"], z3.And(
                       s["sep"] == s[("lsep", m)] + 1, z3.Not(s[("apend", m)]),
                       *[s[("sssC", x)] == s[("rss", m, x)] for x in bs])),
                   z3.Implies(s[("apend", m)], s[("lsep", m)] == s["sep"])))
            for m in bs]),
        # Acked R: held by the controller's SSS, by every acting master of its epoch or later and
        # by every member of their views.
        "S_AckedHeld": lambda s: z3.Implies(z3.And(acked(s), z3.Not(s["lostR"])), holders_of(s, s["rid"], s["rEp"])),
        # A waiting R sits at K on its master while that master acts in R's epoch.
        "S_Request": lambda s: z3.And(
            z3.Implies(z3.Not(s["rEx"]), z3.And(s["rid"] == 0, s["rSt"] == WAIT, z3.Not(s["lostR"]))),
            z3.Implies(s["rEx"], z3.And(s["rid"] >= 1, s["rid"] < s["nid"], s["rEp"] >= 1, s["rEp"] <= s["mep"],
                                        s["rM"] >= 0, s["rM"] < n,
                                        z3.Or(s["rSt"] == WAIT, s["rSt"] == OK, s["rSt"] == ERR))),
            *[z3.Implies(z3.And(s["rEx"], s["rSt"] == WAIT, s["rM"] == m, s[("isM", m)], s[("be", m)] == s["rEp"]),
                         holds_r(s, m)) for m in bs],
            *[z3.Implies(z3.And(s[("rec", b)] == s["rid"], s["rEx"]), s[("recE", b)] == s["rEp"]) for b in bs]),
        # The controller's current epoch: only its elected master acts in it, once it has taken it up
        # (office); until then nobody changes the SSS the election set.  A record of the current epoch
        # (R, or whatever sits at K) was written by that master.
        "S_EpochOwner": lambda s: z3.And(
            *[z3.Implies(z3.And(s[("isM", m)], s[("be", m)] == s["mep"]), z3.And(s["mid"] == m, s["office"]))
              for m in bs],
            z3.Implies(s["office"], s["mid"] != NONE),
            *[z3.Implies(z3.And(s["mid"] == m, z3.Not(s["office"])), z3.And([s[("sssC", x)] == (x == m) for x in bs]))
              for m in bs],
            *[z3.Implies(z3.And(s["mid"] == m, s["office"], s[("up", m)]),
                         z3.And(s[("isM", m)], s[("be", m)] == s["mep"])) for m in bs],
            z3.Implies(z3.And(s["rEx"], s["rEp"] == s["mep"]), z3.And(s["office"], s["mid"] == s["rM"])),
            *[z3.Implies(z3.And(s[("rec", x)] != 0, s[("recE", x)] == s["mep"]), s["office"]) for x in bs]),
        # An acting master holds every record of its own epoch that any broker holds (it is the epoch's
        # only writer and never truncates while it acts), and nothing of a later epoch.
        "S_EpochWriter": lambda s: z3.And([z3.Implies(s[("isM", m)], z3.And(
            z3.Implies(s[("rec", m)] != 0, s[("recE", m)] <= s[("be", m)]),
            *[z3.Implies(z3.And(s[("rec", x)] != 0, s[("recE", x)] == s[("be", m)]),
                         z3.And(s[("len", m)] >= s.K, s[("rec", m)] == s[("rec", x)])) for x in bs]))
            for m in bs]),
        # The ack gate: an acting master all of whose applied view still follows it ("no witness") has that
        # view cover the controller's SSS, has no newer acting master beside it, and every master a broker
        # follows in a newer epoch is in that view.  Once a member of the view follows another broker
        # (a witness) the master can neither ack nor confirm anything new.
        "S_AckGate": lambda s: z3.And([z3.Implies(z3.And(s[("isM", m)], z3.Not(witness(s, m))), z3.And(
            *[z3.Implies(s[("sssC", x)], z3.Or(x == m, applied_view(s, m, x))) for x in bs],
            *[z3.Not(z3.And(s[("isM", o)], s[("be", o)] > s[("be", m)])) for o in bs if o != m],
            *[z3.Implies(z3.And(s[("bm", x)] == o, z3.Not(s[("isM", x)]), s[("be", x)] > s[("be", m)]),
                         applied_view(s, m, o)) for x in bs for o in bs if o not in (m, x)]))
            for m in bs]),
        # A master newer than an acting one was elected from an SSS the older one had left for good:
        # the older one is neither in the controller's SSS nor its master.
        "S_NewerMaster": lambda s: z3.And(
            *[z3.Implies(z3.And(s[("isM", m)], s[("isM", o)], s[("be", o)] > s[("be", m)]),
                         z3.And(z3.Not(s[("sssC", m)]), s["mid"] != m)) for m in bs for o in bs if o != m],
            # an acting master still in the controller's SSS, or re-elected, has seen no newer epoch written
            *[z3.Implies(z3.And(s[("isM", m)], z3.Or(s[("sssC", m)], s["mid"] == m), s[("rec", y)] != 0),
                         s[("recE", y)] <= s[("be", m)]) for m in bs for y in bs],
            # a master re-elected while it still acts in an older epoch (a follower learned the newer one):
            # nobody acted or wrote in the epochs between
            *[z3.Implies(z3.And(z3.Not(s[("isM", x)]), s[("bm", x)] == m, s[("isM", m)], s[("be", x)] > s[("be", m)],
                                s[("rec", y)] != 0),
                         z3.Or(s[("recE", y)] <= s[("be", m)], s[("recE", y)] > s[("be", x)]))
              for x in bs for m in bs for y in bs if x != m],
            *[z3.Implies(z3.And(z3.Not(s[("isM", x)]), s[("bm", x)] == m, s[("isM", m)], s[("be", x)] > s[("be", m)],
                                s[("isM", o)]),
                         z3.Or(s[("be", o)] <= s[("be", m)], s[("be", o)] > s[("be", x)]))
              for x in bs for m in bs for o in bs if len({x, m, o}) == 3],
            # a broker that learned the current epoch follows its master
            *[z3.Implies(z3.And(z3.Not(s[("isM", x)]), s[("bm", x)] != NONE, s[("be", x)] == s["mep"]),
                         s[("bm", x)] == s["mid"]) for x in bs],
            # a slave holds records of epochs up to what it learned, or what its acting master writes
            *[z3.Implies(z3.And(z3.Not(s[("isM", x)]), s[("bm", x)] == m, s[("isM", m)], s[("rec", x)] != 0),
                         z3.Or(s[("recE", x)] <= s[("be", x)], s[("recE", x)] <= s[("be", m)]))
              for x in bs for m in bs if x != m],
            # one master per epoch, as brokers learn it
            *[z3.Implies(z3.And(z3.Not(s[("isM", x)]), s[("bm", x)] == o, s[("isM", m)], s[("be", m)] == s[("be", x)]),
                         o == m) for x in bs for o in bs for m in bs if x != o and x != m]),
        # A master in another master's view was promoted after that view was formed (a slave joins a view
        # only while connected), so its epoch is the later one.
        "S_ViewMasters": lambda s: z3.And([z3.Implies(
            z3.And(s[("isM", m)], s[("isM", x)], view(s, m, x)), s[("be", x)] > s[("be", m)])
            for m in bs for x in bs if x != m]),
        "S_UniqueEpochRecord": lambda s: z3.And(
            *[z3.Implies(z3.And(s[("rec", x)] != 0, s[("rec", y)] != 0, s[("recE", x)] == s[("recE", y)]),
                         s[("rec", x)] == s[("rec", y)]) for x in bs for y in bs if x < y],
            *[z3.Implies(z3.And(s["rEx"], s[("up", m)], s["rM"] == m, s[("be", m)] >= 1), s[("be", m)] >= s["rEp"])
              for m in bs],
            # a broker that learned R's epoch follows R's master (one master per epoch)
            *[z3.Implies(z3.And(s["rEx"], z3.Not(s[("isM", x)]), s[("bm", x)] != NONE, s[("be", x)] == s["rEp"]),
                         s[("bm", x)] == s["rM"]) for x in bs],
            *[z3.Implies(z3.And(s["rEx"], s[("isM", x)], s[("be", x)] == s["rEp"]), s["rM"] == x) for x in bs]),
    }


# ------------------------------------------------------------------ checking

Result = write_path.Result   # config, invariant, result ("proved" | "CTI" | "base fails" | "no CTI"), seconds, cti


def _model_state(m: z3.ModelRef, s: FS) -> dict:
    def val(x):
        v = m.eval(x, model_completion=True)
        return v.as_long() if z3.is_int_value(v) else z3.is_true(v)

    out: dict = {"K": val(s.K)}
    for key, var in s.v.items():
        if isinstance(key, str):
            out[key] = val(var)
        elif len(key) == 2:
            out.setdefault(key[0], [None] * s.a.n)[key[1]] = val(var)
        else:
            row = out.setdefault(key[0], [[None] * s.a.n for _ in range(s.a.n)])
            row[key[1]][key[2]] = val(var)
    for name in ("lss", "rss"):
        out[name] = [[x for x, on in enumerate(row) if on] for row in out[name]]
    out["sssC"] = [x for x, on in enumerate(out["sssC"]) if on]
    out["rSt"] = STATUS_NAMES.get(out["rSt"], out["rSt"])
    return out


def _action_taken(a: Abstract, m: z3.ModelRef, s: FS, t: FS) -> str:
    acts = actions(a, s, t)
    return next(n for n, rel in acts.items() if z3.is_true(m.eval(rel, model_completion=True)))


def _every(a: Abstract) -> dict:
    return {**proved_properties(a), **strengthening(a)}


@proofmemo.memo("failover.prove")
def prove(name: str, cfg: FailoverConfig) -> list[Result]:
    """Every conjunct of the inductive invariant: proved, or a CTI (with whether BMC reaches it)."""
    a = Abstract(cfg)
    every = _every(a)
    results = []
    k = z3.Int("K")
    s0, s, t = FS(a, "init", k), FS(a, "pre", k), FS(a, "post", k)
    base, step = write_path.conjunct_checks(init(a, s0), [*[f(s) for f in every.values()], next_rel(a, s, t)])
    for i, (pname, prop) in enumerate(every.items()):
        start = time.perf_counter()
        answer = write_path.satisfiable_with(base, z3.Not(prop(s0)), f"base{i}")
        if answer != z3.unsat:
            results.append(Result(name, pname, "base fails" if answer == z3.sat else "unknown",
                                  round(time.perf_counter() - start, 3)))
            continue
        answer = write_path.satisfiable_with(step, z3.Not(prop(t)), f"step{i}")
        if answer != z3.sat:
            results.append(Result(name, pname, "proved" if answer == z3.unsat else "unknown",
                                  round(time.perf_counter() - start, 3)))
            continue
        mdl = step.model()
        results.append(Result(name, pname, "CTI", round(time.perf_counter() - start, 3),
                              {"action": _action_taken(a, mdl, s, t), "pre": _model_state(mdl, s),
                               "post": _model_state(mdl, t), "reachable_in": None}))
    return results


@proofmemo.memo("failover.vacuous_actions")
def vacuous_actions(cfg: FailoverConfig) -> list[str]:
    """Actions no state satisfying the invariant can take (a proof over them would be empty)."""
    a = Abstract(cfg)
    k = z3.Int("K")
    s, t = FS(a, "vpre", k), FS(a, "vpost", k)
    solver = z3.Solver()
    solver.add(*[f(s) for f in _every(a).values()])
    return [name for i, (name, rel) in enumerate(actions(a, s, t).items())
            if write_path.satisfiable_with(solver, rel, f"action{i}") != z3.sat]


# The liveness bug's cfg names MasterEventuallyStable; its safety half is checked here.
SAFETY_HALF = {"MasterEventuallyStable": "ElectionEnabled"}


def shortest_violation(a: Abstract, prop: Callable[[FS], z3.BoolRef], tag: str):
    """Bounded model checking, incrementally (one solver, one more step per depth): the fewest
    steps from Init to a violation of ``prop``, as (states, model), or None within MAX_BMC_DEPTH."""
    k = z3.Int(f"K_{tag}")
    states = [FS(a, f"{tag}_0", k)]
    solver = z3.Solver()
    solver.add(init(a, states[0]))
    for depth in range(MAX_BMC_DEPTH + 1):
        solver.push()
        solver.add(z3.Not(prop(states[depth])))
        if write_path.check(solver) == z3.sat:
            return states, solver.model()
        solver.pop()
        states.append(FS(a, f"{tag}_{depth + 1}", k))
        solver.add(next_rel(a, states[depth], states[depth + 1]))
    return None


def abstract_path(a: Abstract, cfg: FailoverConfig, twin_labels: tuple[str, ...]) -> list[str] | None:
    """The twin's action labels as this abstraction's ('ReplicaConnect(b2)' -> 'ReplicaConnect(1)';
    'Respond(3)' -> 'Respond': the abstraction names no request), or None when some label has no
    action here (a lasso's 'Stuttering')."""
    k = z3.Int("K_labels")
    known = actions(a, FS(a, "labels_pre", k), FS(a, "labels_post", k)).keys()
    out = []
    for label in twin_labels:
        name, _, args = label.partition("(")
        parts = args.rstrip(")").split(",") if args else []
        if parts and all(p in cfg.brokers for p in parts):
            label = f"{name}({','.join(str(cfg.index(p)) for p in parts)})"
        elif parts:
            label = name
        if label not in known:
            return None
        out.append(label)
    return out


def pinned_violation(a: Abstract, prop: Callable[[FS], z3.BoolRef], labels: list[str], tag: str):
    """z3's answer on the path whose every step is the named action, ending in a violation of
    ``prop``, and when sat the path as (states, model).  One satisfiability check with each step's
    action fixed: a fraction of a bounded model check's search (BugTruncateNotDurable's 12 steps:
    1.4 CPU-s against 20)."""
    k = z3.Int(f"K_{tag}")
    states = [FS(a, f"{tag}_{j}", k) for j in range(len(labels) + 1)]
    solver = z3.Solver()
    solver.add(init(a, states[0]))
    for j, label in enumerate(labels):
        solver.add(actions(a, states[j], states[j + 1])[label])
    solver.add(z3.Not(prop(states[-1])))
    answer = write_path.check(solver)
    return answer, ((states, solver.model()) if answer == z3.sat else None)


@proofmemo.memo("failover.bug_witness")
def _bug_witness(cfg: FailoverConfig, prop_name: str,
                 twin_path: tuple[str, ...] | None = None) -> tuple[write_path.Witness | None, str]:
    """A path to a violation of ``prop_name`` and where it came from (the CLI and the tests share
    it).  Given ``twin_path`` (the twin's breadth-first counterexample on the bug's TLC model:
    shortest within the model's bounds), that path pinned step by step; otherwise, or when the
    abstraction has no such path, z3's own bounded model check, depth by depth (shortest with no
    bounds but MAX_BMC_DEPTH, so never longer than the twin's)."""
    a = Abstract(cfg)
    props = properties(a)
    every = {**_every(a), prop_name: props[prop_name]}   # a BMC-only property joins the invariant here
    labels = abstract_path(a, cfg, twin_path) if twin_path is not None else None
    answer, found = pinned_violation(a, props[prop_name], labels, "pin") if labels is not None else (None, None)
    if found is not None:
        assert labels is not None
        return write_path.witness(a, found, every, _model_state, _action_taken, labels), PATH_FROM_TWIN
    if twin_path is None:
        source = PATH_FROM_BMC
    elif labels is None:
        source = f"{PATH_FROM_BMC} (the twin's path has a step the abstraction does not name)"
    elif answer == z3.unsat:
        source = f"{PATH_FROM_BMC} (the twin's path is not one of the abstraction's)"
    else:
        source = f"{PATH_FROM_BMC} (z3 could not tell whether the twin's path is one of the abstraction's)"
    return write_path.witness(a, shortest_violation(a, props[prop_name], "bug"), every, _model_state,
                              _action_taken), source


PATH_FROM_TWIN = "the twin's BFS counterexample, pinned in z3"
PATH_FROM_BMC = "z3's bounded model check"


def bug_cti(name: str, cfg: FailoverConfig, expected: str, twin_path: tuple[str, ...] | None = None) -> Result:
    """A path to a violation of the expected property (``_bug_witness``), and on it the
    first step that breaks the inductive invariant: a CTI reachable by construction."""
    prop_name = SAFETY_HALF.get(expected, expected)
    start = time.perf_counter()
    w, source = _bug_witness(cfg, prop_name, twin_path)
    r = write_path.cti_on_path(name, prop_name, w, round(time.perf_counter() - start, 3))
    return r if r.cti is None else attrs.evolve(r, cti={**r.cti, "path_from": source})


def cti_path(cfg: FailoverConfig, expected: str, twin_path: tuple[str, ...] | None = None) -> list[str] | None:
    """The abstract actions of ``bug_cti``'s path to a violation of ``expected`` (brokers by index),
    for replaying through the twin, or None when there is none within the bound."""
    w, _ = _bug_witness(cfg, SAFETY_HALF.get(expected, expected), twin_path)
    return None if w is None else list(w.actions)


def prove_all(green: list[tuple[str, FailoverConfig, str]], bugs: list[tuple[str, FailoverConfig, str]],
              on_done: Callable[[str], None] = lambda name: None,
              twin_paths: dict[str, tuple[str, ...]] | None = None) -> write_path.ProofReport:
    """Every green failover configuration's invariants proved inductive, a reachable CTI per bug
    (on the twin's path of ``twin_paths`` for the bugs it names)."""
    start = time.perf_counter()
    proofs = []
    for name, cfg, _ in green:
        proofs.append(write_path.GreenProof(name, tuple(prove(name, cfg)),
                                            frozenset(proved_properties(Abstract(cfg))), tuple(vacuous_actions(cfg))))
        on_done(name)
    ctis = []
    for name, cfg, expected in bugs:
        ctis.append(bug_cti(name, cfg, expected, (twin_paths or {}).get(name)))
        on_done(name)
    return write_path.ProofReport(tuple(proofs), tuple(ctis), round(time.perf_counter() - start, 2))
