"""The refinement mapping: the spec state a Cluster is in, whole or step by step.

Byte watermarks become record counts, producer request ids become spec
request ids (in Put order), and the cluster's fault counters become
``aux_ctrs``.

Two ways to the same mapping:

* ``observe()`` derives the whole spec state from the cluster, from scratch
  (every request ever made, every log whole): the definition, O(run length).
* ``compare(labels, before, shadow)`` checks one event in time independent of
  the run's length.  It keeps the *incremental abstraction*: the spec ids of
  each log (extended as the log grows), the verified prefix of each log, the
  requests the shadow still has waiting, and the answered ones folded into a
  count and a running hash.  An event is compared on what it can have
  touched: every scalar variable, the logs past their verified prefix (whole
  after a step that rewrites them; not at all when neither side of a log
  changed since the two were found equal), and the requests its labels name,
  that the master answered in it, or that are new, and every waiting one
  after a step or a signal (a new master, a release, an abort) that can have
  changed several.  A request answered
  and compared leaves the waiting set for the digest and is not looked at
  again, unless a label names it (BugDoubleResponse answers twice).

``cross_check(observed)`` asserts that the incremental abstraction equals the
one re-derived from ``observe()``; the checker runs it every so many steps
and at the end of a run, so that a gap in the footprints assumed here (which
variables an action can change) cannot hide a difference for long.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter

from reference.refinement import RefinementError
from spec.seq import same_prefix
from spec.state import TORN, WAITING, Counters, Request as SpecRequest, State

UP = "UP"
_REQUEST_STEPS = frozenset({"Put", "Respond", "Timeout", "WriteFail"})
_MASTER_DEATHS = frozenset({"MasterProcessCrash", "MasterMachineCrash"})
_MASTER_LOG_REWRITES = frozenset({"MasterProcessCrash", "MasterMachineCrash", "Recover"})
_RLOG_APPENDS = frozenset({"Transfer", "ReplicaAck"})   # the replica steps that leave a slave's log's prefix alone
_DIGEST_MASK = (1 << 64) - 1
_NONE = frozenset()
# The spec steps that can change requests already put that their label does not name
# (tla/AckOrder.tla): Release, crashes (and, conservatively, WriteFail and Recover).  Respond(i) and
# Timeout(i) change request i only.
_WAITING_STEPS = frozenset({"Flush", "FlushFail", "WriteFail", "MasterProcessCrash", "MasterMachineCrash", "Recover"})


# The scalar variables of the spec state (all but the logs, ``reqs`` and the ghost ones), in the
# order ``Abstraction._scalars`` gives the reference's values.
_FIELDS = ("mstate", "committed", "flushed", "durable", "writable", "unwritten", "landed", "connected", "ack",
           "push2SlaveMaxOffset", "syncStateSet", "rUp", "aux_ctrs")
_shadow_scalars = attrgetter(*_FIELDS)


class AbstractionMismatch(RefinementError):
    """The incremental abstraction differs from the one derived from scratch: a bug of the
    incremental bookkeeping (or of the footprints it assumes), not necessarily of the reference.
    A run reports it as a refinement failure, with this message, so that no campaign misses it."""


def request_hash(i: int, r: SpecRequest) -> int:
    return hash((i, r.off, r.flush_done, r.status)) & _DIGEST_MASK


def answered_digest(reqs) -> tuple[int, int]:
    """(count, running hash) of the answered requests of a spec ``reqs`` sequence."""
    count = total = 0
    for i, r in enumerate(reqs, start=1):
        if r.status != WAITING:
            count += 1
            total = (total + request_hash(i, r)) & _DIGEST_MASK
    return count, total


class Abstraction:
    def __init__(self, cluster) -> None:
        self.c = cluster
        self._ids: dict[str, tuple] = {}          # log -> (its keys object, shrinks seen, spec ids: a list)
        self._verified: dict[str, int] = {}       # log -> how much of it equals the shadow's, as of the last event
        # log -> (the shadow's log, keys, n, the index's shrinks) when the two were last found equal whole
        # (not torn): while all four stay, neither side changed.
        self._unchanged: dict[str, tuple] = {}
        self.waiting: dict[int, SpecRequest] = {}     # spec id -> request, while the shadow's is WAITING
        self.known = 0                            # spec requests compared at least once
        self.answered = 0                         # answered spec requests folded into ``digest``
        self.digest = 0
        self._signal: tuple = ()                  # what waiting requests' abstraction read, as of the last event
        self._sss = frozenset(cluster.replica_names)
        # The spec's order of the slaves, which indexes its per-slave tuples (spec.config.Config sorts the
        # names: r10 comes before r2), not the cluster's; an unchecked cluster has no checker to ask.
        self.names = tuple(sorted(cluster.replica_names))
        assert cluster.checker is None or cluster.checker.cfg.replicas == self.names, \
            (cluster.checker.cfg.replicas, self.names)
        self._counts: tuple = (None, None)        # aux_ctrs' counts and the Counters made of them

    # ------------------------------------------------------------ the scalars and the logs

    def _fields(self) -> dict:
        """Every spec variable but the logs, ``reqs`` and the ghost ones: O(replicas)."""
        return dict(zip(_FIELDS, self._scalars()))

    def _scalars(self) -> tuple:
        """``_fields``' values, in ``_FIELDS`` order (a tuple: one comparison with the shadow's)."""
        c = self.c
        names = self.names
        if c.mstate == UP:
            m, log = c.master, c.master.log
            idx = log.ghost
            # idx.records_upto, inlined: a ghost index never forgets (its base is 0), so every offset is retained.
            assert idx.base == idx.base_records == 0, (idx.base, idx.base_records)
            ends = idx.ends
            committed, flushed = bisect_right(ends, log.committed), bisect_right(ends, log.flushed)
            durable = bisect_right(ends, c.durable_end)
            writable = m.writable
            # What the page cache really holds beside what the master counts (the disk knows):
            # records a failed write left anyway, or (BugFsyncCoversFailedWrite) counted ones missing.
            in_page_cache = bisect_right(ends, c.page_end)
            unwritten = frozenset(range(in_page_cache + 1, committed + 1)) if in_page_cache < committed else _NONE
            landed = in_page_cache - committed if in_page_cache > committed else 0
            conns = m.conns
            connected = tuple([r in conns for r in names])
            ack = tuple([conns[r].ack_records if r in conns else 0 for r in names])
            push2 = m.push2_records
        else:
            d = c.down
            committed, flushed, durable = d["committed"], d["flushed"], d["durable"]
            writable, unwritten, landed = True, _NONE, 0
            connected, ack, push2 = (False,) * len(names), (0,) * len(names), 0
        n = c.counters.get       # (a Counter's [] calls __missing__ for each kind not seen yet)
        counts = (n("process", 0), n("machine", 0), n("replica", 0), n("disconnect", 0), n("fsync", 0), n("write", 0),
                  c.checker.shadow.aux_ctrs.forgedReport)
        if counts != self._counts[0]:        # one Counters per change, not per event
            self._counts = (counts, Counters(*counts))
        replicas = c.replicas
        # A forged report is indistinguishable from a true one at the master, so
        # the implementation cannot count them: that bound comes from the shadow.
        return (c.mstate, committed, flushed, durable, writable, unwritten, landed, connected, ack, push2,
                self._sss, tuple([replicas[r].up for r in names]), self._counts[1])

    def _log_keys(self) -> dict[str, tuple]:
        """Each log as (keys, their index, n, torn): the log is the spec ids of ``keys[:n]``
        (producer ids), then a torn record if ``torn``.  ``keys`` is a ghost index's own array,
        changed in place (appended, cut back: its ``cuts`` say where)."""
        c = self.c
        if c.mstate == UP:
            idx = c.master.log.ghost
            out = {"master": (idx.keys, idx, len(idx.keys), False)}
        else:          # the index as the master left it (never changed while down)
            d = c.down
            out = {"master": (d["index"].keys, d["index"], d["committed"], d["torn"])}
        for r in self.names:
            g = c.replicas[r].core.ghost
            out[r] = (g.keys, g, len(g.keys), False)
        return out

    def _to_ids(self, keys) -> list[int]:
        ids = self.c.checker.requests.spec_id
        return [TORN if k is None else ids.get(k, TORN) for k in keys]

    def _spec_ids(self, who: str, keys, index) -> tuple[list[int], bool]:
        """The spec ids of ``keys`` (one log's), kept in step with it: extended as it grows and
        cut back to where ``index`` cut it (lowering the log's verified prefix); (ids, rebuilt
        from scratch)."""
        old = self._ids.get(who)
        if old is not None and old[0] is keys and old[1] <= index.shrinks:
            seen, ids = old[1], old[2]
            if index.shrinks != seen:
                new = index.shrinks - seen
                low = min(list(index.cuts)[-new:]) if new <= len(index.cuts) else 0
                del ids[low:]
                self._verified[who] = min(self._verified.get(who, 0), low)
                self._ids[who] = (keys, index.shrinks, ids)
            assert len(ids) <= len(keys), (who, len(ids), len(keys))    # every cut was counted
            if len(ids) < len(keys):
                ids += self._to_ids(keys[len(ids):])
            return ids, False
        ids = self._to_ids(keys)
        self._ids[who] = (keys, index.shrinks, ids)
        return ids, True

    # ------------------------------------------------------------ requests

    def _leg_and_status(self, req_id: int) -> tuple[bool, str]:
        """A spec request's ``flush_done`` and ``status``, from the reference's request."""
        c = self.c
        if req_id in c.aborted:
            return c.aborted[req_id], "CLIENT_TIMEOUT"
        req = c.history[req_id]
        if req.status is None:
            return c.master.flush_leg_done(req), WAITING
        return req.flush_done_when_answered, req.status.name

    def _spec_request(self, req_id: int, off: int) -> SpecRequest:
        return SpecRequest(off, *self._leg_and_status(req_id))

    def _touched(self, labels: list[tuple]) -> set[int]:
        """Spec ids of the requests this event can have changed, on the reference's side."""
        c = self.c
        ids = c.checker.requests.spec_id
        touched = {label[1] for label in labels if label[0] in _REQUEST_STEPS}
        if any(label[0] in _MASTER_DEATHS for label in labels):
            touched |= set(c.last_aborted)
        if c.mstate == UP:
            touched |= {req.req_id for req in c.master.requests_read}
            touched |= {req.req_id for req in c.master.waiting if req.status is None}
        return {ids[r] for r in touched if r in ids}

    # ------------------------------------------------------------ the whole state

    def observe(self) -> State:
        """The spec state this cluster is in, derived from scratch (O(run length))."""
        c = self.c
        requests = c.checker.requests
        logs = {who: tuple(self._to_ids(keys[:n])) + ((TORN,) if torn else ())
                for who, (keys, _, n, torn) in self._log_keys().items()}
        reqs = tuple(self._spec_request(r, requests.spec_off[r]) for r in requests.by_spec_id)
        return State(log=logs["master"], reqs=reqs, rlog=tuple(logs[r] for r in self.names),
                     inv_responses=frozenset(), **self._fields())

    # ------------------------------------------------------------ one event

    def compare(self, labels: list[tuple], before: State, shadow: State) -> dict[str, tuple]:
        """The differences between ``shadow`` (the spec state after the event's steps, from
        ``before``) and the reference, as {variable: (spec, reference)}, looking only at what
        the event can have touched; updates the incremental abstraction."""
        diffs = {}
        ref, spec = self._scalars(), _shadow_scalars(shadow)
        if ref != spec:
            diffs.update((name, (a, b)) for name, a, b in zip(_FIELDS, spec, ref) if a != b)
        self._compare_logs(labels, before, shadow, diffs)
        self._compare_requests(labels, before, shadow, diffs)
        return diffs

    def _compare_logs(self, labels: list[tuple], before: State, shadow: State, diffs: dict) -> None:
        c = self.c
        rewritten = _NONE
        for label in labels:
            kind = label[0]
            if kind in _MASTER_LOG_REWRITES:
                rewritten = rewritten | {"master"}
            elif kind not in _RLOG_APPENDS and len(label) > 1 and label[1] in c.replicas:
                rewritten = rewritten | {label[1]}
        if c.mstate == UP:
            idx = c.master.log.ghost
            self._compare_log("master", idx.keys, idx, len(idx.keys), False, shadow.log, before.log,
                              rewritten, diffs)
        else:          # the index as the master left it (never changed while down)
            d = c.down
            self._compare_log("master", d["index"].keys, d["index"], d["committed"], d["torn"], shadow.log,
                              before.log, rewritten, diffs)
        for k, r in enumerate(self.names):
            g = c.replicas[r].core.ghost
            self._compare_log(r, g.keys, g, len(g.keys), False, shadow.rlog[k], before.rlog[k], rewritten, diffs)

    def _compare_log(self, who: str, keys, index, n: int, torn: bool, spec, old, rewritten, diffs: dict) -> None:
        """One log (``_log_keys``' entry for ``who``) against the shadow's ``spec``, from ``old``
        (the shadow's before the event), past its verified prefix."""
        last = self._unchanged.get(who)
        if last is not None and last[0] is spec and last[1] is keys and last[2] == n and last[3] == index.shrinks:
            return      # neither side changed since both were found equal whole
        ids, rebuilt = self._spec_ids(who, keys, index)
        start = 0 if rebuilt else min(self._verified.get(who, 0), n, len(spec))
        if start and who in rewritten:
            # A step that may rewrite this log: its verified prefix stands if the spec's log
            # kept it (a crash or a recovery keeps a prefix; checked, by shared chunks).
            if not same_prefix(old, spec, start):
                start = 0
        if start == n == len(spec) and not torn:
            self._unchanged[who] = (spec, keys, n, index.shrinks)
            return                      # nothing past the verified prefix on either side
        if len(spec) != n + torn or tuple(ids[start:n]) + ((TORN,) if torn else ()) != spec[start:]:
            self._verified[who] = 0
            self._unchanged.pop(who, None)
            diffs["log" if who == "master" else f"rlog[{who}]"] = (
                spec, tuple(ids[:n]) + ((TORN,) if torn else ()))
        else:
            self._verified[who] = n
            if torn:
                self._unchanged.pop(who, None)
            else:
                self._unchanged[who] = (spec, keys, n, index.shrinks)

    def _compare_requests(self, labels: list[tuple], before: State, shadow: State, diffs: dict) -> None:
        requests = self.c.checker.requests
        by_spec_id, spec_off = requests.by_spec_id, requests.spec_off
        registered = len(by_spec_id)
        if len(shadow.reqs) != registered:
            diffs["reqs"] = (f"{len(shadow.reqs)} requests", f"{registered} requests")
            return
        c = self.c
        spec_id = requests.spec_id
        signal = (c.incarnation, c.mstate, c.master.released_upto, len(c.aborted))
        if signal != self._signal or any(label[0] in _WAITING_STEPS for label in labels):
            self._signal = signal
            ids = self._touched(labels)
            ids.update(self.waiting)
        elif labels or c.responded or registered > self.known:
            # No waiting request can have changed but those named, on either side.
            ids = {spec_id[label[1]] for label in labels if label[0] in _REQUEST_STEPS and label[1] in spec_id}
            ids.update(spec_id[r] for r in c.responded if r in spec_id)
        else:
            return      # nothing named, answered or put, and no signal moved: no request changed
        if registered > self.known:
            ids.update(range(self.known + 1, registered + 1))
        reqs, waiting = shadow.reqs, self.waiting
        for i in sorted(ids):
            spec, req_id = reqs[i - 1], by_spec_id[i - 1]
            flush_done, status = self._leg_and_status(req_id)
            if spec.status != status or spec.flush_done != flush_done or spec.off != spec_off[req_id]:
                diffs[f"reqs[{i}]"] = (spec, SpecRequest(spec_off[req_id], flush_done, status))
                continue
            if status == WAITING:
                waiting[i] = spec
                continue
            if i in waiting:
                del waiting[i]
            elif i <= self.known:     # answered before, and again (a second response): out of the digest first
                self.digest = (self.digest - request_hash(i, before.reqs[i - 1])) & _DIGEST_MASK
                self.answered -= 1
            self.digest = (self.digest + request_hash(i, spec)) & _DIGEST_MASK
            self.answered += 1
        self.known = registered

    # ------------------------------------------------------------ the cross-check

    def cross_check(self, observed: State) -> None:
        """Assert that the incremental abstraction equals the one derived from ``observed``
        (``observe()``'s result): the logs' spec ids, the waiting requests, the digest."""
        problems = []
        logs = {"master": observed.log, **dict(zip(self.names, observed.rlog))}
        for who, (keys, index, n, torn) in self._log_keys().items():
            ids, _ = self._spec_ids(who, keys, index)
            if tuple(ids[:n]) + ((TORN,) if torn else ()) != logs[who]:
                problems.append(f"{who}'s log: incremental {ids[:n]!r}, derived {logs[who]!r}")
        waiting = {i: r for i, r in enumerate(observed.reqs, start=1) if r.status == WAITING}
        if waiting != self.waiting:
            problems.append(f"waiting requests: incremental {self.waiting!r}, derived {waiting!r}")
        if (self.answered, self.digest) != answered_digest(observed.reqs) or self.known != len(observed.reqs):
            problems.append(f"answered requests: incremental {self.answered} (digest {self.digest:#x}) of "
                            f"{self.known}, derived {answered_digest(observed.reqs)} of {len(observed.reqs)}")
        if problems:
            raise AbstractionMismatch("the incremental abstraction differs from the derived one:\n  "
                                      + "\n  ".join(problems))
