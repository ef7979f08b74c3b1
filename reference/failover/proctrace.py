"""Per-process failover traces of a real run: what each `broker node` and the `controller` did, in
the spec's vocabulary, stamped with the machine's CLOCK_MONOTONIC, one NDJSON file per process.

spec/failover/procmerge.py merges the files of one run into one AckOrderFailover trace that
`ackorder trace-check` validates with TLC and the twin (a Jepsen-style history checked against the
spec instead of a hand-written model).  Every process of a run shares one clock (they run on one
machine), and every line is stamped where its step happens: after the event that caused it and
before the effects it sends (a broker's lines are written when its runtime takes the core's
effects), so the order of the stamps never contradicts a message.

What a line says (``step`` and its fields):

* broker, as master: ``Put`` (``req``: the core's request id), ``Respond`` / ``Timeout`` (``req``),
  ``ReplicaConnect`` (``slave``, ``records``: what the accepted handshake reported),
  ``ReplicaAck`` (``slave``, ``claim``: the records the report covers; only one that covers more),
  ``ReplicaDisconnect`` (``slave``), ``ShrinkSyncStateSet`` / ``ExpandSyncStateSet`` (``member``),
  ``ChangeSyncStateSet``;
* broker, as slave: ``Transfer`` (``records``: its log's records after it, once written to its page
  cache), ``Received`` (``records``: what it holds once a frame is parsed or a cut is made, before
  any of it is written: a note that bounds what a kill can leave unlined), ``Connect`` (a new
  HA connection; a note, no spec step);
* broker, any role: ``ChangeToMaster`` (``epoch``), ``ChangeToSlave`` (``epoch``, ``master``);
* controller: ``FirstMaster`` (``master``: the spec's Init), ``ElectMaster`` (``master``: elected or
  ``none``), ``AlterSyncStateSet`` (``master``, ``accepted``); each with ``alive``, the brokers its
  heartbeat view counted alive when it decided.

Each start of a process appends a header line (``{"ackorder_trace": 1, "model": "failover-process",
"process": ..., "t_ns": ...}``) to the same file: a later header is a restart, so a crash lies between.
The writers only observe: they read the cores' ghost labels (``spec_steps``, the controller's
``steps``) and their state, and decide nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path


FORMAT = 1
MODEL = "failover-process"


def header_line(process: str, t_ns: int, bugs=(), records: int | None = None) -> dict:
    """A life's first line; ``records``: what a broker's recovery found in its log as it started."""
    head = {"ackorder_trace": FORMAT, "model": MODEL, "process": process, "t_ns": t_ns, "bugs": sorted(bugs)}
    return head if records is None else {**head, "records": records}


class ProcessTrace:
    """One process's file, opened for appending (a restarted process continues it), whole lines
    only (a killed process leaves a prefix), one writer at a time (the node writes from its loop
    thread and its controller client's)."""

    def __init__(self, path: Path, process: str, bugs=(), records: int | None = None,
                 clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.clock_ns = clock_ns
        self.lock = threading.Lock()
        self.out = open(path, "a", buffering=1, encoding="utf-8")
        if self.out.tell() > 0:
            with open(path, "rb") as f:
                f.seek(-1, 2)
                if f.read(1) != b"\n":
                    self.out.write("\n")       # the last life was killed in the middle of a line
        self._write(header_line(process, clock_ns(), bugs, records))

    def _write(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def step(self, step: str, **fields) -> None:
        with self.lock:
            self._write({"t_ns": self.clock_ns(), "step": step, **fields})

    def close(self) -> None:
        with self.lock:
            self.out.close()


# The events after which the tracer reads the master core at once (not only when its effects are
# taken): a connection gone without a label of the core's, before another may take its name.
MASTER_READ_AFTER = frozenset({"replica_disconnected"})


class _TakeEffectsProxy:
    """A core as its runtime sees it, whose ``take_effects`` first lets the tracer read what the
    core just did: the runtime performs nothing of an event before its lines are written."""

    _read_after: frozenset[str] = MASTER_READ_AFTER

    def __init__(self, core, drain: Callable[[], None]) -> None:
        object.__setattr__(self, "_core", core)
        object.__setattr__(self, "_drain", drain)

    def __getattr__(self, name):
        attr = getattr(self._core, name)
        if name not in self._read_after:
            return attr

        def then_read(*args, **kwargs):
            self._drain()           # before: what the connection did is read while it is still there
            out = attr(*args, **kwargs)
            self._drain()
            return out
        return then_read

    def __setattr__(self, name, value) -> None:
        setattr(self._core, name, value)

    def take_effects(self) -> list:
        self._drain()
        return self._core.take_effects()


class _FollowerProxy:
    """A follower as its runtime sees it: a new connection is noted, and a cut (the handshake's
    truncation, done when the log is rescanned) resets what the tracer counts."""

    def __init__(self, core, tracer: BrokerTracer) -> None:
        object.__setattr__(self, "_core", core)
        object.__setattr__(self, "_tracer", tracer)

    def __getattr__(self, name):
        return getattr(self._core, name)

    def __setattr__(self, name, value) -> None:
        setattr(self._core, name, value)

    def connect(self) -> None:
        self._tracer.written()
        self._tracer.trace.step("Connect")
        self._core.connect()

    def rescanned(self, scan) -> None:
        self._tracer.written()
        self._core.rescanned(scan)
        self._tracer.records = self._core.replica.index.count     # the cut: the master's ReplicaConnect says it
        self._tracer.received()

    def on_data(self, *args) -> None:
        self._core.on_data(*args)
        self._tracer.received()


class BrokerTracer:
    """What one broker node's cores did, as spec steps (the module docstring lists them)."""

    def __init__(self, trace: ProcessTrace) -> None:
        self.trace = trace
        self.master = None                     # the raw master core whose labels are read
        self.follower = None
        self.accepted: dict[str, int] = {}     # master: slave -> the records its last counted report claimed
        self.records = 0                       # slave: records its log holds, as last written
        self.parsed = 0                        # slave: records its log holds, as last parsed
        self.held: list[tuple[str, dict]] | None = None

    # ------------------------------------------------------------------ attaching the cores

    def traced_master(self, core):
        """The master core to hand the runtime: its labels are read whenever it emits effects."""
        core.spec_steps = []
        core.request_log = {}              # until its Put label is read: was the record taken?
        self.master, self.accepted = core, {}
        return _TakeEffectsProxy(core, self.drain)

    def traced_follower(self, follower):
        """The follower to hand the runtime; the runtime calls ``written`` once the effects of a
        turn are performed (FollowerSetup.written)."""
        self.follower = follower
        self.records = self.parsed = follower.replica.index.count
        return _FollowerProxy(follower, self)

    def received(self) -> None:
        """What the slave holds as parsed, before the runtime writes it (a ``Received`` note)."""
        count = self.follower.replica.index.count
        if count != self.parsed:
            self.parsed = count
            self.trace.step("Received", records=count)

    def written(self) -> None:
        """A slave's records in its page cache now: the spec's Transfer is the record written, so
        a kill right after the parse (before the write) transfers nothing — stamped before the
        ACK that reports them leaves (the runtime sends at the end of its turn)."""
        follower = self.follower
        if follower is None:
            return
        count = follower.replica.index.count
        while self.records < count:
            self.records += 1
            # never held: a slave's records come before its own role change, in its file's order
            self.trace.step("Transfer", records=self.records)
        self.records = count

    # ------------------------------------------------------------------ writing

    def _emit(self, step: str, **fields) -> None:
        if self.held is not None:
            self.held.append((step, fields))
        else:
            self.trace.step(step, **fields)

    def hold(self) -> None:
        """From now until ``release``: lines wait (a demoted master's answers follow its ChangeToSlave:
        the spec's Timeout needs the role gone)."""
        self.drain()
        self.held = []

    def release(self) -> None:
        held, self.held = self.held or [], None
        for step, fields in held:
            self.trace.step(step, **fields)

    def role_step(self, step: str, **fields) -> None:
        """A role-state step (ChangeToMaster, ChangeToSlave, ChangeSyncStateSet, a proposal), written
        now: the caller drains the cores first when their earlier labels must come before it."""
        self.trace.step(step, **fields)

    def drain(self) -> None:
        """The labels the cores added since the last call, in order."""
        core = self.master
        if core is not None:
            steps, core.spec_steps[:] = list(core.spec_steps), []
            for label in steps:
                kind = label[0]
                if kind in ("Put", "WriteFail"):
                    # a put refused before its record reached the log is no spec step (nor is a
                    # write that failed: no disk fails in the runs traced)
                    req = core.request_log.pop(label[1], None) if label[1] is not None else None
                    if kind == "Put" and req is not None and req.next_offset != 0:
                        self._emit("Put", req=label[1])
                elif kind in ("Respond", "Timeout"):
                    # a flush-leg timeout says nothing of the replica leg, which is all the spec's Timeout is
                    if not (kind == "Timeout" and label[2] == "FLUSH_DISK_TIMEOUT"):
                        self._emit(kind, req=label[1])
                elif kind == "ReplicaConnect":
                    hc = core.conns.get(label[1])
                    records = hc.ack_records if hc is not None else 0
                    self.accepted[label[1]] = records
                    self._emit("ReplicaConnect", slave=label[1], records=records)
                elif kind == "ReplicaAck":
                    name, claimed = label[1], label[2]
                    if name in self.accepted and claimed > self.accepted[name]:
                        self.accepted[name] = claimed
                        self._emit("ReplicaAck", slave=name, claim=claimed)
                elif kind == "ReplicaDisconnect":
                    if self.accepted.pop(label[1], None) is not None:
                        self._emit("ReplicaDisconnect", slave=label[1])
                # Commit, Flush, WriteFail...: the write path's steps, no failover action
            # a connection closed from the other side (or refused a report) leaves conns unlabelled
            for name in [n for n in self.accepted if n not in core.conns]:
                del self.accepted[name]
                self._emit("ReplicaDisconnect", slave=name)

    def master_stopped(self) -> None:
        """The master core stopped (its last answers are read): no labels are read from it any more."""
        self.drain()
        self.master, self.accepted = None, {}

    def follower_stopped(self) -> None:
        self.written()
        self.follower = None



class ControllerTracer:
    """The controller core's decisions (``ControllerCore.steps``), as spec steps."""

    def __init__(self, trace: ProcessTrace, heartbeat_timeout_ms: int) -> None:
        self.trace = trace
        self.timeout_ms = heartbeat_timeout_ms

    def drain(self, core) -> None:
        steps, core.steps[:] = list(core.steps), []
        for s in steps:
            alive = sorted(f"b{b}" for b, last in s.heartbeats if s.now_ms - last <= self.timeout_ms)
            if s.action == "FirstMaster":
                self.trace.step("FirstMaster", group=s.group, master=f"b{s.post.master_id}", alive=alive)
            elif s.action == "ElectMaster":
                master = s.post.master_id
                self.trace.step("ElectMaster", group=s.group, master=f"b{master}" if master > 0 else "none",
                                epoch=s.post.master_epoch, alive=alive)
            elif s.action == "AlterSyncStateSet":
                self.trace.step("AlterSyncStateSet", group=s.group, master=f"b{s.request[0]}",
                                accepted=s.accepted, alive=alive)
