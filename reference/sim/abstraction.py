"""The refinement mapping: the spec state a Cluster is in.

Byte watermarks become record counts, producer request ids become spec
request ids (in Put order), and the cluster's fault counters become
``aux_ctrs``.  Built incrementally: a spec request is recomputed only when
the step touched it or it is still waiting, and when it equals the shadow's
it *is* the shadow's object, so comparing the two states is an identity scan
over the untouched part.
"""

from __future__ import annotations

from spec.state import TORN, Counters, Request as SpecRequest, State

UP = "UP"
_REQUEST_STEPS = frozenset({"Put", "Respond", "Timeout", "WriteFail"})
_MASTER_DEATHS = frozenset({"MasterProcessCrash", "MasterMachineCrash"})


class Abstraction:
    def __init__(self, cluster) -> None:
        self.c = cluster
        self._reqs: list[SpecRequest] = []
        self._ids_cache: dict = {}

    def observe(self, labels: list[tuple]) -> State:
        """The spec state after a step that performed ``labels``."""
        c = self.c
        ids = c.checker.requests.spec_id

        def to_ids(keys):
            return tuple(TORN if k is None else ids.get(k, TORN) for k in keys)

        names = c.replica_names
        if c.mstate == UP:
            m, log = c.master, c.master.log
            idx = log.ghost
            mlog = self._cached_ids("master", idx.keys, to_ids)
            committed, flushed = idx.records_upto(log.committed), idx.records_upto(log.flushed)
            durable = idx.records_upto(c.durable_end)
            writable = m.writable
            # What the page cache really holds beside what the master counts (the disk knows):
            # records a failed write left anyway, or (BugFsyncCoversFailedWrite) counted ones missing.
            in_page_cache = idx.records_upto(c.page_end)
            unwritten = frozenset(range(in_page_cache + 1, committed + 1))
            landed = max(0, in_page_cache - committed)
            connected = tuple(r in m.conns for r in names)
            ack = tuple(m.conns[r].ack_records if r in m.conns else 0 for r in names)
            push2 = m.push2_records
        else:
            d = c.down
            mlog = to_ids(d["log"])
            committed, flushed, durable = d["committed"], d["flushed"], d["durable"]
            writable, unwritten, landed = True, frozenset(), 0
            connected, ack, push2 = (False,) * len(names), (0,) * len(names), 0
        n = c.counters
        return State(
            mstate=c.mstate, log=mlog, committed=committed, flushed=flushed, durable=durable,
            writable=writable, unwritten=unwritten, landed=landed, reqs=self._observed_requests(labels), connected=connected,
            ack=ack, push2SlaveMaxOffset=push2, syncStateSet=frozenset(names),
            rlog=tuple(self._cached_ids(r, c.replicas[r].core.ghost.keys, to_ids) for r in names),
            rUp=tuple(c.replicas[r].up for r in names), inv_responses=frozenset(),
            # A forged report is indistinguishable from a true one at the master, so
            # the implementation cannot count them: that bound comes from the shadow.
            aux_ctrs=Counters(masterProcessCrash=n["process"], masterMachineCrash=n["machine"],
                              replicaCrash=n["replica"], replicaDisconnect=n["disconnect"],
                              fsyncFailure=n["fsync"], writeFailure=n["write"],
                              forgedReport=c.checker.shadow.aux_ctrs.forgedReport),
        )

    def _cached_ids(self, who: str, keys: list[int], to_ids) -> tuple:
        """Spec ids of a log's keys, extended as the log grows (rebuilt if it shrank)."""
        old_keys, old_ids = self._ids_cache.get(who, (None, ()))
        if old_keys is keys and len(old_ids) <= len(keys):
            ids = old_ids + to_ids(keys[len(old_ids):]) if len(old_ids) < len(keys) else old_ids
        else:
            ids = to_ids(keys)
        self._ids_cache[who] = (keys, ids)
        return ids

    def _observed_requests(self, labels: list[tuple]) -> tuple:
        c = self.c
        requests = c.checker.requests
        obs = self._reqs
        shadow = c.checker.shadow.reqs
        touched = {label[1] for label in labels if label[0] in _REQUEST_STEPS}
        if any(label[0] in _MASTER_DEATHS for label in labels):
            touched |= set(c.aborted)
        if c.mstate == UP:
            touched |= {req.req_id for req in c.master.requests_read}
            touched |= {req.req_id for req in c.master.waiting if req.status is None}
        for req_id in touched:
            i = requests.spec_id.get(req_id)
            if i is None:
                continue
            fresh = self._spec_request(req_id, requests.spec_off[req_id])
            if i - 1 < len(shadow) and shadow[i - 1] == fresh:
                fresh = shadow[i - 1]
            if i - 1 == len(obs):
                obs.append(fresh)
            else:
                obs[i - 1] = fresh
        return tuple(obs)

    def _spec_request(self, req_id: int, off: int) -> SpecRequest:
        c = self.c
        if req_id in c.aborted:
            return SpecRequest(off, c.aborted[req_id], "CLIENT_TIMEOUT")
        req = c.history[req_id]
        if req.status is None:
            return SpecRequest(off, c.master.flush_leg_done(req), "WAITING")
        return SpecRequest(off, req.flush_done_when_answered, req.status.name)
