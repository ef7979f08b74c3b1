"""Coverage of the spec by real runs: which actions, which branches of each action, and which
properties' antecedents a fuzz campaign, a Hypothesis run or a trace reached, and how often.

A branch is one of the labelled disjuncts of tla/AckOrder.tla (``PutAppend::``, ``ReportRefused::``,
``TimeoutFlushSlave(status)::``...); ``branch_of`` gives the twin's step the same name, so that TLC's
own coverage of a label (``ackorder tlc --coverage``) and the real runs' coverage of it sit side by
side.  Branch keys are ``Action/Label``, or ``Action`` for an action with one branch.  An antecedent
is the situation a property talks about ("PUT_OK while a replica was disconnected"): a property
checked only where its antecedent never held has not been tested.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import attrs

from spec.config import Config
from spec.functions import holders, replica_covered
from spec.seq import any_field
from spec.state import (
    FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, PUT_OK, SLAVE_NOT_AVAILABLE, TORN, UP, WAITING, State,
)

# The labelled branches of each action, as in tla/AckOrder.tla (empty: one branch, the action).
BRANCHES: dict[str, tuple[str, ...]] = {
    "Put": ("PutAppend", "PutReject"),
    "Commit": ("CommitCopy", "CommitRetry"),
    "Flush": ("FlushDurable", "FlushBehindHole"),
    "FlushFail": ("FlushFailReadOnly", "FlushFailIgnored"),
    "WriteFail": ("WriteFailPut", "WriteFailCommit", "WriteFailPutCounted", "WriteFailCommitCounted"),
    "Respond": (),
    "Timeout": ("TimeoutFlushDisk", "TimeoutFlushSlave", "TimeoutSlaveNotAvailable", "TimeoutAsOK"),
    "MasterProcessCrash": (),
    "MasterMachineCrash": ("MachineCrashWhole", "MachineCrashTorn"),
    "Recover": ("RecoverAsIs", "RecoverTruncate"),
    "ReplicaConnect": (),
    "Transfer": (),
    "ReplicaAck": ("ReportTaken", "ReportRefused"),
    "ForgedAck": ("ReportTaken", "ReportRefused"),
    "ReplicaDisconnect": (),
    "ReplicaCrash": (),
    "ReplicaRestart": (),
}

ALL_BRANCHES: tuple[str, ...] = tuple(
    f"{action}/{label}" if labels else action for action, labels in BRANCHES.items() for label in (labels or ("",)))

# Branches only a bug switch's spec takes: a correct implementation must never reach them.
BUG_ONLY: dict[str, tuple[str, ...]] = {
    "Flush/FlushBehindHole": ("BugFlushIgnoresFsyncError",),
    "FlushFail/FlushFailIgnored": ("BugFlushIgnoresFsyncError",),
    "WriteFail/WriteFailPutCounted": ("BugFsyncCoversFailedWrite",),
    "WriteFail/WriteFailCommitCounted": ("BugFsyncCoversFailedWrite",),
    "Timeout/TimeoutAsOK": ("BugTimeoutAsOK",),
    "ReplicaAck/ReportRefused": ("BugTransferBeyondCommitted",),     # an honest slave holds committed data only
    "ForgedAck/ReportTaken": ("BugAcceptAckBeyondLog", "BugAckCheckedAgainstWrote"),  # beyond committed: refused
}

# What a configuration needs for a branch to be reachable at all (a predicate on the spec Config).
NEEDS: dict[str, tuple[str, Callable[[Config], bool]]] = {
    "Commit/CommitCopy": ("the transient store pool", lambda c: c.transient_store_pool),
    "Commit/CommitRetry": ("the transient store pool", lambda c: c.transient_store_pool),
    "WriteFail/WriteFailCommit": ("the transient store pool", lambda c: c.transient_store_pool),
    "WriteFail/WriteFailPut": ("no transient store pool", lambda c: not c.transient_store_pool),
    "Timeout/TimeoutFlushSlave": ("SYNC_MASTER", lambda c: c.sync_master),
    "Timeout/TimeoutSlaveNotAvailable": ("SYNC_MASTER", lambda c: c.sync_master),
    "Timeout/TimeoutFlushDisk": ("SYNC_FLUSH or SYNC_MASTER", lambda c: c.sync_flush or c.sync_master),
}


def branch_of(cfg: Config, label: str, s: State, t: State) -> str:
    """The labelled branch of tla/AckOrder.tla the twin's step s -> t (action ``label``) took."""
    action, _, param = label.partition("(")
    param = param.rstrip(")")
    if action == "Put":
        name = "PutAppend" if len(t.log) > len(s.log) else "PutReject"
    elif action == "Commit":
        name = "CommitCopy" if s.landed == 0 else "CommitRetry"
    elif action == "Flush":
        name = "FlushDurable" if s.durable == s.flushed else "FlushBehindHole"
    elif action == "FlushFail":
        name = "FlushFailIgnored" if cfg.bug("BugFlushIgnoresFsyncError") else "FlushFailReadOnly"
    elif action == "WriteFail":
        name = ("WriteFailCommit" if cfg.transient_store_pool else "WriteFailPut") + \
            ("Counted" if cfg.bug("BugFsyncCoversFailedWrite") else "")
    elif action == "Timeout":
        name = _TIMEOUT_LABELS[t.reqs[int(param) - 1].status]
    elif action == "MasterMachineCrash":
        name = "MachineCrashTorn" if t.log[t.committed:] == (TORN,) else "MachineCrashWhole"
    elif action == "Recover":
        name = "RecoverAsIs" if t.log == s.log else "RecoverTruncate"
    elif action in ("ReplicaAck", "ForgedAck"):
        k = cfg.replicas.index(param)
        name = "ReportTaken" if t.connected[k] else "ReportRefused"
    else:
        return action
    return f"{action}/{name}"


_TIMEOUT_LABELS = {FLUSH_DISK_TIMEOUT: "TimeoutFlushDisk", FLUSH_SLAVE_TIMEOUT: "TimeoutFlushSlave",
                   SLAVE_NOT_AVAILABLE: "TimeoutSlaveNotAvailable", PUT_OK: "TimeoutAsOK"}


# ------------------------------------------------------------------ antecedents

@attrs.frozen
class Antecedent:
    name: str
    prop: str                                   # the property whose antecedent it is
    actions: tuple[str, ...]                    # the actions whose steps can reach it
    holds: Callable[[Config, str, State, State], bool]


def _param(label: str) -> str:
    return label.partition("(")[2].rstrip(")")


def _req(label: str, s: State):
    return s.reqs[int(_param(label)) - 1]


def _rlog(c: Config, label: str, s: State) -> tuple:
    return s.rlog[c.replicas.index(_param(label))]


def _released(s: State, t: State) -> int:
    """Waiters whose flush leg a Flush step completed.  Release only visits the records between
    the old flushed and the committed offset (spec/actions.py), so only those are read: a cost
    independent of the run's length (and none when the step kept ``reqs``: under ASYNC_FLUSH, or a
    flush that released nobody, where that gap can be the whole unflushed tail)."""
    if t.reqs is s.reqs:
        return 0
    count = 0
    for pos in range(s.flushed, min(s.committed, len(s.log))):
        rid = s.log[pos]
        if 0 < rid <= len(s.reqs) and not s.reqs[rid - 1].flush_done and t.reqs[rid - 1].flush_done:
            count += 1
    return count


def _is(action: str) -> Callable[[str], bool]:
    return lambda label: label.partition("(")[0] == action


_respond, _timeout = _is("Respond"), _is("Timeout")
_CRASHES = ("MasterProcessCrash", "MasterMachineCrash")

ANTECEDENTS: tuple[Antecedent, ...] = (
    Antecedent("PUT_OK under SYNC_FLUSH", "NoAckBeforeFlush", ("Respond",),
               lambda c, a, s, t: _respond(a) and c.sync_flush),
    Antecedent("one fsync released two or more waiters (group commit)", "NoAckBeforeFlush", ("Flush",),
               lambda c, a, s, t: a == "Flush" and _released(s, t) >= 2),
    Antecedent("PUT_OK under SYNC_MASTER", "NoAckBeforeReplicas", ("Respond",),
               lambda c, a, s, t: _respond(a) and c.sync_master),
    Antecedent("PUT_OK while a replica was disconnected", "NoAckBeforeReplicas", ("Respond",),
               lambda c, a, s, t: _respond(a) and not all(s.connected)),
    Antecedent("PUT_OK with the pool on and the message not yet committed", "NoAckBeforeWrite", ("Respond",),
               lambda c, a, s, t: _respond(a) and _req(a, s).off > s.committed),
    Antecedent("PUT_OK after a write failed (store read-only)", "NoAckBeforeWrite", ("Respond",),
               lambda c, a, s, t: _respond(a) and not s.writable),
    Antecedent("a deadline while the replica leg was pending", "TimeoutStatusPrecedence", ("Timeout",),
               lambda c, a, s, t: _timeout(a) and not replica_covered(c, s, _req(a, s).off)),
    Antecedent("a deadline under SYNC_MASTER with no slave connected", "TimeoutStatusPrecedence", ("Timeout",),
               lambda c, a, s, t: _timeout(a) and c.sync_master and not any(s.connected)),
    Antecedent("a deadline on a request whose flush leg had completed", "TimeoutIsError", ("Timeout",),
               lambda c, a, s, t: _timeout(a) and _req(a, s).flush_done),
    Antecedent("an error answer for a message a slave already holds (ambiguous)", "AmbiguousAckOrdered", ("Timeout",),
               lambda c, a, s, t: _timeout(a) and bool(holders(c, s, int(_param(a))))),
    Antecedent("a recovery dropping a torn record", "AmbiguousAckOrdered", ("Recover",),
               lambda c, a, s, t: a == "Recover" and t.log != s.log),
    Antecedent("a master crash with PUT_OK messages", "AckedSurvivesCrash", _CRASHES,
               lambda c, a, s, t: a in ("MasterProcessCrash", "MasterMachineCrash")
               and any_field(s.reqs, "status", PUT_OK)),
    Antecedent("a power loss that lost records", "AckedSurvivesCrash", ("MasterMachineCrash",),
               lambda c, a, s, t: a == "MasterMachineCrash" and t.committed < len(s.log)),
    Antecedent("a master crash with requests waiting", "OneResponsePerRequest", _CRASHES,
               lambda c, a, s, t: a in ("MasterProcessCrash", "MasterMachineCrash")
               and s.mstate == UP and any_field(s.reqs, "status", WAITING, reverse=True)),
    Antecedent("a slave connecting with records (the handshake checks them)", "LogMatching", ("ReplicaConnect",),
               lambda c, a, s, t: _is("ReplicaConnect")(a) and len(_rlog(c, a, s)) > 0),
    Antecedent("a report beyond committed, refused", "WatermarksOrdered", ("ReplicaAck", "ForgedAck"),
               lambda c, a, s, t: a.partition("(")[0] in ("ReplicaAck", "ForgedAck")
               and sum(t.connected) < sum(s.connected)),
    Antecedent("a request answered by a deadline", "EveryRequestAnswered", ("Timeout",), lambda c, a, s, t: _timeout(a)),
    Antecedent("a slave reconnecting behind the master (it must catch up)", "ReplicasCatchUp", ("ReplicaConnect",),
               lambda c, a, s, t: _is("ReplicaConnect")(a) and 0 < len(_rlog(c, a, s)) < s.committed),
)


_BY_ACTION: dict[str, list[Antecedent]] = {}
for _a in ANTECEDENTS:
    for _action in _a.actions:
        _BY_ACTION.setdefault(_action, []).append(_a)


@attrs.define
class Coverage:
    """Counts of branches and antecedents reached by the steps fed to it."""

    branches: Counter = attrs.Factory(Counter)
    antecedents: Counter = attrs.Factory(Counter)

    def step(self, cfg: Config, label: str, s: State, t: State) -> None:
        self.branches[branch_of(cfg, label, s, t)] += 1
        for a in _BY_ACTION.get(label.partition("(")[0], ()):
            if a.holds(cfg, label, s, t):
                self.antecedents[a.name] += 1

    def add(self, other: Coverage) -> None:
        self.branches.update(other.branches)
        self.antecedents.update(other.antecedents)


# ------------------------------------------------------------------ tables

@attrs.frozen
class Row:
    key: str            # "Action/Label", "Action", or an antecedent's name
    group: str          # the action, or the property
    name: str           # the label (or "" for a one-branch action), or the antecedent
    runs: int           # runs (seeds, test cases, traces) that reached it
    times: int          # steps that reached it, summed over the runs
    note: str = ""      # why it was not reached, when it was not

    @property
    def reached(self) -> bool:
        return self.times > 0


def branch_table(runs: list[tuple[Config | None, dict]], bug: str | None = None) -> list[Row]:
    """One row per branch of the spec: how many runs reached it and how often; for a branch no run
    reached, why (only a bug's spec has it, no run's configuration allows it, or none got there).
    ``runs``: (the run's spec configuration if known, its branch counts)."""
    rows = []
    for key in ALL_BRANCHES:
        action, _, label = key.partition("/")
        reached = [counts.get(key, 0) for _, counts in runs]
        times, n = sum(reached), sum(1 for x in reached if x)
        note = ""
        if not times:
            if key in BUG_ONLY and bug not in BUG_ONLY[key]:
                note = f"only the spec of {' or '.join(BUG_ONLY[key])} takes it: a correct run never does"
            elif key in NEEDS and all(c is not None for c, _ in runs):
                what, needs = NEEDS[key]
                able = sum(1 for c, _ in runs if needs(c))
                note = f"needs {what}: no run had it" if not able else f"not reached in the {_runs(able)} that could"
            else:
                note = f"not reached in {_runs(len(runs))}"
        rows.append(Row(key, action, label, n, times, note))
    return rows


def _runs(n: int) -> str:
    return f"{n:,} run" + ("" if n == 1 else "s")


def antecedent_table(runs: list[dict]) -> list[Row]:
    rows = []
    for a in ANTECEDENTS:
        reached = [counts.get(a.name, 0) for counts in runs]
        times, n = sum(reached), sum(1 for x in reached if x)
        rows.append(Row(a.name, a.prop, a.name, n, times, "" if times else f"not reached in {_runs(len(runs))}"))
    return rows
