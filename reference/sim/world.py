"""The deterministic simulated runtime: the reference cores on a virtual
clock, with a simulated disk, network, producers and faults, all driven by
one seed (FoundationDB-style).  One seed gives one run, byte for byte.

After every event the world maps its state to the spec's (``observe``) and
the refinement checker replays the spec steps the cores reported; the first
illegal step, state difference or invariant violation stops the run.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import random
from collections import Counter

import attrs

from reference import effects as fx
from reference.commitlog import CommitLog
from reference.frames import Ack, Data, Handshake
from reference.master import MasterCore
from reference.record import recover_log
from reference.refinement import PropertyViolation, RefinementChecker, RefinementError, spec_config
from reference.replica import ReplicaCore
from reference.sim.disk import SimDisk
from reference.sim.params import SimParams
from reference.status import PutStatus
from spec.state import TORN, Counters, Request as SpecRequest, State

UP, PROC_DOWN, MACHINE_DOWN = "UP", "PROC_DOWN", "MACHINE_DOWN"
MAX_QUEUED_EVENTS = 1_000_000


@attrs.define
class ReplicaNode:
    name: str
    core: ReplicaCore
    disk: SimDisk
    up: bool = True
    conn: int | None = None       # current connection id (pending or accepted)


@attrs.define
class Outcome:
    """How a run ended."""
    seed: int
    steps: int                  # events processed
    spec_steps: int             # spec actions the refinement check replayed
    sim_ms: int
    violation: str | None       # property name, "refinement", or None
    message: str | None
    trace_hash: str
    statuses: dict[str, int]
    actions: dict[str, int]     # spec action -> count (coverage)

    @property
    def ok(self) -> bool:
        return self.violation is None


class World:
    def __init__(self, params: SimParams, check: bool = True, trace=None) -> None:
        self.p = params
        self.cfg = params.store
        self.rng = random.Random(f"ackorder-sim-run-{params.seed}")
        self.now = 0
        self._queue: list = []
        self._seq = 0
        seg = self.cfg.mapped_file_size_commit_log
        self.mstate = UP
        self.incarnation = 0
        self.master_disk = SimDisk(seg)
        self.master = MasterCore(self.cfg, params.replicas, 0)
        self.down: dict | None = None            # what a dead master left (spec values)
        self.replicas = {r: ReplicaNode(r, ReplicaCore(r, seg), SimDisk(seg)) for r in params.replicas}
        self._conn_ids = 0
        self._link_clock: dict[tuple[int, str], int] = {}   # FIFO links: last delivery time per direction
        self._tick_at: int | None = None
        self.next_req = 1
        self.responses: dict[int, list[int]] = {}
        self.aborted: dict[int, bool] = {}       # request -> flush leg done when the master died
        self.history: dict[int, object] = {}     # requests of dead master incarnations
        self.counters = Counter()
        self.action_counts: Counter = Counter()
        self.events = 0
        self._hash = hashlib.sha256()
        self.trace = trace
        self.checker = RefinementChecker(spec_config(self.cfg, params.replicas)) if check else None
        self.calm = False                        # the liveness phase: no faults, no new puts
        self._schedule(0, "put")
        for name in params.replicas:
            self._schedule(self._delay((0, 5)), "connect", name)
        for kind, rate in self._fault_rates().items():
            if rate > 0:
                self._schedule(self._exp(rate), kind)

    # ------------------------------------------------------------ scheduling

    def _schedule(self, delay_ms: int, kind: str, *payload) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.now + delay_ms, self._seq, kind, payload))
        assert len(self._queue) < MAX_QUEUED_EVENTS, "event queue unbounded"

    def _delay(self, bounds: tuple[int, int]) -> int:
        return self.rng.randint(*bounds)

    def _send(self, conn: int, direction: str, name: str, frame) -> None:
        """TCP-like: each direction of a connection delivers in order."""
        at = max(self.now + self._delay(self.p.faults.net_delay_ms), self._link_clock.get((conn, direction), 0))
        self._link_clock[(conn, direction)] = at
        self._schedule(at - self.now, direction, conn, name, frame)

    def _exp(self, per_s: float) -> int:
        return max(1, int(self.rng.expovariate(per_s) * 1000))

    def _fault_rates(self) -> dict[str, float]:
        f = self.p.faults
        return {"master_process_crash": f.master_process_crash_per_s,
                "master_machine_crash": f.master_machine_crash_per_s,
                "replica_crash": f.replica_crash_per_s,
                "replica_disconnect": f.replica_disconnect_per_s}

    def _schedule_tick(self) -> None:
        if self.mstate != UP:
            return
        at = self.master.next_wakeup_ms(self.now)
        if self._tick_at is None or at < self._tick_at or self._tick_at < self.now:
            self._tick_at = at
            self._seq += 1
            heapq.heappush(self._queue, (at, self._seq, "tick", (self.incarnation,)))

    # ------------------------------------------------------------ the run

    def run(self, steps: int, liveness: bool = True) -> Outcome:
        """``steps`` events with faults, then (TigerBeetle-style) a liveness
        phase: faults and new puts stop, the system heals, and every request
        still waiting must be answered within a bounded virtual time."""
        violation = message = None
        try:
            while self._queue and self.events < steps:
                self._process_next()
            if liveness:
                self._liveness_phase()
            if self.checker is not None:
                self.checker.finish()
        except PropertyViolation as err:
            violation, message = err.prop, str(err)
        except RefinementError as err:
            violation, message = "refinement", str(err)
        return Outcome(
            seed=self.p.seed, steps=self.events,
            spec_steps=self.checker.steps_checked if self.checker else 0, sim_ms=self.now,
            violation=violation, message=message, trace_hash=self._hash.hexdigest(),
            statuses=dict(sorted(Counter(PutStatus(v[-1]).name for v in self.responses.values()).items())),
            actions=dict(sorted(self.action_counts.items())),
        )

    def _process_next(self) -> None:
        at, _, kind, payload = heapq.heappop(self._queue)
        self.now = max(self.now, at)
        self.events += 1
        getattr(self, "_on_" + kind)(*payload)

    def _waiting(self) -> list[int]:
        if self.mstate != UP:
            return []
        return [r.req_id for r in self.master.requests.values() if r.status is None]

    def _liveness_phase(self) -> None:
        self.calm = True
        f, c = self.p.faults, self.cfg
        budget = 3 * max(c.sync_flush_timeout_ms, c.slave_timeout_ms) + 4 * f.restart_delay_ms[1] + 1000
        until = self.now + budget
        while self._queue and self.now <= until and (self.mstate != UP or self._waiting()):
            self._process_next()
        if waiting := self._waiting():
            ids = [self.checker.requests.spec_id.get(r, r) for r in waiting[:5]] if self.checker else waiting[:5]
            raise PropertyViolation(
                "EveryRequestAnswered",
                f"liveness: {len(waiting)} request(s) still waiting {budget} ms after faults stopped "
                f"(spec ids {ids}); the master is {self.mstate}, writable={self.master.writable}")

    def _finish_event(self, what: str, env_labels: list[tuple] = ()) -> None:
        """Perform the cores' effects, then check the step against the spec."""
        labels = list(env_labels)
        self._drain()
        labels += self.master.spec_steps
        self.master.spec_steps = []
        for node in self.replicas.values():
            labels += node.core.spec_steps
            node.core.spec_steps = []
        self._hash.update(f"{self.now}|{what}|{labels}\n".encode())
        for label in labels:
            self.action_counts[label[0]] += 1
            if label[0] == "FlushFail":
                self.counters["fsync"] += 1
        if self.checker is not None:
            before = self.checker.shadow
            self._labels = labels
            taken = self.checker.step(labels, self.observe, f"t={self.now}ms {what}")
            if self.trace is not None:
                for name, state in taken:
                    self.trace.write(json.dumps({"t_ms": self.now, "action": name,
                                                 "changed": changed_fields(before, state)}) + "\n")
                    before = state
        elif self.trace is not None and labels:
            self.trace.write(json.dumps({"t_ms": self.now, "event": what, "labels": labels}) + "\n")
        self._schedule_tick()

    # ------------------------------------------------------------ effects

    def _drain(self) -> None:
        for _ in range(1000):
            pending = self.master.take_effects() if self.mstate == UP else []
            for node in self.replicas.values():
                pending += [(node, e) for e in node.core.take_effects()]
            if not pending:
                return
            for item in pending:
                if isinstance(item, tuple):
                    self._replica_effect(*item)
                else:
                    self._master_effect(item)
        raise AssertionError("effects did not settle in 1000 rounds")

    def _master_effect(self, e) -> None:
        disk = self.master_disk
        if isinstance(e, fx.CreateSegment):
            disk.create(e.start)
        elif isinstance(e, fx.WriteData):
            disk.write(e.start, e.position, e.data)
        elif isinstance(e, fx.ZeroTail):
            disk.zero_tail(e.start, e.position)
        elif isinstance(e, fx.Fsync):
            fail = not self.calm and self.rng.random() < self.p.faults.fsync_failure_probability
            self._schedule(self._delay(self.p.faults.fsync_latency_ms), "fsync",
                           self.incarnation, e.start, e.upto, fail)
        elif isinstance(e, fx.SendData):
            node = self.replicas[e.replica]
            if node.conn is not None:
                self._send(node.conn, "to_replica", e.replica, Data(e.offset, e.data))
        elif isinstance(e, fx.CloseReplica):
            self._close(e.replica, label=None)
        elif isinstance(e, fx.Respond):
            self.responses.setdefault(e.req_id, []).append(e.status)
        else:
            raise AssertionError(f"unknown master effect {e!r}")

    def _replica_effect(self, node: ReplicaNode, e) -> None:
        if isinstance(e, fx.CreateSegment):
            node.disk.create(e.start)
        elif isinstance(e, fx.WriteData):
            node.disk.write(e.start, e.position, e.data)
        elif isinstance(e, fx.ZeroTail):
            node.disk.zero_tail(e.start, e.position)
        elif isinstance(e, (fx.SendAck, fx.SendHandshake)):
            if node.conn is not None:
                frame = (Ack(e.offset) if isinstance(e, fx.SendAck)
                         else Handshake(e.offset, e.chain, node.name, e.records))
                self._send(node.conn, "to_master", node.name, frame)
        elif isinstance(e, fx.CloseMaster):
            self._close(node.name, label=("ReplicaDisconnect", node.name))
        else:
            raise AssertionError(f"unknown replica effect {e!r}")

    def _close(self, name: str, label: tuple | None, env: list | None = None) -> None:
        """Close a slave's connection; ``label`` is recorded only if the master counted it."""
        node = self.replicas[name]
        if node.conn is None:
            return
        self._link_clock.pop((node.conn, "to_master"), None)
        self._link_clock.pop((node.conn, "to_replica"), None)
        node.conn = None
        node.core.disconnected()
        if self.mstate == UP and name in self.master.conns:
            self.master.replica_disconnected(name)
            if label is not None:
                self.master.spec_steps.append(label)
                if label[0] == "ReplicaDisconnect":
                    self.counters["disconnect"] += 1
        if node.up:
            self._schedule(self._delay((2, 20)), "connect", name)

    # ------------------------------------------------------------ events

    def _on_put(self) -> None:
        if self.calm:
            return self._finish_event("no put: calm")
        if self.mstate == UP:
            req = self.next_req
            self.next_req += 1
            size = self.rng.randint(*self.p.faults.body_size)
            body = self.rng.randbytes(size)
            self.master.put(req, req, body, self.now)
        self._schedule(self._delay(self.p.faults.put_interval_ms), "put")
        self._finish_event("put")

    def _on_tick(self, incarnation: int) -> None:
        self._tick_at = None
        if self.mstate == UP and incarnation == self.incarnation:
            self.master.tick(self.now)
        self._finish_event("tick")

    def _on_fsync(self, incarnation: int, start: int, upto: int, fail: bool) -> None:
        if self.mstate == UP and incarnation == self.incarnation:
            if fail:
                self.master.fsync_failed(start, upto, self.now)
            else:
                self.master_disk.fsync_to(upto)
                self.master.fsync_done(start, upto, self.now)
        self._finish_event("fsync failed" if fail else "fsync done")

    def _on_connect(self, name: str) -> None:
        """HAClient.connectMaster; it retries while the master is away."""
        node = self.replicas[name]
        if not node.up or node.conn is not None:
            return self._finish_event(f"{name}: no connect needed")
        if self.mstate != UP:
            self._schedule(self._delay((5, 30)), "connect", name)
            return self._finish_event(f"{name}: master unreachable")
        self._conn_ids += 1
        node.conn = self._conn_ids
        node.core.connect()
        self._finish_event(f"{name} connects")

    def _on_to_master(self, conn: int, name: str, frame) -> None:
        node = self.replicas[name]
        if self.mstate == UP and node.conn == conn:
            if isinstance(frame, Handshake):
                self.master.replica_handshake(name, frame.offset, frame.chain, self.now, frame.records)
            else:
                self.master.replica_ack(name, frame.offset, self.now)
        self._finish_event(f"{name} -> master {type(frame).__name__}")

    def _on_to_replica(self, conn: int, name: str, frame: Data) -> None:
        node = self.replicas[name]
        if node.up and node.conn == conn:
            node.core.on_data(frame.offset, frame.data)
        self._finish_event(f"master -> {name} DATA")

    # --- faults

    def _kill_master(self) -> None:
        """The master process is gone: its waiting producers time out on their
        side, its memory (write buffer, acks, pending effects) is lost."""
        for req in self.master.requests.values():
            if req.status is None:
                self.aborted[req.req_id] = (not self.cfg.sync_flush) or req.next_offset <= self.master.released_upto
        self.history.update(self.master.requests)
        self.master.effects.clear()

    def _master_gone(self) -> None:
        for name in list(self.replicas):
            node = self.replicas[name]
            if node.conn is not None:
                node.conn = None
                node.core.disconnected()
            if node.up:
                self._schedule(self._delay((5, 30)), "connect", name)
        self._schedule(self._delay(self.p.faults.restart_delay_ms), "master_restart", self.incarnation)

    def _on_master_process_crash(self) -> None:
        if self.calm:
            return self._finish_event("no fault: calm")
        self._schedule(self._exp(self.p.faults.master_process_crash_per_s), "master_process_crash")
        if self.mstate != UP:
            return self._finish_event("no crash: master down")
        self.counters["process"] += 1
        log, idx = self.master.log, self.master.log.index
        self._kill_master()
        self.down = {
            "log": idx.keys[: idx.records_upto(log.committed)],
            "committed": idx.records_upto(log.committed), "flushed": idx.records_upto(log.flushed),
            "durable": idx.records_upto(self.master_disk.durable_end), "index": idx,
        }
        self.mstate = PROC_DOWN
        self.incarnation += 1
        self._master_gone()
        self._finish_event("master process crash", [("MasterProcessCrash",)])

    def _on_master_machine_crash(self) -> None:
        if self.calm:
            return self._finish_event("no fault: calm")
        self._schedule(self._exp(self.p.faults.master_machine_crash_per_s), "master_machine_crash")
        if self.mstate == MACHINE_DOWN:
            return self._finish_event("no crash: master machine down")
        self.counters["machine"] += 1
        if self.mstate == UP:
            idx = self.master.log.index
            self._kill_master()
        else:
            idx = self.down["index"]
        disk = self.master_disk
        low, high = disk.durable_end, disk.page_end
        bounds = [low, high] + [e for e in idx.ends if low < e < high]
        cut = self.rng.choice(bounds) if self.rng.random() < 0.5 else self.rng.randint(low, high)
        keep = idx.records_upto(cut)
        torn = keep < len(idx.ends) and idx.starts[keep] < cut < idx.ends[keep] <= high
        disk.machine_crash(cut)
        self.down = {"log": idx.keys[:keep] + ([None] if torn else []), "committed": keep,
                     "flushed": keep, "durable": keep, "index": idx}
        self.mstate = MACHINE_DOWN
        self.incarnation += 1
        self._master_gone()
        self._finish_event(f"master machine crash (cut at {cut})", [("MasterMachineCrash", keep, torn)])

    def _on_master_restart(self, incarnation: int) -> None:
        if self.mstate == UP or incarnation != self.incarnation:
            return self._finish_event("no restart")
        disk = self.master_disk
        snapshot = disk.snapshot()
        report = recover_log(snapshot, disk.segment_size, keep_torn=self.cfg.bug("BugRecoveryKeepsTorn"))
        disk.recovered_to(report.end_offset)
        log = CommitLog.recovered(disk.segment_size, self.cfg.transient_store_pool_enable, report, snapshot)
        self.master = MasterCore(self.cfg, self.p.replicas, self.now, log=log)
        self.mstate, self.down = UP, None
        self._finish_event(f"master restarts ({len(report.records)} records, {len(report.dropped)} dropped)",
                           [("Recover",)])

    def _on_replica_crash(self) -> None:
        if self.calm:
            return self._finish_event("no fault: calm")
        self._schedule(self._exp(self.p.faults.replica_crash_per_s), "replica_crash")
        up = [n for n in self.replicas.values() if n.up]
        if not up:
            return self._finish_event("no replica crash: all down")
        node = self.rng.choice(up)
        self.counters["replica"] += 1
        node.up = False
        node.core.effects.clear()
        labels = [("ReplicaCrash", node.name)]
        self._close(node.name, label=None)
        self._schedule(self._delay(self.p.faults.restart_delay_ms), "replica_restart", node.name)
        self._finish_event(f"{node.name} crashes", labels)

    def _on_replica_restart(self, name: str) -> None:
        node = self.replicas[name]
        snapshot = node.disk.snapshot()
        report = recover_log(snapshot, node.disk.segment_size)
        node.disk.recovered_to(report.end_offset)
        node.core = ReplicaCore.recovered(name, node.disk.segment_size, report, snapshot)
        node.up = True
        self._schedule(self._delay((1, 10)), "connect", name)
        self._finish_event(f"{name} restarts", [("ReplicaRestart", name)])

    def _on_replica_disconnect(self) -> None:
        if self.calm:
            return self._finish_event("no fault: calm")
        self._schedule(self._exp(self.p.faults.replica_disconnect_per_s), "replica_disconnect")
        linked = [n for n in self.replicas.values() if n.conn is not None]
        if not linked:
            return self._finish_event("no disconnect: no connection")
        node = self.rng.choice(linked)
        counted = self.mstate == UP and node.name in self.master.conns
        self._close(node.name, label=("ReplicaDisconnect", node.name) if counted else None)
        self._finish_event(f"{node.name} disconnected")

    # ------------------------------------------------------------ abstraction

    def observe(self) -> State:
        """The spec state this world is in (the refinement mapping).

        Built incrementally: a spec request is recomputed only when this
        event touched it or it is still waiting, and when it equals the
        shadow's it *is* the shadow's object, so comparing the two states is
        an identity scan over the untouched part."""
        ids = self.checker.requests.spec_id

        def to_ids(keys):
            return tuple(TORN if k is None else ids.get(k, TORN) for k in keys)

        names = self.p.replicas
        if self.mstate == UP:
            m, log = self.master, self.master.log
            idx = log.index
            mlog = self._cached_ids("master", idx.keys, to_ids)
            committed, flushed = idx.records_upto(log.committed), idx.records_upto(log.flushed)
            durable = idx.records_upto(self.master_disk.durable_end)
            writable = m.writable
            connected = tuple(r in m.conns for r in names)
            ack = tuple(idx.records_upto(m.conns[r].ack) if r in m.conns else 0 for r in names)
            push2 = idx.records_upto(m.push2SlaveMaxOffset)
        else:
            d = self.down
            mlog = to_ids(d["log"])
            committed, flushed, durable = d["committed"], d["flushed"], d["durable"]
            writable, connected, ack, push2 = True, (False,) * len(names), (0,) * len(names), 0
        c = self.counters
        return State(
            mstate=self.mstate, log=mlog, committed=committed, flushed=flushed, durable=durable,
            writable=writable, reqs=self._observed_requests(), connected=connected, ack=ack,
            push2SlaveMaxOffset=push2, syncStateSet=frozenset(names),
            rlog=tuple(self._cached_ids(r, self.replicas[r].core.index.keys, to_ids) for r in names),
            rUp=tuple(self.replicas[r].up for r in names), inv_responses=frozenset(),
            aux_ctrs=Counters(masterProcessCrash=c["process"], masterMachineCrash=c["machine"],
                              replicaCrash=c["replica"], replicaDisconnect=c["disconnect"],
                              fsyncFailure=c["fsync"]),
        )

    def _cached_ids(self, who: str, keys: list[int], to_ids) -> tuple:
        """Spec ids of a log's keys, extended as the log grows (rebuilt if it shrank)."""
        cache = self.__dict__.setdefault("_ids_cache", {})
        old_keys, old_ids = cache.get(who, (None, ()))
        if old_keys is keys and len(old_ids) <= len(keys):
            ids = old_ids + to_ids(keys[len(old_ids):]) if len(old_ids) < len(keys) else old_ids
        else:
            ids = to_ids(keys)
        cache[who] = (keys, ids)
        return ids

    def _observed_requests(self) -> tuple:
        requests = self.checker.requests
        obs = self.__dict__.setdefault("_obs_reqs", [])
        shadow = self.checker.shadow.reqs
        touched = {label[1] for label in self._labels if label[0] in ("Put", "Respond", "Timeout")}
        if any(label[0] in ("MasterProcessCrash", "MasterMachineCrash") for label in self._labels):
            touched |= set(self.aborted)
        if self.mstate == UP:
            touched |= {req.req_id for req in self.master.requests_read}
            touched |= {req.req_id for req in self.master.waiting if req.status is None}
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
        if req_id in self.aborted:
            return SpecRequest(off, self.aborted[req_id], "CLIENT_TIMEOUT")
        req = self._find_request(req_id)
        if req.status is None:
            done = (not self.cfg.sync_flush) or req.next_offset <= self.master.released_upto
            return SpecRequest(off, done, "WAITING")
        return SpecRequest(off, req.flush_done_when_answered, req.status.name)

    def _find_request(self, req_id: int):
        req = self.master.requests.get(req_id) if self.mstate == UP else None
        return req if req is not None else self.history[req_id]


def changed_fields(before: State, after: State) -> dict:
    """What a spec step changed: whole scalars, and only the changed or
    appended elements of sequences and sets (traces stay linear in length)."""
    out = {}
    for f in attrs.fields(State):
        a, b = getattr(before, f.name), getattr(after, f.name)
        if a is b or a == b:
            continue
        if isinstance(a, tuple) and isinstance(b, tuple) and f.name in ("log", "reqs", "rlog"):
            if len(b) >= len(a) and b[: len(a)] == a:
                out[f.name] = {"append": to_json(b[len(a):])}
            elif len(a) == len(b):
                out[f.name] = {str(i): to_json(y) for i, (x, y) in enumerate(zip(a, b), 1) if x != y}
            else:
                out[f.name] = to_json(b)
        elif isinstance(a, frozenset) and isinstance(b, frozenset):
            out[f.name] = {"add": to_json(b - a), "remove": to_json(a - b)}
        else:
            out[f.name] = to_json(b)
    return out


def to_json(v):
    if attrs.has(type(v)):
        return {f.name: to_json(getattr(v, f.name)) for f in attrs.fields(type(v))}
    if isinstance(v, (tuple, list)):
        return [to_json(x) for x in v]
    if isinstance(v, frozenset):
        return sorted((to_json(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
    return v
