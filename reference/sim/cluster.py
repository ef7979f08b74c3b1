"""A master and its slaves, driven one step at a time.

The cluster owns the cores, their disks, the connections between them and
the producers' view; each public method is one step of the environment (a
put, a timer, an fsync completing, a frame delivered, a crash, a forged or
mangled frame...).  It performs the cores' effects in the order they were
emitted (a page-cache write is answered at once with ``write_done`` or
``write_failed``), then maps its state to the spec's (reference/sim/
abstraction.py) and has the refinement checker replay the spec steps the
cores reported.

Two drivers use it: the seeded simulator (reference/sim/world.py), which
decides what happens when from a random generator, and the Hypothesis
state machines (stateful_tests/), which let Hypothesis decide.  Disks are
pluggable: a simulated page cache, or real files with fdatasync.  The wire
carries frame objects, or (``wire_bytes``) their encoding through a
FrameDecoder per direction, so that frames can be cut, duplicated,
reordered and corrupted at any byte.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections import Counter, deque
from collections.abc import Callable

import attrs

from reference import effects as fx
from reference.commitlog import CommitLog, LogIndex
from reference.config import StoreConfig
from reference.frames import Ack, Data, EpochQuery, EpochReply, FrameDecoder, FrameError, Handshake, encode
from reference.master import MasterCore
from reference.record import CHAIN_START, HEADER_SIZE, Checkpoint
from reference.refinement import PropertyViolation, RefinementChecker, spec_config
from reference.replica import ReplicaCore
from reference.sim.abstraction import Abstraction
from reference.sim.trace import TraceWriter
from reference.status import PutStatus
from spec.coverage import Coverage

UP, PROC_DOWN, MACHINE_DOWN = "UP", "PROC_DOWN", "MACHINE_DOWN"
TO_MASTER, TO_REPLICA = "to_master", "to_replica"
MAX_LINK_FRAMES = 100_000
MAX_WIRE_FRAME_BYTES = 1 << 20
RECENT_ACTIONS = 16               # spec actions kept to describe how a run failed
MAX_PUTS_PER_TURN = 8              # puts a driver hands the master in one loop turn (puts_in_one_turn)
HASH_BATCH_LINES = 256            # trace-hash lines kept before they are hashed
UNKNOWN_SLAVE = "impostor"        # a name no configuration uses
EOF = object()                    # the end of a link's stream: the connection closes there
WRITE_FAULTS = ("EIO", "ENOSPC", "short")
MANGLINGS = ("duplicate", "reorder", "truncate", "garbage", "corrupt")

# A write fault: (kind, bytes written before the error).
WriteFault = tuple[str, int]


@attrs.define
class ReplicaNode:
    name: str
    core: ReplicaCore
    disk: object
    up: bool = True
    conn: int | None = None       # current connection id (pending or accepted)


@attrs.define
class Connection:
    """One TCP connection to the master's HA port."""
    conn: int
    name: str                     # the slave that opened it, or an impostor
    slave: str | None             # the node whose connection this is (None: an impostor's)
    decoders: dict = attrs.Factory(dict)   # direction -> FrameDecoder (wire_bytes only)
    opened_ms: int = 0            # when the master heard of it (its housekeeping clock for a HANDSHAKE)


@attrs.define
class Link:
    """One direction of one connection: frames (or encoded chunks) in flight, in order."""
    conn: int
    direction: str
    name: str
    frames: deque = attrs.Factory(deque)


class Cluster:
    def __init__(self, cfg: StoreConfig, replicas: tuple[str, ...], disk_factory: Callable[[str, int], object],
                 check: bool = True, trace=None, wire_bytes: bool = False) -> None:
        self.cfg = cfg
        self.replica_names = tuple(replicas)
        self.disk_factory = disk_factory
        self.wire_bytes = wire_bytes
        seg = cfg.mapped_file_size_commit_log
        self.now = 0
        self.mstate = UP
        self.incarnation = 0
        self.master_disk = disk_factory("master", seg)
        self.master = MasterCore(cfg, replicas, 0, log=CommitLog(seg, cfg.transient_store_pool_enable, ghost=True))
        # Every core records its spec steps into this one list, so they keep the order
        # in which they happened even when the master and a slave act in one step.
        self.spec_log: list[tuple] = []
        self.master.spec_steps = self.spec_log
        self.durable_end = 0          # bytes of the master's log known fsync'd
        self.page_end = 0             # bytes of the master's log in the page cache, contiguously
        self.down: dict | None = None
        self.replicas = {r: ReplicaNode(r, ReplicaCore(r, seg, ghost=True), disk_factory(r, seg)) for r in replicas}
        for node in self.replicas.values():
            node.core.spec_steps = self.spec_log
        self.connections: dict[int, Connection] = {}
        self.links: dict[tuple[int, str], Link] = {}
        # A link gained frames (a send, a mangling) since a driver last looked: only then can one
        # hold frames with no delivery scheduled (the simulator's _plan clears it).
        self.links_grew = False
        self._conn_ids = 0
        self.pending_fsync: fx.Fsync | None = None
        # A driver may have segment reads take time, as the real runtime's reader thread does (the
        # simulator does; a machine answers them at once): the master parks that connection's frames.
        self.deferred_reads = False
        self.pending_reads: deque[int] = deque()       # ReadSegment starts not yet answered, in order
        self.read_faults = 0                            # the next segment reads that fail (a machine's rule)
        self.recent_actions: deque[str] = deque(maxlen=RECENT_ACTIONS)   # for deduplicating failures
        self.fsync_from = 0
        self.fsync_incarnation = -1
        self.write_fault: Callable[[int], WriteFault | None] = lambda length: None
        self.lookalike_sizes: deque[int] = deque()     # bodies the next puts copy the sizes of
        self.next_req = 1
        self.responses: dict[int, list[int]] = {}
        self.responded: list[int] = []                  # the requests answered by this step's Respond effects
        self.aborted: dict[int, bool] = {}
        self.last_aborted: list[int] = []               # the requests the last master death aborted
        self.history: dict[int, object] = {}           # every request of every incarnation (the cores forget)
        self.epoch_answered: set[int] = set()          # connections an EPOCH_REPLY went to (at most one each)
        self.counters: Counter = Counter()             # spec fault kinds (aux_ctrs)
        self.faults: Counter = Counter()               # injected faults by kind (for reports)
        self.guards: Counter = Counter()               # bounds that closed a connection or refused a put
        self.action_counts: Counter = Counter()
        self.steps = 0
        self._hash = hashlib.sha256()
        self._hash_lines: list[str] = []    # each step's line, hashed in batches (_hash_pending)
        self.checker = RefinementChecker(spec_config(cfg, replicas)) if check else None
        # The spec-level trace (spec/traceformat.py) needs the checker's states.
        assert trace is None or check, "a trace needs the refinement check"
        self.trace = TraceWriter(trace, self.checker.cfg, cfg.bugs, accepted_conn=self.accepted_conn) \
            if trace is not None else None
        self.master.request_log = self.history
        self.abstraction = Abstraction(self)
        if self.checker is not None:
            self.checker.abstraction = self.abstraction
        self.failed = False
        self.coverage = Coverage()        # branches and property antecedents of the spec steps taken

    # ------------------------------------------------------------ queries

    @property
    def trace_hash(self) -> str:
        self._hash_pending()
        return self._hash.hexdigest()

    def _hash_pending(self) -> None:
        """Feed the lines kept since the last call to the trace hash, as one string: the
        same bytes as one update per line (UTF-8 of a concatenation is the concatenation)."""
        if self._hash_lines:
            self._hash.update("".join(self._hash_lines).encode())
            self._hash_lines.clear()

    def waiting(self) -> list[int]:
        if self.mstate != UP:
            return []
        return [r.req_id for r in self.master.requests.values() if r.status is None]

    def open_links(self) -> list[Link]:
        return [link for link in self.links.values() if link.frames]

    def statuses(self) -> dict[str, int]:
        return dict(sorted(Counter(PutStatus(v[-1]).name for v in self.responses.values()).items()))

    def accepted_conn(self, name: str) -> int | None:
        """The connection the master accepted for slave ``name``, if any."""
        if self.mstate != UP or name not in self.master.conns:
            return None
        return self.master.conns[name].conn

    # ------------------------------------------------------------ the step

    def _finish(self, what: str, env_labels: list[tuple] = ()) -> None:
        """Perform the cores' effects, then check the step against the spec."""
        self.steps += 1
        if self.responded:
            self.responded.clear()
        self._drain()
        spec_log = self.spec_log
        labels = [*env_labels, *spec_log] if env_labels else spec_log[:]
        spec_log.clear()
        lines = self._hash_lines
        lines.append(f"{self.now}|{what}|{labels}\n")
        if len(lines) >= HASH_BATCH_LINES:
            self._hash_pending()
        if labels:
            action_counts, recent = self.action_counts, self.recent_actions
            for label in labels:
                kind = label[0]
                action_counts[kind] += 1
                recent.append(kind)
                if kind in _COUNTED:
                    self.counters[_COUNTED[kind]] += 1
        if self.checker is None:
            return
        if self.mstate == UP:
            self.master.check_invariants()
        before = self.checker.shadow
        try:
            self.checker.step(labels, f"t={self.now}ms {what}", page_cache_records=self.page_cache_records)
        except AssertionError as err:
            self.failed = True       # the shadow state is no longer in step: stop checking
            self._cover(before)
            if self.trace is not None:     # the violating step itself is written: the checker applies a step first
                self.trace.steps(before, self.checker.taken, self.now, what)
                self.trace.end(False, (getattr(err, "prop", "refinement"), str(err)))
            raise
        self._cover(before)
        if self.trace is not None:
            self.trace.steps(before, self.checker.taken, self.now, what)

    def _cover(self, before) -> None:
        for label, state in self.checker.taken:
            self.coverage.step(self.checker.cfg, label, before, state)
            before = state

    def page_cache_records(self) -> int:
        """Whole records really in the master's page cache, in order (what a failed write
        left there is for the disk, not the master, to know)."""
        if self.mstate != UP:
            return self.down["committed"]
        return self.master.log.ghost.records_upto(self.page_end)

    def caught_up(self, name: str) -> bool | None:
        """ReplicasCatchUp for one slave: True when connected to a live master with all it
        committed acknowledged, None when its log diverged from the master's (refused for good)."""
        node, m = self.replicas[name], self.master
        core = node.core
        if self.mstate == UP and (core.parsed_end > m.log.committed
                                  or m.log.ghost.chain_at(core.parsed_end) != core.index.chain_at(core.parsed_end)):
            return None
        hc = m.conns.get(name) if self.mstate == UP else None
        return (node.up and hc is not None and hc.conn == node.conn and core.received_end == m.log.committed
                and hc.ack_offset == m.log.committed)

    def check_answered_in_time(self, bound_ms: int) -> None:
        """EveryRequestAnswered, with the core's deadlines as the bound: the oldest request
        still waiting on a live master has waited at most ``bound_ms``.  (Waiting requests are
        queued in put order, answered ones leave from the head, so the head is the oldest.)"""
        if self.mstate != UP or not self.master.waiting:
            return
        for req in self.master.waiting:
            if req.status is None:
                break
        else:
            return
        if self.now - req.put_ms > bound_ms:
            spec_id = self.checker.requests.spec_id.get(req.req_id) if self.checker else None
            raise PropertyViolation(
                "EveryRequestAnswered",
                f"request {req.req_id} (spec id {spec_id}) has waited {self.now - req.put_ms} ms for an answer, "
                f"more than both of its deadlines allow ({bound_ms} ms)")

    def check_liveness(self, budget_ms: int) -> None:
        """After faults stopped and the system healed for ``budget_ms``."""
        if self.mstate != UP:
            raise PropertyViolation("EveryRequestAnswered",
                                    f"liveness: the master is still {self.mstate} {budget_ms} ms after faults stopped")
        if waiting := self.waiting():
            ids = [self.checker.requests.spec_id.get(r, r) for r in waiting[:5]] if self.checker else waiting[:5]
            raise PropertyViolation(
                "EveryRequestAnswered",
                f"liveness: {len(waiting)} request(s) still waiting {budget_ms} ms after faults stopped "
                f"(spec ids {ids}); the master is {self.mstate}, writable={self.master.writable}")
        behind = [name for name in self.replica_names if self.caught_up(name) is False]
        if behind:
            log = self.master.log
            detail = ", ".join(f"{n} at {self.replicas[n].core.received_end} "
                               f"({'connected' if n in self.master.conns else 'not connected'})" for n in behind)
            raise PropertyViolation(
                "ReplicasCatchUp",
                f"liveness: {budget_ms} ms after faults stopped, slaves whose logs follow the master's have "
                f"not caught up with its committed offset {log.committed}: {detail}")
        if self.checker is not None:
            self.checker.finish()

    # ------------------------------------------------------------ effects

    def _drain(self) -> None:
        nodes = self.replicas.values()
        master_effect = self._master_effect
        master = self.master if self.mstate == UP else None    # effects never crash or restart it
        for _ in range(1000):
            pending = master.take_effects() if master is not None and master.effects else None
            for node in nodes:
                if node.core.effects:         # most events leave most cores quiet: no list for them
                    pending = (pending or []) + [(node, e) for e in node.core.take_effects()]
            if not pending:
                return
            i, n = 0, len(pending)
            while i < n:
                item = pending[i]
                i += 1
                if type(item) is tuple:       # effects are attrs classes; a replica's comes as (node, effect)
                    self._replica_effect(*item)
                elif type(item) is fx.WriteData:
                    # The real runtime writes a run of contiguous WriteData with one pwritev
                    # (reference/real/master_server.py _perform): several puts of one loop turn.
                    run = [item]
                    while (i < n and type(pending[i]) is fx.WriteData and pending[i].start == item.start
                           and pending[i].offset == run[-1].end):
                        run.append(pending[i])
                        i += 1
                    self._write(run)
                else:
                    master_effect(item)
        raise AssertionError("effects did not settle in 1000 rounds")

    def _send(self, conn: int, direction: str, frame) -> None:
        if conn not in self.connections:
            return
        link = self.links.setdefault((conn, direction), Link(conn, direction, self.connections[conn].name))
        assert len(link.frames) < MAX_LINK_FRAMES, "link queue unbounded"
        if link.frames and link.frames[-1] is EOF:
            return                  # the link was cut: what is sent after the cut never arrives
        link.frames.append(encode(frame) if self.wire_bytes else frame)
        self.links_grew = True

    def _write(self, run: list[fx.WriteData]) -> None:
        """pwrite a run of contiguous WriteData into the master's page cache, as one pwritev (the
        real runtime's ``_write``): one fault decision for the run; the core learns how each write
        went at once, in order: the ones wholly copied are done, the one the fault cut failed after
        what it copied, and every later one failed with nothing copied (they follow a hole)."""
        first, last = run[0], run[-1]
        master = self.master
        if master.write_cancelled(first.start, first.position, len(first.data)):
            for e in run:             # every write after a failed one is stale: none is performed
                master.write_failed(e.start, e.position, len(e.data), 0, self.now)
            self.faults["write_cancelled"] += 1
            return
        data = first.data if len(run) == 1 else b"".join(e.data for e in run)
        fault = self.write_fault(len(data))
        written = len(data) if fault is None else fault[1]
        if written:
            self.master_disk.write(first.start, first.position, data[:written])
        if fault is None:
            if first.offset == self.page_end:
                self.page_end = last.end
            if len(run) == 1:
                self.master.write_done(first.start, first.position, len(data), self.now)
            else:
                self.master.writes_done([(e.start, e.position, len(e.data)) for e in run], self.now)
            return
        self.faults[f"write_{fault[0]}"] += 1
        if len(run) > 1:
            self.faults["write_fault_in_a_run"] += 1
        if first.offset == self.page_end:
            # What really is in the page cache: the bytes copied before the error, and the
            # whole run if the bytes it missed happen to be there already (zeros, a retry).
            landed = last.end if self.master_disk.read(first.start, first.position, len(data)) == data \
                else first.offset + written
            self.page_end = self.master.log.ghost.boundary_at_or_below(landed)
        for e in run:
            if written >= len(e.data):
                self.master.write_done(e.start, e.position, len(e.data), self.now)
                written -= len(e.data)
            else:
                self.master.write_failed(e.start, e.position, len(e.data), written, self.now)
                written = 0

    def _master_effect(self, e) -> None:
        kind = type(e)
        if kind is fx.Respond:
            responses = self.responses.get(e.req_id)
            if responses is None:
                self.responses[e.req_id] = [e.status]
            else:
                responses.append(e.status)
            self.responded.append(e.req_id)
            if e.status == PutStatus.OS_PAGE_CACHE_BUSY:    # no admission here: only the pool refuses so
                self.guards["transient_store_pool_size"] += 1
        elif kind is fx.SendData:
            self._send(e.conn, TO_REPLICA, Data(e.offset, e.data, e.epoch, e.epoch_start, e.confirm_offset))
        elif kind is fx.SendEpochs:
            assert e.conn not in self.epoch_answered, f"a second EPOCH_REPLY on connection {e.conn}"
            self.epoch_answered.add(e.conn)
            self._send(e.conn, TO_REPLICA, EpochReply(e.log_end_offset, e.confirm_offset, e.entries))
        elif kind is fx.CreateSegment:
            self.master_disk.create(e.start)
        elif kind is fx.ReadSegment:
            if self.deferred_reads:
                self.pending_reads.append(e.start)
            else:
                self._read_back(e.start)
        elif kind is fx.Fsync:
            assert self.pending_fsync is None, "the core issued two fsyncs at once"
            self.pending_fsync, self.fsync_incarnation = e, self.incarnation
            self.fsync_from = self.master.log.flushed    # what a success makes durable: [fsync_from, upto)
        elif kind is fx.CloseReplica:
            if e.bound is not None:
                self.guards[e.bound] += 1
            if e.bound == "ha_housekeeping_interval_ms" and (c := self.connections.get(e.conn)) is not None:
                # the environment's clock, not the core's: a connection may stay silent that long
                assert self.now - c.opened_ms >= self.cfg.ha_housekeeping_interval_ms, \
                    f"connection {e.conn} closed for no HANDSHAKE {self.now - c.opened_ms} ms after it opened"
            self._close_conn(e.conn, by_master=True)
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
                self._send(node.conn, TO_MASTER, frame)
        elif isinstance(e, fx.CloseMaster):
            if node.conn is not None:
                self._close_conn(node.conn, by_master=False)
        else:
            raise AssertionError(f"unknown replica effect {e!r}")

    def _close_conn(self, conn: int, by_master: bool) -> None:
        """Close one connection.  When the slave side or the network closes one the
        master had accepted, the master notices (spec: ReplicaDisconnect); when the
        master closed it, its core already took whatever spec step that was."""
        c = self.connections.pop(conn, None)
        if c is None:
            return
        self.epoch_answered.discard(conn)
        self.links.pop((conn, TO_MASTER), None)
        self.links.pop((conn, TO_REPLICA), None)
        if c.slave is not None and self.replicas[c.slave].conn == conn:
            node = self.replicas[c.slave]
            node.conn = None
            node.core.disconnected()
        if not by_master and self.mstate == UP:
            accepted = self.master.name_of(conn)
            self.master.replica_disconnected(conn)
            if accepted is not None:
                self.spec_log.append(("ReplicaDisconnect", accepted))

    def _open_conn(self, name: str, slave: str | None) -> int:
        self._conn_ids += 1
        self.connections[self._conn_ids] = Connection(self._conn_ids, name, slave, opened_ms=self.now)
        if self.mstate == UP:
            self.master.replica_connection_opened(self._conn_ids, self.now)
        return self._conn_ids

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

    def puts_in_one_turn(self, bodies: list[bytes]) -> list[int | None]:
        """Several producers' puts of one loop turn (the real runtime's ``_turn`` takes up to
        ``puts_per_turn``), then their effects performed together: the records' page-cache writes
        go out as one run, so a write that fails has the later puts' records behind it."""
        assert 1 <= len(bodies) <= MAX_PUTS_PER_TURN, len(bodies)
        rids: list[int | None] = []
        for body in bodies:
            rid = None
            if self.mstate == UP:
                rid = self.next_req
                self.next_req += 1
                self.master.put(rid, rid, body, self.now)
            rids.append(rid)
        self._finish(f"{len(bodies)} puts in one turn: {[len(b) for b in bodies]} bytes")
        return rids

    def next_body_size(self, default: int) -> int:
        """The size of the next put: after a power loss, often that of a lost record, so a
        slave still holding it differs from the master in content only (look-alike divergence)."""
        return self.lookalike_sizes.popleft() if self.lookalike_sizes else default

    def tick(self, now_ms: int) -> None:
        self.now = max(self.now, now_ms)
        if self.mstate == UP:
            self.master.tick(self.now)
        self._finish("tick")

    def _read_back(self, start: int, ok: bool = True) -> None:
        """A segment the master no longer keeps in memory, read back from its page cache (or
        the read fails, as the real runtime's reader thread reports an EIO from pread)."""
        if not ok or self.read_faults:
            if self.read_faults:
                self.read_faults -= 1
            self.faults["segment_read_failed"] += 1
            self.master.segment_read_failed(start, f"segment {start} could not be read back: EIO (injected)",
                                            self.now)
            return
        self.master.segment_read(start, self.master_disk.read(start, 0, self.cfg.mapped_file_size_commit_log),
                                 self.now)

    def complete_read(self, ok: bool = True) -> None:
        """The oldest deferred segment read is answered (``ok``: the bytes; else an I/O error)."""
        start = self.pending_reads.popleft()
        self._read_back(start, ok)
        self._finish(f"segment {start} read back" if ok else f"segment {start} read failed")

    def complete_fsync(self, ok: bool = True) -> None:
        """The pending fsync returns (or raises EIO when not ``ok``)."""
        e, self.pending_fsync = self.pending_fsync, None
        if e is not None and self.mstate == UP and self.fsync_incarnation == self.incarnation:
            if ok:
                self.master_disk.fsync(e.start, e.upto)
                self.master.fsync_done(e.start, e.upto, self.now)
                # Durable as far as the master counts it (a read-only master ignores a late
                # fsync: crashes may then lose more, never anything acknowledged); after a
                # failed fsync there is a hole, so the durable prefix stops there.
                if self.fsync_from <= self.durable_end and self.master.log.flushed >= e.upto:
                    self.durable_end = max(self.durable_end, min(e.upto, self.page_end))
            else:
                self.faults["fsync_EIO"] += 1
                self.master.fsync_failed(e.start, e.upto, self.now)
        self._finish("fsync done" if ok else "fsync failed")

    # ------------------------------------------------------------ steps: network

    def deliver(self, conn: int, direction: str) -> None:
        """The next frame (or chunk) of one direction of one connection arrives."""
        link = self.links.get((conn, direction))
        if link is None or not link.frames:
            return self._finish("nothing to deliver")
        item = link.frames.popleft()
        if item is EOF:
            self._close_conn(conn, by_master=False)
            return self._finish(f"{link.name} {direction} connection cut")
        if not self.wire_bytes:
            self._receive(conn, direction, item)
            return self._finish(f"{link.name} {direction} {type(item).__name__}")
        decoder = self.connections[conn].decoders.setdefault(direction, FrameDecoder(MAX_WIRE_FRAME_BYTES))
        try:
            frames = decoder.feed(item)
        except FrameError as err:
            self._reject_input(conn, direction, f"malformed frame: {err}")
            return self._finish(f"{link.name} {direction} malformed bytes")
        for frame in frames:
            if conn not in self.connections:
                break
            self._receive(conn, direction, frame)
        self._finish(f"{link.name} {direction} {len(item)} bytes, {len(frames)} frame(s)")

    def _receive(self, conn: int, direction: str, frame) -> None:
        c = self.connections[conn]
        if direction == TO_REPLICA:
            node = self.replicas.get(c.slave) if c.slave else None
            if node is None or not node.up or node.conn != conn:
                return
            if isinstance(frame, Data):
                node.core.on_data(frame.offset, frame.data)
            else:
                self._reject_input(conn, direction, f"a master sent a {type(frame).__name__} frame")
            return
        if self.mstate != UP:
            return
        if isinstance(frame, Handshake):
            self.master.replica_handshake(conn, frame.name, frame.offset, frame.chain, self.now, frame.records)
        elif isinstance(frame, Ack):
            self.master.replica_ack(conn, frame.offset, self.now, frame.records)
        elif isinstance(frame, EpochQuery):
            self.master.replica_epoch_query(conn, self.now)
        else:
            self.master.replica_bad_input(conn, f"a slave sent a {type(frame).__name__} frame")

    def _reject_input(self, conn: int, direction: str, reason: str) -> None:
        """The receiving side could not use what arrived: it closes the connection."""
        if direction == TO_MASTER:
            if self.mstate == UP:
                self.master.replica_bad_input(conn, reason)
            else:
                self._close_conn(conn, by_master=True)
            return
        c = self.connections[conn]
        node = self.replicas.get(c.slave) if c.slave else None
        if node is not None and node.conn == conn:
            node.core.on_bad_input(reason)
        else:
            self._close_conn(conn, by_master=False)

    def connect(self, name: str) -> bool:
        """The slave's HAClient connects (if it can); True if a connection opened."""
        node = self.replicas[name]
        opened = self.mstate == UP and node.up and node.conn is None
        if opened:
            node.conn = self._open_conn(name, name)
            node.core.connect()
            if self.trace is not None:     # a causal anchor for merging per-process traces
                self.trace.note(name, "HANDSHAKE", self.now, records=len(node.core.index.ends), conn=node.conn)
        self._finish(f"{name} connects" if opened else f"{name}: no connection")
        return opened

    def heartbeat(self, name: str) -> None:
        """The slave's periodic report (HAClient's heartbeat): what it holds, again."""
        node = self.replicas[name]
        if node.up and node.conn is not None:
            node.core.heartbeat()
        self._finish(f"{name} heartbeat")

    def disconnect(self, name: str) -> None:
        node = self.replicas[name]
        if node.conn is not None:
            self._close_conn(node.conn, by_master=False)
        self._finish(f"{name} disconnected")

    # ------------------------------------------------------------ steps: forged and mangled HA input

    def forge_ack(self, name: str, offset: int, records: int) -> bool:
        """An ACK the slave never sent arrives now on its accepted connection (a forger
        chooses its numbers against what the master holds at that moment)."""
        conn = self.accepted_conn(name)
        if conn is not None:
            self.faults["forged_ack"] += 1
            self.master.replica_ack(conn, offset, self.now, records)
        self._finish(f"forged ACK {offset}/{records} for {name}" if conn else "no connection to forge on")
        return conn is not None

    def impostor(self, name: str) -> None:
        """A second connection claims to be slave ``name`` (UNKNOWN_SLAVE: a name no one has) at
        that slave's offset.  Its handshakes take turns (by count: no draw, so no seed's later
        draws move): a damaged chain hash; the right chain with one record more, or one fewer,
        than the slave holds there (HandshakeAccepts' record check, reached only while the slave
        has no connection); an exact copy of a connected slave's own (the name check alone
        refuses it: handed to the master at once, as a forged ACK is, since a copy that waited in
        the link could arrive after the slave's own connection is gone, and be its rightful
        successor)."""
        node = self.replicas.get(name)
        if self.mstate == UP:
            kind = "impostor" if node else "unknown_slave"
            variant = self.faults[kind] % 4
            self.faults[kind] += 1
            conn = self._open_conn(name, None)
            offset = node.core.parsed_end if node else 0
            chain = node.core.index.chain_at(offset) if node else bytes(16)
            records = node.core.index.count if node else 0
            if variant == 3 and node and self.accepted_conn(name) is not None:
                self.master.replica_handshake(conn, name, offset, chain, self.now, records)
                self._finish(f"impostor connects as {name} with a copy of its HANDSHAKE")
                return
            if variant == 1:
                records += 1
            elif variant == 2 and records > 0:
                records -= 1
            else:
                chain = bytes(b ^ 0xFF for b in chain)
            self._send(conn, TO_MASTER, Handshake(offset, chain, name, records))
        self._finish(f"impostor connects as {name}")

    def flood(self, name: str, count: int) -> None:
        """A connection that claims slave ``name`` at offset 0 with a damaged chain hash, then keeps
        talking: ``count`` ACK frames before any answer.  Under a configured name with no connection,
        once the log's first segment has left memory, its handshake waits for that segment to be
        read back and the ACKs wait behind it (ha_max_parked_events); otherwise the handshake is
        refused and the ACKs meet a closed or refused connection.  Every other flood puts a
        well-formed HANDSHAKE of an empty slave first among the frames behind the damaged one: a
        master that ran the frames parked behind a refused handshake would take it, on a
        connection it has closed (by count, not by a draw: no seed's later draws move)."""
        if self.mstate == UP:
            second = self.faults["flood"] % 2 == 1
            self.faults["flood"] += 1
            conn = self._open_conn(name, None)
            self._send(conn, TO_MASTER, Handshake(0, bytes(b ^ 0xFF for b in CHAIN_START), name, 0))
            if second:
                self._send(conn, TO_MASTER, Handshake(0, CHAIN_START, name, 0))
            for _ in range(count):
                self._send(conn, TO_MASTER, Ack(0, 0))
        self._finish(f"{name} flooded with {count} ACKs")

    def greetless(self, count: int) -> None:
        """``count`` HA connections that never send their HANDSHAKE (ha_max_ungreeted_connections,
        and the housekeeping interval, close them)."""
        if self.mstate == UP:
            self.faults["greetless"] += count
            for _ in range(count):
                self._open_conn(UNKNOWN_SLAVE, None)
        self._finish(f"{count} connections that never greet")

    def epoch_queries(self, times: int) -> None:
        """A connection that asks for the master's epochs (EPOCH_QUERY) ``times`` times: once is
        a following slave's first frame, answered; a second is refused and the connection closed
        (the environment checks that no connection is answered twice: an EPOCH_REPLY is up to
        a megabyte, a peer must not be able to ask for it in a loop)."""
        if self.mstate == UP:
            self.faults["epoch_query"] += times
            conn = self._open_conn(UNKNOWN_SLAVE, None)
            for _ in range(times):
                self._send(conn, TO_MASTER, EpochQuery())
        self._finish(f"a connection asks for the epochs {times} time(s)")

    def impostor_conns(self) -> list[int]:
        return [c.conn for c in self.connections.values() if c.slave is None]

    def close_impostors(self) -> None:
        for conn in self.impostor_conns():
            self._close_conn(conn, by_master=False)

    def mangle(self, how: str, pick: int, at: int) -> bool:
        """Damage the frames in flight on one link (``pick`` chooses it, ``at`` the byte or frame)."""
        self.links_grew = True                  # a duplicate, garbage or the EOF of a cut adds an item
        links = self.open_links()
        if not links or (how in ("truncate", "garbage", "corrupt") and not self.wire_bytes):
            self._finish(f"nothing to {how}")
            return False
        link = links[pick % len(links)]
        frames = link.frames
        whole = len(frames) - (frames[-1] is EOF)     # a cut link ends with EOF: leave that in place
        assert EOF not in list(frames)[:whole], "EOF is always the last item of a link"
        if whole == 0:
            self._finish(f"nothing to {how}")
            return False
        k = at % whole
        if how == "duplicate":
            frames.insert(k + 1, frames[k])
        elif how == "reorder":
            if whole < 2:
                return self._finish("nothing to reorder") or False
            k = min(k, whole - 2)
            frames[k], frames[k + 1] = frames[k + 1], frames[k]
        elif how == "garbage":
            frames.insert(k, hashlib.sha256(f"{self.steps}/{at}".encode()).digest()[: 1 + at % 32])
        elif how == "corrupt":
            chunk = bytearray(frames[k])
            assert chunk, "an empty chunk in flight"
            chunk[at % len(chunk)] ^= 1 << (at % 8)
            frames[k] = bytes(chunk)
        elif how == "truncate":                 # the connection breaks inside a frame (or just before it)
            cut = frames[k][: at % len(frames[k])]
            keep = k + 1 if cut else k          # no empty chunk stays in flight
            if cut:
                frames[k] = cut
            while len(frames) > keep:
                frames.pop()
            frames.append(EOF)                  # delivered last: then the connection closes
        else:
            raise ValueError(f"unknown mangling {how!r}")
        self.faults[f"{how}_frame"] += 1
        self._finish(f"{how} a frame on {link.name} {link.direction}")
        return True

    # ------------------------------------------------------------ steps: slaves failing

    def replica_crash(self, name: str) -> None:
        node = self.replicas[name]
        if not node.up:
            return self._finish(f"{name} already down")
        self.counters["replica"] += 1
        node.up = False
        node.core.effects.clear()
        if node.conn is not None:
            conn, node.conn = node.conn, None
            self.links.pop((conn, TO_MASTER), None)
            self.links.pop((conn, TO_REPLICA), None)
            self.connections.pop(conn, None)
            if self.mstate == UP:
                self.master.replica_disconnected(conn)
        node.core.disconnected()
        self._finish(f"{name} crashes", [("ReplicaCrash", name)])

    def replica_restart(self, name: str) -> None:
        node = self.replicas[name]
        if node.up:
            return self._finish(f"{name} already up")
        node.disk.close()
        node.disk = self.disk_factory(name, self.cfg.mapped_file_size_commit_log, node.disk)
        scan, ghost = _recover(node.disk, self.cfg.mapped_file_size_commit_log, previous=node.core.ghost)
        node.core = ReplicaCore.recovered(name, self.cfg.mapped_file_size_commit_log, scan, ghost)
        node.core.spec_steps = self.spec_log
        node.up = True
        self._finish(f"{name} restarts", [("ReplicaRestart", name)])

    # ------------------------------------------------------------ steps: the master failing

    def _kill_master(self) -> None:
        """The master process is gone: its waiting producers time out on their
        side, its memory (write buffer, acks, pending effects) is lost."""
        self.last_aborted = [req.req_id for req in self.master.requests.values() if req.status is None]
        for rid in self.last_aborted:
            self.aborted[rid] = self.master.flush_leg_done(self.master.requests[rid])
        self.history.update(self.master.requests)
        self.master.effects.clear()
        self.pending_fsync = None
        self.pending_reads.clear()
        for conn in list(self.connections):
            c = self.connections.pop(conn)
            self.links.pop((conn, TO_MASTER), None)
            self.links.pop((conn, TO_REPLICA), None)
            if c.slave is not None and self.replicas[c.slave].conn == conn:
                self.replicas[c.slave].conn = None
                self.replicas[c.slave].core.disconnected()

    def master_process_crash(self) -> None:
        if self.mstate != UP:
            return self._finish("no crash: master down")
        self.counters["process"] += 1
        log, idx = self.master.log, self.master.log.ghost
        self._kill_master()
        kept = idx.records_upto(self.page_end)      # the page cache survives; the pool's write buffer is gone
        # The log while down: the first ``committed`` records of ``index`` (then a torn one if
        # ``torn``); the index itself stays as the master left it until the restart.
        self.down = {"committed": kept, "torn": False,
                     "flushed": min(idx.records_upto(log.flushed), kept),
                     "durable": min(idx.records_upto(self.durable_end), kept), "index": idx}
        self.mstate = PROC_DOWN
        self.incarnation += 1
        self._finish("master process crash", [("MasterProcessCrash",)])

    def machine_crash_bounds(self) -> tuple[int, int, list[int]]:
        """(durable end, page-cache end, record ends in between): where a cut may fall."""
        idx = self.master.log.ghost if self.mstate == UP else self.down["index"]
        low, high = min(self.durable_end, self.page_end), self.page_end
        ends = idx.ends
        return low, high, list(ends[bisect_right(ends, low): bisect_left(ends, high)])

    def master_machine_crash(self, cut: int) -> None:
        """Power loss: the disk keeps [0, cut) for a cut between the durable
        end and the page-cache end (a record across the cut is torn)."""
        if self.mstate == MACHINE_DOWN:
            return self._finish("no crash: master machine down")
        low, high, _ = self.machine_crash_bounds()
        assert low <= cut <= high, (low, cut, high)
        self.counters["machine"] += 1
        idx = self.master.log.ghost if self.mstate == UP else self.down["index"]
        if self.mstate == UP:
            self._kill_master()
        keep = idx.records_upto(cut)
        torn = keep < len(idx.ends) and idx.starts[keep] < cut < idx.ends[keep] <= high
        self.lookalike_sizes = deque(idx.ends[i] - idx.starts[i] - HEADER_SIZE for i in range(keep, len(idx.ends)))
        self.master_disk.machine_crash(cut)
        self.durable_end = self.page_end = cut
        self.down = {"committed": keep, "torn": torn, "flushed": keep, "durable": keep, "index": idx}
        self.mstate = MACHINE_DOWN
        self.incarnation += 1
        self._finish(f"master machine crash (cut at {cut})", [("MasterMachineCrash", keep, torn)])

    def master_restart(self) -> None:
        if self.mstate == UP:
            return self._finish("no restart: master up")
        self.master_disk.close()
        self.master_disk = self.disk_factory("master", self.cfg.mapped_file_size_commit_log, self.master_disk)
        seg = self.cfg.mapped_file_size_commit_log
        scan, ghost = _recover(self.master_disk, seg, keep_torn=self.cfg.recovery_keeps_torn,
                               previous=self.down["index"])
        self.durable_end = self.page_end = scan.end_offset
        log = CommitLog.recovered(seg, self.cfg.transient_store_pool_enable, scan, ghost)
        self.master = MasterCore(self.cfg, self.replica_names, self.now, log=log)
        self.master.spec_steps = self.spec_log
        self.master.request_log = self.history
        self.mstate, self.down = UP, None
        self._finish(f"master restarts ({scan.record_count} records, {len(scan.dropped)} dropped)",
                     [("Recover",)])

    def observe(self):
        """The spec state this cluster is in (see reference/sim/abstraction.py)."""
        return self.abstraction.observe()


# Spec actions that bump aux_ctrs, and which counter (the others are counted where they happen).
_COUNTED = {"FlushFail": "fsync", "WriteFail": "write", "ReplicaDisconnect": "disconnect"}


def _recover(disk, segment_size: int, keep_torn: bool = False, previous: LogIndex | None = None):
    """CRC recovery of a node's disk, and the ghost index of everything it kept (for observers).

    ``previous``: the node's ghost index before it went down.  When the disk resumes its scan
    at a checkpoint (the segments before it are unchanged since its last recovery, which
    indexed them into this ghost's lineage), the ghost is that index cut back to the
    checkpoint, and only the records scanned from there on are added to it."""
    ghost = LogIndex(segment_size)
    resumed_at = 0

    def resume(cp: Checkpoint) -> None:
        nonlocal ghost, resumed_at
        if cp.start:
            assert previous is not None and previous.base == 0
            previous.truncate(cp.start)
            assert (previous.count, previous.last_chain) == (cp.records, cp.chain), (previous.count, cp)
            ghost, resumed_at = previous, cp.start

    def on_record(offset: int, header: bytes, end: int, key: int, chains: tuple[bytes, bytes]) -> None:
        ghost.add_record(offset, header, end, key, chains=chains)    # the scan's hashes: none computed again

    scan = disk.recover(keep_torn=keep_torn, on_record=on_record, on_resume=resume if previous is not None else None)
    for cp in scan.checkpoints[resumed_at // segment_size:]:
        ghost.checkpoints.add(cp)
    return scan, ghost
