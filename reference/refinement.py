"""Refinement of the spec by the reference: every event of the reference is
a sequence of legal spec steps, and the spec's invariants hold after it.

The cores record, as ghost state, the spec actions each event performed
(``spec_steps``, labelled with tla/AckOrder.tla names and the parameters that
make them deterministic: record counts, request ids, slave names).  The
checker replays those steps through the Python twin (spec/actions.py) from
its shadow spec state, then compares the shadow with the abstraction of the
reference's real state: byte offsets become record counts, producer keys
become spec request ids.  Any difference, any step the spec cannot take and
any invariant violation is reported at the event that caused it.
"""

from __future__ import annotations

import attrs

from reference.config import StoreConfig
from spec import actions as sa
from spec.config import Config
from spec.functions import page_cache_end
from spec.properties import INVARIANTS, SAFETY
from spec.seq import Seq, same_prefix
from spec.state import TORN, WAITING, State, evolve

# One file of unbounded size: the reference's segments hold variable-size
# records, so the spec's fixed FileSize is replaced by "never in the way";
# the reference's own segment boundaries are checked by its unit tests.
SPEC_FILE_SIZE = 10**12


def spec_config(store: StoreConfig, replicas: tuple[str, ...]) -> Config:
    # commit_on_replica_wait stays FALSE here: the reference commits when the replica leg is
    # registered (after the flush under SYNC_FLUSH + BLOCKING), not always in the put step as the
    # spec's CommitsOnPut does, so it refines the general spec, where a Commit may follow any Put.
    return Config(
        replicas=replicas, flush_mode=store.flush_disk_type, repl_mode=store.broker_role,
        transient_store_pool=store.transient_store_pool_enable, ack_policy=store.ack_policy,
        in_sync_replicas=min(store.in_sync_replicas, len(replicas) + 1), file_size=SPEC_FILE_SIZE,
        bugs=store.bugs,
    )


_NO_RESPONSES = frozenset()


class RefinementError(AssertionError):
    """The reference did something the spec cannot do, or its state differs."""


class PropertyViolation(AssertionError):
    def __init__(self, prop: str, message: str) -> None:
        super().__init__(message)
        self.prop = prop


@attrs.define
class SpecRequests:
    """Producer request id -> spec request id (1, 2, ... in Put order) and offset."""

    spec_id: dict[int, int] = attrs.Factory(dict)
    spec_off: dict[int, int] = attrs.Factory(dict)
    by_spec_id: list[int] = attrs.Factory(list)   # spec id - 1 -> producer request id

    def add(self, req_id: int, off_records: int) -> int:
        assert req_id not in self.spec_id, f"request {req_id} put twice"
        self.by_spec_id.append(req_id)
        self.spec_id[req_id] = len(self.by_spec_id)
        self.spec_off[req_id] = off_records
        return self.spec_id[req_id]


def strip_ghost(s: State) -> State:
    return attrs.evolve(s, inv_responses=frozenset())


def _diff(expected: State, got: State) -> str:
    lines = []
    for f in attrs.fields(State):
        a, b = getattr(expected, f.name), getattr(got, f.name)
        if a != b:
            lines.append(f"  {f.name}: spec {a!r}\n  {' ' * len(f.name)}  reference {b!r}")
    return "\n".join(lines)


class RefinementChecker:
    """Shadow spec state, advanced by the labelled steps of each event.

    Invariants are checked after every spec step, incrementally (see
    ``IncrementalInvariants``), and in full every ``full_check_interval()``
    steps and at ``finish``, so a gap in the incremental reasoning cannot hide
    a violation for long.  The shadow's ``inv_responses`` holds the response
    events of its last step only (the steps never copy the history); the
    whole history is ``responses``, and ``full_state()`` puts it back."""

    def __init__(self, cfg: Config, invariants: tuple[str, ...] = SAFETY,
                 full_check_every: int = 256) -> None:
        self.cfg = cfg
        self.index = {r: k for k, r in enumerate(cfg.replicas)}
        # Seq, not tuple: the twin's steps extend and update the shadow's sequences in time
        # independent of the run's length (spec/seq.py); the values are the same.
        s0 = sa.initial_state(cfg)
        self.shadow = attrs.evolve(s0, log=Seq(s0.log), reqs=Seq(s0.reqs), rlog=tuple(Seq(r) for r in s0.rlog))
        self.requests = SpecRequests()
        self.invariants = [(name, INVARIANTS[name]) for name in invariants if name != "TypeOK"]
        self.incremental = IncrementalInvariants(cfg, [name for name, _ in self.invariants])
        self.full_check_every = full_check_every
        self._next_full_check = full_check_every
        self.full_compares = 0
        self.steps_checked = 0
        self.responses: list = []                   # inv_responses, in order (the shadow keeps the last step's)
        self.abstraction = None                     # the reference's side: compare, observe, cross_check
        self.taken: list[tuple[str, State]] = []    # the spec steps of the last event, in order

    # --- one labelled step ----------------------------------------------------

    @staticmethod
    def _pick(label: tuple, options: list[State]) -> State:
        """The first successor (the labelled steps are deterministic: one at most, or the
        options were filtered to the ones matching the label)."""
        if not options:
            raise RefinementError(f"spec step {label} is not possible from the shadow state "
                                  f"(no successor matches)")
        return options[0]

    @staticmethod
    def _one(label: tuple, t: State | None) -> State:
        if t is None:
            raise RefinementError(f"spec step {label} is not possible from the shadow state")
        return t

    def _apply(self, label: tuple) -> State | None:
        """The successor for one label, or None for a step with no spec effect."""
        cfg, s = self.cfg, self.shadow
        kind = label[0]
        if kind == "Transfer":          # the commonest step first
            return self._pick(label, sa.transfer(cfg, s, self.index[label[1]]))
        if kind == "Put":
            req_id = label[1]
            t = self._pick(label, sa.put(cfg, s))
            self.requests.add(req_id, t.reqs[-1].off)
            return t
        if kind == "Commit":
            if label[1] == s.committed:
                return None
            return self._one(label, sa.commit_to(cfg, s, label[1]))
        if kind == "Flush":
            if label[1] == s.flushed:
                return None
            return self._one(label, sa.flush_to(cfg, s, label[1]))
        if kind == "FlushFail":
            return self._one(label, sa.flush_fail_to(cfg, s, label[1]))
        if kind == "WriteFail":   # ("WriteFail", producer request id or None, target under the bug or None)
            in_page_cache = self._page_cache_records()
            options = [t for t in sa.write_fail(cfg, s)
                       if (label[2] is None or t.committed == label[2]) and page_cache_end(t) == in_page_cache]
            t = self._pick(label, options)
            if label[1] is not None:
                self.requests.add(label[1], t.reqs[-1].off)
            return t
        if kind in ("Respond", "Timeout"):
            i = self.requests.spec_id[label[1]]
            if kind == "Respond":
                return self._pick(label, sa.respond(cfg, s, i))
            return self._one(label, sa.timeout_with(cfg, s, i, label[2]))
        if kind == "ReplicaAck":
            k, reported = self.index[label[1]], label[2]
            if reported <= s.ack[k] and s.connected[k] and reported <= s.committed:
                return None  # a report that completes no new record
            if reported > len(s.rlog[k]):         # not what the slave holds: a forged report
                return self._one(label, sa.forged_ack_with(cfg, s, k, reported))
            return self._one(label, sa.replica_ack_with(cfg, s, k, reported))
        if kind == "MasterMachineCrash":
            aborted = sa.abort_waiting(cfg, s, self._maybe_waiting())
            return self._one(label, sa.master_machine_crash_to(cfg, s, label[1], label[2], aborted))
        if kind in _REPLICA_ACTIONS:
            return self._pick(label, _REPLICA_ACTIONS[kind](cfg, s, self.index[label[1]]))
        if kind == "MasterProcessCrash":
            return self._pick(label, sa.master_process_crash(cfg, s, self._maybe_waiting()))
        if kind == "Recover":
            return self._pick(label, sa.recover(cfg, s))
        raise RefinementError(f"unknown spec step {label}")

    def _maybe_waiting(self) -> set[int] | None:
        """Spec ids among which every waiting request of the shadow is, for a crash to abort:
        the ones the abstraction last saw waiting and those put since (a request never waits
        again once answered).  None without an abstraction: the crash reads every request."""
        a = self.abstraction
        if a is None:
            return None
        return set(a.waiting).union(range(a.known + 1, len(self.shadow.reqs) + 1))

    def step(self, labels: list[tuple], event: str = "", page_cache_records=None) -> list[tuple[str, State]]:
        """Apply one event's labelled steps, check the invariants, then compare the shadow with
        the abstraction of the reference's state: what the event touched, through
        ``abstraction.compare`` (called after the steps, which register new requests), and every
        so many steps all of it, re-derived by ``abstraction.observe``.  ``page_cache_records()``
        says how many records the page cache really holds: only the disk knows what a failed
        write left there, so it picks WriteFail's successor.  Returns the (action, state) pairs
        taken, for traces."""
        self._page_cache_records = page_cache_records
        taken = self.taken = []     # kept on the checker: a trace writer reads it even after a violation
        start = self.shadow
        full = False
        for label in labels:
            s = self.shadow
            if s.inv_responses:     # the ghost history lives in self.responses: no step copies it
                s = self.shadow = evolve(s, inv_responses=_NO_RESPONSES)
            try:
                t = self._apply(label)
            except RefinementError as err:
                raise RefinementError(f"{event}: {err}\nshadow state: {self.full_state()}") from None
            if t is not None:
                before, self.shadow = s, t
                self.responses.extend(t.inv_responses)
                name = label_name(label, self.requests)
                if t.aux_ctrs.forgedReport > before.aux_ctrs.forgedReport:   # the spec's ForgedAck took it
                    name = name.replace("ReplicaAck", "ForgedAck")
                taken.append((name, t))
                self.steps_checked += 1
                bad = self.incremental.check(before, t, label[0])
                if bad is None and self.steps_checked >= self._next_full_check:
                    full = True
                    self._next_full_check = self.steps_checked + self.full_check_interval()
                    bad = self._first_violated()
                if bad is not None:
                    raise PropertyViolation(bad, f"{event}: {bad} violated after spec step "
                                                 f"{label_name(label, self.requests)}")
        diffs = self.abstraction.compare(labels, start, self.shadow)
        if diffs:
            raise RefinementError(
                f"{event}: after spec steps {[label_name(l, self.requests) for l in labels]} the spec state "
                f"and the reference state differ:\n" + "\n".join(
                    f"  {k}: spec {a!r}\n  {' ' * len(k)}  reference {b!r}" for k, (a, b) in diffs.items()))
        if full:
            self.full_compare(event)
        return taken

    def full_check_interval(self) -> int:
        """Spec steps until the next full check: at least ``full_check_every``, and as many as
        the state has requests, so that its O(run length) cost stays a constant per step."""
        return max(self.full_check_every, len(self.shadow.reqs))

    def full_state(self) -> State:
        """The shadow with its whole ghost history (O(run length))."""
        return attrs.evolve(self.shadow, inv_responses=frozenset(self.responses))

    def full_compare(self, event: str) -> None:
        """The whole spec state against the whole abstraction derived from scratch, and the
        incremental abstraction against that derived one."""
        observed = self.abstraction.observe()
        if strip_ghost(self.shadow) != observed:
            raise RefinementError(f"{event}: the spec state and the reference state differ (full comparison):\n"
                                  f"{_diff(strip_ghost(self.shadow), observed)}")
        self.abstraction.cross_check(observed)
        self.full_compares += 1

    def _first_violated(self) -> str | None:
        state = self.full_state()
        return next((name for name, check in self.invariants if not check(self.cfg, state)), None)

    def finish(self, event: str = "end of run") -> None:
        """A full check of every invariant on the final state, and of the abstraction."""
        if (bad := self._first_violated()) is not None:
            raise PropertyViolation(bad, f"{event}: {bad} violated")
        if self.abstraction is not None:
            self.full_compare(event)


_REPLICA_ACTIONS = {"ReplicaConnect": sa.replica_connect, "Transfer": sa.transfer,
                    "ReplicaDisconnect": sa.replica_disconnect, "ReplicaCrash": sa.replica_crash,
                    "ReplicaRestart": sa.replica_restart}
_CRASHES = frozenset({"MasterProcessCrash", "MasterMachineCrash", "Recover"})


class IncrementalInvariants:
    """The safety invariants checked on one step from a state where they held.

    Each invariant can only become false through the variables a step
    changes, so most steps need a look at what they changed only: a new
    response event, the record appended to a log, the slave that connected.
    Steps that rewrite the master's log (crashes, recovery) get a full check
    of the invariants that read it."""

    def __init__(self, cfg: Config, names: list[str]) -> None:
        from spec import functions as f
        from spec import properties as p

        self.cfg, self.names, self.f, self.p = cfg, set(names), f, p
        self.watermarks = "WatermarksOrdered" in self.names
        self.log_matching = "LogMatching" in self.names
        self.acked_survives = "AckedSurvivesCrash" in self.names and p.promised(cfg)
        self.ambiguous = "AmbiguousAckOrdered" in self.names
        self._up_log = None     # the master's log when it last died, well formed (the invariant held)

    def check(self, s: State, t: State, kind: str) -> str | None:
        cfg, p, f = self.cfg, self.p, self.f
        names = self.names
        new_events = t.inv_responses - s.inv_responses if t.inv_responses is not s.inv_responses else ()
        for e in new_events:
            if "OneResponsePerRequest" in names and (
                    e.id <= len(s.reqs) and s.reqs[e.id - 1].status != WAITING      # answered before
                    or not 1 <= e.id <= len(t.reqs) or t.reqs[e.id - 1].status != e.status):
                return "OneResponsePerRequest"
            if "TimeoutIsError" in names and e.cause == "Timeout" and e.status == "PUT_OK":
                return "TimeoutIsError"
            if "NoAckBeforeFlush" in names and not p.ack_flush_ok(cfg, e):
                return "NoAckBeforeFlush"
            if "NoAckBeforeReplicas" in names and not p.ack_repl_ok(cfg, e):
                return "NoAckBeforeReplicas"
            if "NoAckBeforeWrite" in names and not p.ack_write_ok(cfg, e):
                return "NoAckBeforeWrite"
            if "TimeoutStatusPrecedence" in names and not e.precedenceOK:
                return "TimeoutStatusPrecedence"
        if self.watermarks and not p.watermarks_ordered(cfg, t):
            return "WatermarksOrdered"
        crash = kind in _CRASHES
        # Outside crashes a step that keeps every log and the connections as they were cannot break
        # LogMatching or AmbiguousAckOrdered (read below for what it changed): nothing to read.
        logs_kept = not crash and t.log is s.log and t.rlog is s.rlog
        if self.log_matching and t.mstate == "UP" and not (logs_kept and t.connected is s.connected):
            for k in range(len(cfg.replicas)):
                if not t.connected[k]:
                    continue
                rl = t.rlog[k]
                if crash or not s.connected[k]:      # a new connection: the whole log
                    ok = f.is_prefix(rl, t.log)
                elif rl is not s.rlog[k] and rl:                # a transfer: the new record
                    n = len(rl)
                    ok = n <= len(t.log) and rl[n - 1] == t.log[n - 1]
                else:                                           # puts only extend the master's log
                    ok = True
                if not ok:
                    return "LogMatching"
        if self.acked_survives:
            if crash:
                ok = _acked_survive_cut(cfg, p, s, t)
            else:
                ok = not new_events or all(f.holds(t, t.log, e.id) or p.survives(cfg, t, e.id)
                                           for e in new_events if e.status == "PUT_OK")
            if not ok:
                return "AckedSurvivesCrash"
        if self.ambiguous and not logs_kept:
            if crash:    # a crash leaves the slaves' logs alone; the master's counts once it is up
                if s.mstate == "UP":
                    self._up_log = s.log
                ok = ((t.mstate != "UP" or self._recovered_well_formed(t.log))
                      and all(p.well_formed(a) for a, b in zip(t.rlog, s.rlog) if a is not b))
            else:
                ok = _tail_ordered(t.log, s.log) and (t.rlog is s.rlog or all(
                    _tail_ordered(a, b) for a, b in zip(t.rlog, s.rlog) if a is not b))
            if not ok:
                return "AmbiguousAckOrdered"
        return None

    def _recovered_well_formed(self, log) -> bool:
        """well_formed(log) for the master's log after a recovery: the part it shares with the
        well-formed log of the master before it died (a prefix, by the crash's footprint: checked,
        in O(n / CHUNK) where the two share chunks) is not read again, only what follows it."""
        up = self._up_log
        n = min(len(log), len(up)) if up is not None else 0
        if not n or not same_prefix(log, up, n):
            return self.p.well_formed(log)
        tail = log[n - 1:]
        return all(x != TORN for x in tail) and all(a < b for a, b in zip(tail, tail[1:]))


def _acked_survive_cut(cfg: Config, p, s: State, t: State) -> bool:
    """AckedSurvivesCrash after a crash or a recovery step from ``s``, where it held.  Such a step
    only cuts the master's log (keeping a prefix, maybe a torn record after it) and leaves the
    slaves' logs and the SyncStateSet alone, so only the PUT_OK requests whose records were cut
    off can stop surviving: their positions are read, not every request.  A step that is no such
    cut by the lengths and the last kept record is checked whole (and the full check every
    ``full_check_interval()`` steps reads every request)."""
    keep = min(len(t.log), len(s.log))
    if keep and t.log[keep - 1] != s.log[keep - 1]:
        keep -= 1                                   # the torn record in place of a whole one
    if (t.rlog is not s.rlog or t.syncStateSet != s.syncStateSet or len(t.log) > keep + 1
            or (keep and t.log[keep - 1] != s.log[keep - 1]) or len(t.reqs) != len(s.reqs)):
        return p.acked_survives_crash(cfg, t)
    for pos in range(keep, len(s.log)):
        rid = s.log[pos]
        if 0 < rid <= len(t.reqs) and t.reqs[rid - 1].status == "PUT_OK" and not p.survives(cfg, t, rid):
            return False
    return True


def _tail_ordered(log: tuple, before: tuple) -> bool:
    """The records appended to ``before`` keep ``log`` well formed.  Outside crashes and recovery
    the spec's actions only append to a log (their footprint), so only the new tail and the record
    before it are read, in time independent of the log's length; a log that is no extension of
    ``before`` by its length or its last record is read whole, and the full check every
    ``full_check_interval()`` steps reads every log whole anyway."""
    if log is before:
        return True
    n = len(before)
    if len(log) < n or (n and log[n - 1] != before[n - 1]):
        return all(x != TORN for x in log) and all(a < b for a, b in zip(log, log[1:]))
    if len(log) == n + 1:       # one record appended (a put, a transfer): the tail below, with no slice
        last = log[n]
        return last != TORN if not n else (log[n - 1] != TORN and last != TORN and log[n - 1] < last)
    tail = log[max(n - 1, 0):]
    return all(x != TORN for x in tail) and all(a < b for a, b in zip(tail, tail[1:]))


def label_name(label: tuple, requests: SpecRequests) -> str:
    """The TLA+ action name of a label, with its spec parameter."""
    kind = label[0]
    if kind in ("Respond", "Timeout"):
        return f"{kind}({requests.spec_id.get(label[1], '?')})"
    if kind in ("ReplicaConnect", "Transfer", "ReplicaAck", "ReplicaDisconnect", "ReplicaCrash", "ReplicaRestart"):
        return f"{kind}({label[1]})"
    return kind

