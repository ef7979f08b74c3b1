"""A master and its slaves, driven one step at a time.

The cluster owns the cores, their disks, the links between them and the
producers' view; each public method is one step of the environment (a put,
a timer, an fsync completing, a frame delivered, a crash...).  It performs
the cores' effects, then maps its state to the spec's (``observe``) and has
the refinement checker replay the spec steps the cores reported.

Two drivers use it: the seeded simulator (reference/sim/world.py), which
decides what happens when from a random generator, and the Hypothesis
state machines (stateful_tests/), which let Hypothesis decide.  Disks are
pluggable: a simulated page cache, or real files with fdatasync.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, deque
from collections.abc import Callable

import attrs

from reference import effects as fx
from reference.commitlog import CommitLog
from reference.config import StoreConfig
from reference.frames import Ack, Data, Handshake
from reference.master import MasterCore
from reference.record import recover_log
from reference.refinement import PropertyViolation, RefinementChecker, spec_config
from reference.replica import ReplicaCore
from reference.status import PutStatus
from spec.state import TORN, Counters, Request as SpecRequest, State

UP, PROC_DOWN, MACHINE_DOWN = "UP", "PROC_DOWN", "MACHINE_DOWN"
TO_MASTER, TO_REPLICA = "to_master", "to_replica"
MAX_LINK_FRAMES = 100_000
RECENT_ACTIONS = 16               # spec actions kept to describe how a run failed


@attrs.define
class ReplicaNode:
    name: str
    core: ReplicaCore
    disk: object
    up: bool = True
    conn: int | None = None       # current connection id (pending or accepted)


@attrs.define
class Link:
    """One direction of one connection: frames in flight, delivered in order."""
    conn: int
    direction: str
    name: str
    frames: deque = attrs.Factory(deque)


class Cluster:
    def __init__(self, cfg: StoreConfig, replicas: tuple[str, ...], disk_factory: Callable[[str, int], object],
                 check: bool = True, trace=None) -> None:
        self.cfg = cfg
        self.replica_names = tuple(replicas)
        self.disk_factory = disk_factory
        seg = cfg.mapped_file_size_commit_log
        self.now = 0
        self.mstate = UP
        self.incarnation = 0
        self.master_disk = disk_factory("master", seg)
        self.master = MasterCore(cfg, replicas, 0)
        self.durable_end = 0          # bytes of the master's log known fsync'd
        self.page_end = 0             # bytes of the master's log in the page cache
        self.down: dict | None = None
        self.replicas = {r: ReplicaNode(r, ReplicaCore(r, seg), disk_factory(r, seg)) for r in replicas}
        self.links: dict[tuple[int, str], Link] = {}
        self._conn_ids = 0
        self.pending_fsync: fx.Fsync | None = None
        self.recent_actions: deque[str] = deque(maxlen=RECENT_ACTIONS)   # for deduplicating failures
        self.fsync_from = 0
        self.fsync_incarnation = -1
        self.next_req = 1
        self.responses: dict[int, list[int]] = {}
        self.aborted: dict[int, bool] = {}
        self.history: dict[int, object] = {}
        self.counters: Counter = Counter()
        self.action_counts: Counter = Counter()
        self.steps = 0
        self._hash = hashlib.sha256()
        self.trace = trace
        self.checker = RefinementChecker(spec_config(cfg, replicas)) if check else None
        self._labels: list[tuple] = []
        self.failed = False
        self._obs_reqs: list[SpecRequest] = []
        self._ids_cache: dict = {}

    # ------------------------------------------------------------ queries

    @property
    def trace_hash(self) -> str:
        return self._hash.hexdigest()

    def waiting(self) -> list[int]:
        if self.mstate != UP:
            return []
        return [r.req_id for r in self.master.requests.values() if r.status is None]

    def open_links(self) -> list[Link]:
        return [link for link in self.links.values() if link.frames]

    def statuses(self) -> dict[str, int]:
        return dict(sorted(Counter(PutStatus(v[-1]).name for v in self.responses.values()).items()))

    # ------------------------------------------------------------ the step

    def _finish(self, what: str, env_labels: list[tuple] = ()) -> None:
        """Perform the cores' effects, then check the step against the spec."""
        self.steps += 1
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
            self.recent_actions.append(label[0])
            if label[0] == "FlushFail":
                self.counters["fsync"] += 1
        if self.checker is not None:
            before = self.checker.shadow
            self._labels = labels
            try:
                taken = self.checker.step(labels, self.observe, f"t={self.now}ms {what}")
            except AssertionError:
                self.failed = True       # the shadow state is no longer in step: stop checking
                raise
            if self.trace is not None:
                for name, state in taken:
                    self.trace.write(json.dumps({"t_ms": self.now, "action": name,
                                                 "changed": changed_fields(before, state)}) + "\n")
                    before = state
        elif self.trace is not None and labels:
            self.trace.write(json.dumps({"t_ms": self.now, "event": what, "labels": labels}) + "\n")

    def check_liveness(self, budget_ms: int) -> None:
        """After faults stopped and the system healed for ``budget_ms``."""
        if waiting := self.waiting():
            ids = [self.checker.requests.spec_id.get(r, r) for r in waiting[:5]] if self.checker else waiting[:5]
            raise PropertyViolation(
                "EveryRequestAnswered",
                f"liveness: {len(waiting)} request(s) still waiting {budget_ms} ms after faults stopped "
                f"(spec ids {ids}); the master is {self.mstate}, writable={self.master.writable}")
        if self.checker is not None:
            self.checker.finish()

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

    def _send(self, conn: int, direction: str, name: str, frame) -> None:
        link = self.links.setdefault((conn, direction), Link(conn, direction, name))
        assert len(link.frames) < MAX_LINK_FRAMES, "link queue unbounded"
        link.frames.append(frame)

    def _master_effect(self, e) -> None:
        disk = self.master_disk
        if isinstance(e, fx.CreateSegment):
            disk.create(e.start)
        elif isinstance(e, fx.WriteData):
            disk.write(e.start, e.position, e.data)
            self.page_end = max(self.page_end, e.start + e.position + len(e.data))
        elif isinstance(e, fx.Fsync):
            assert self.pending_fsync is None, "the core issued two fsyncs at once"
            self.pending_fsync, self.fsync_incarnation = e, self.incarnation
            self.fsync_from = self.master.log.flushed    # what a success makes durable: [fsync_from, upto)
        elif isinstance(e, fx.SendData):
            node = self.replicas[e.replica]
            if node.conn is not None:
                self._send(node.conn, TO_REPLICA, e.replica, Data(e.offset, e.data))
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
                frame = (Ack(e.offset, e.records) if isinstance(e, fx.SendAck)
                         else Handshake(e.offset, e.chain, node.name, e.records))
                self._send(node.conn, TO_MASTER, node.name, frame)
        elif isinstance(e, fx.CloseMaster):
            self._close(node.name, label=("ReplicaDisconnect", node.name))
        else:
            raise AssertionError(f"unknown replica effect {e!r}")

    def _close(self, name: str, label: tuple | None) -> None:
        """Close a slave's connection; ``label`` is recorded only if the master counted it."""
        node = self.replicas[name]
        if node.conn is None:
            return
        self.links.pop((node.conn, TO_MASTER), None)
        self.links.pop((node.conn, TO_REPLICA), None)
        node.conn = None
        node.core.disconnected()
        if self.mstate == UP and name in self.master.conns:
            self.master.replica_disconnected(name)
            if label is not None:
                self.master.spec_steps.append(label)
                if label[0] == "ReplicaDisconnect":
                    self.counters["disconnect"] += 1

    # ------------------------------------------------------------ steps: producers and timers

    def put(self, body: bytes) -> int | None:
        """A producer sends one message (nothing happens while the master is down)."""
        rid = None
        if self.mstate == UP:
            rid = self.next_req
            self.next_req += 1
            self.master.put(rid, rid, body, self.now)
        self._finish(f"put {len(body)} bytes")
        return rid

    def tick(self, now_ms: int) -> None:
        self.now = max(self.now, now_ms)
        if self.mstate == UP:
            self.master.tick(self.now)
        self._finish("tick")

    def complete_fsync(self, ok: bool = True) -> None:
        """The pending fsync returns (or raises EIO when not ``ok``)."""
        e, self.pending_fsync = self.pending_fsync, None
        if e is not None and self.mstate == UP and self.fsync_incarnation == self.incarnation:
            if ok:
                self.master_disk.fsync(e.start, e.upto)
                if self.fsync_from <= self.durable_end:   # after a failed fsync there is a hole: not a prefix
                    self.durable_end = max(self.durable_end, e.upto)
                self.master.fsync_done(e.start, e.upto, self.now)
            else:
                self.master.fsync_failed(e.start, e.upto, self.now)
        self._finish("fsync done" if ok else "fsync failed")

    # ------------------------------------------------------------ steps: network

    def deliver(self, conn: int, direction: str) -> None:
        """The next frame of one direction of one connection arrives."""
        link = self.links.get((conn, direction))
        if link is not None and link.frames:
            frame = link.frames.popleft()
            node = self.replicas[link.name]
            if direction == TO_REPLICA:
                if node.up and node.conn == conn:
                    node.core.on_data(frame.offset, frame.data)
            elif self.mstate == UP and node.conn == conn:
                if isinstance(frame, Handshake):
                    self.master.replica_handshake(link.name, frame.offset, frame.chain, self.now, frame.records)
                else:
                    self.master.replica_ack(link.name, frame.offset, self.now, frame.records)
            what = f"{link.name} {direction} {type(frame).__name__}"
        else:
            what = "nothing to deliver"
        self._finish(what)

    def connect(self, name: str) -> bool:
        """The slave's HAClient connects (if it can); True if a connection opened."""
        node = self.replicas[name]
        opened = self.mstate == UP and node.up and node.conn is None
        if opened:
            self._conn_ids += 1
            node.conn = self._conn_ids
            node.core.connect()
        self._finish(f"{name} connects" if opened else f"{name}: no connection")
        return opened

    def disconnect(self, name: str) -> None:
        node = self.replicas[name]
        counted = self.mstate == UP and node.name in self.master.conns and node.conn is not None
        self._close(name, label=("ReplicaDisconnect", name) if counted else None)
        self._finish(f"{name} disconnected")

    # ------------------------------------------------------------ steps: slaves failing

    def replica_crash(self, name: str) -> None:
        node = self.replicas[name]
        if not node.up:
            return self._finish(f"{name} already down")
        self.counters["replica"] += 1
        node.up = False
        node.core.effects.clear()
        self._close(name, label=None)
        self._finish(f"{name} crashes", [("ReplicaCrash", name)])

    def replica_restart(self, name: str) -> None:
        node = self.replicas[name]
        if node.up:
            return self._finish(f"{name} already up")
        node.disk.close()
        node.disk = self.disk_factory(name, self.cfg.mapped_file_size_commit_log, node.disk)
        report, data = node.disk.recover()
        node.core = ReplicaCore.recovered(name, self.cfg.mapped_file_size_commit_log, report, data)
        node.up = True
        self._finish(f"{name} restarts", [("ReplicaRestart", name)])

    # ------------------------------------------------------------ steps: the master failing

    def _kill_master(self) -> None:
        """The master process is gone: its waiting producers time out on their
        side, its memory (write buffer, acks, pending effects) is lost."""
        for req in self.master.requests.values():
            if req.status is None:
                self.aborted[req.req_id] = (not self.cfg.sync_flush) or req.next_offset <= self.master.released_upto
        self.history.update(self.master.requests)
        self.master.effects.clear()
        self.pending_fsync = None
        for node in self.replicas.values():
            if node.conn is not None:
                self.links.pop((node.conn, TO_MASTER), None)
                self.links.pop((node.conn, TO_REPLICA), None)
                node.conn = None
                node.core.disconnected()

    def master_process_crash(self) -> None:
        if self.mstate != UP:
            return self._finish("no crash: master down")
        self.counters["process"] += 1
        log, idx = self.master.log, self.master.log.index
        self._kill_master()
        self.page_end = log.committed            # the transient-pool write buffer is gone
        self.down = {"log": idx.keys[: idx.records_upto(log.committed)],
                     "committed": idx.records_upto(log.committed), "flushed": idx.records_upto(log.flushed),
                     "durable": idx.records_upto(self.durable_end), "index": idx}
        self.mstate = PROC_DOWN
        self.incarnation += 1
        self._finish("master process crash", [("MasterProcessCrash",)])

    def machine_crash_bounds(self) -> tuple[int, int, list[int]]:
        """(durable end, page-cache end, record ends in between): where a cut may fall."""
        idx = self.master.log.index if self.mstate == UP else self.down["index"]
        low, high = self.durable_end, self.page_end
        return low, high, [e for e in idx.ends if low < e < high]

    def master_machine_crash(self, cut: int) -> None:
        """Power loss: the disk keeps [0, cut) for a cut between the durable
        end and the page-cache end (a record across the cut is torn)."""
        if self.mstate == MACHINE_DOWN:
            return self._finish("no crash: master machine down")
        low, high, _ = self.machine_crash_bounds()
        assert low <= cut <= high, (low, cut, high)
        self.counters["machine"] += 1
        idx = self.master.log.index if self.mstate == UP else self.down["index"]
        if self.mstate == UP:
            self._kill_master()
        keep = idx.records_upto(cut)
        torn = keep < len(idx.ends) and idx.starts[keep] < cut < idx.ends[keep] <= high
        self.master_disk.machine_crash(cut)
        self.durable_end = self.page_end = cut
        self.down = {"log": idx.keys[:keep] + ([None] if torn else []), "committed": keep,
                     "flushed": keep, "durable": keep, "index": idx}
        self.mstate = MACHINE_DOWN
        self.incarnation += 1
        self._finish(f"master machine crash (cut at {cut})", [("MasterMachineCrash", keep, torn)])

    def master_restart(self) -> None:
        if self.mstate == UP:
            return self._finish("no restart: master up")
        self.master_disk.close()
        self.master_disk = self.disk_factory("master", self.cfg.mapped_file_size_commit_log, self.master_disk)
        report, data = self.master_disk.recover(keep_torn=self.cfg.bug("BugRecoveryKeepsTorn"))
        self.durable_end = self.page_end = report.end_offset
        log = CommitLog.recovered(self.cfg.mapped_file_size_commit_log, self.cfg.transient_store_pool_enable,
                                  report, data)
        self.master = MasterCore(self.cfg, self.replica_names, self.now, log=log)
        self.mstate, self.down = UP, None
        self._finish(f"master restarts ({len(report.records)} records, {len(report.dropped)} dropped)",
                     [("Recover",)])

    # ------------------------------------------------------------ abstraction

    def observe(self) -> State:
        """The spec state this cluster is in (the refinement mapping).

        Built incrementally: a spec request is recomputed only when this step
        touched it or it is still waiting, and when it equals the shadow's it
        *is* the shadow's object, so comparing the two states is an identity
        scan over the untouched part."""
        ids = self.checker.requests.spec_id

        def to_ids(keys):
            return tuple(TORN if k is None else ids.get(k, TORN) for k in keys)

        names = self.replica_names
        if self.mstate == UP:
            m, log = self.master, self.master.log
            idx = log.index
            mlog = self._cached_ids("master", idx.keys, to_ids)
            committed, flushed = idx.records_upto(log.committed), idx.records_upto(log.flushed)
            durable = idx.records_upto(self.durable_end)
            writable = m.writable
            connected = tuple(r in m.conns for r in names)
            ack = tuple(m.conns[r].ack_records if r in m.conns else 0 for r in names)
            push2 = m.push2_records
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
        old_keys, old_ids = self._ids_cache.get(who, (None, ()))
        if old_keys is keys and len(old_ids) <= len(keys):
            ids = old_ids + to_ids(keys[len(old_ids):]) if len(old_ids) < len(keys) else old_ids
        else:
            ids = to_ids(keys)
        self._ids_cache[who] = (keys, ids)
        return ids

    def _observed_requests(self) -> tuple:
        requests = self.checker.requests
        obs = self._obs_reqs
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
        req = self.master.requests.get(req_id) if self.mstate == UP else None
        req = req if req is not None else self.history[req_id]
        if req.status is None:
            done = (not self.cfg.sync_flush) or req.next_offset <= self.master.released_upto
            return SpecRequest(off, done, "WAITING")
        return SpecRequest(off, req.flush_done_when_answered, req.status.name)


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
