"""Per-process trace writers for a runtime that drives one core (the real master or a real slave):
each writes its own NDJSON trace (spec/traceformat.py) from what its core reported, seeing only
its own variables, so that `ackorder trace-check master.ndjson r1.ndjson ...` merges the files by
causality and checks the run against the spec.

The one call a runtime makes, after every event of its core (before the next one):

    hook.event(now_ms)                     # MasterTraceHook or ReplicaTraceHook

plus, for the master, ``hook.connection_lost(name, conn)`` when an accepted slave connection
closes from the other side (the core's ``replica_disconnected``), and ``hook.close()`` at a clean
stop.  The hook consumes the core's ``spec_steps`` (the ghost labels the refinement check reads).

Each step says what the core's label fixes (the request it created and its producer key, the
watermark it moved, the status it answered, the ack it recorded) and declares observed exactly
that (``observes``): what a step changes as a consequence (the waiters a flush releases...) is
left to the checker, which computes it.

A real runtime does not call the hook itself: it wraps its core in ``TracedMaster`` or
``TracedReplica`` (below), which call ``event`` after every event method of the core, so no event
can be left out and the runtime holds no protocol logic.  The cores forget what they no longer
need (answered requests, index segments behind the slaves): the master hook keeps the requests
it has yet to see answered in the core's ``request_log`` (pruned after every event), and a
slave's ``Transfer`` label carries the key of the record it completed.
"""

from __future__ import annotations

import json

from spec import traceformat as tf
from spec.config import Config

TLC_MAX_FILE_SIZE = 1 << 30


def _name(var: str, r: str | None) -> str:
    return f"{var}[{r}]" if r else var


class _Writer:
    def __init__(self, out, process: str, cfg: Config | None, observes, bugs=()) -> None:
        self.out = out
        self.seq = 0
        self.cfg = cfg and Config(replicas=cfg.replicas, flush_mode=cfg.flush_mode, repl_mode=cfg.repl_mode,
                     transient_store_pool=cfg.transient_store_pool, ack_policy=cfg.ack_policy,
                     in_sync_replicas=cfg.in_sync_replicas, file_size=min(cfg.file_size, TLC_MAX_FILE_SIZE),
                     commit_on_replica_wait=cfg.commit_on_replica_wait)
        self._line(tf.header(process, self.cfg, observes, "keys", bugs, f"{process} runtime"))

    def _line(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def step(self, action, obs: dict, now_ms: int | None = None, **extra) -> None:
        self.seq += 1
        observes = sorted(_name(v, r) for v, r in tf.mentioned_names(obs))
        self._line({"seq": self.seq, "action": action, "obs": obs, "observes": observes, "t_ms": now_ms,
                    **{k: v for k, v in extra.items() if v is not None}})

    def note(self, note: str, now_ms: int | None = None, **data) -> None:
        self.seq += 1
        self._line({"seq": self.seq, "note": note, **data, "t_ms": now_ms})

    def close(self) -> None:
        self._line({"end": "complete"})


class MasterTraceHook(_Writer):
    """The master's trace: ``MasterTraceHook(out, core, spec_cfg, restarted=...)``, then
    ``event(now_ms)`` after every core event.  ``conn_id(conn)``: the id both ends know for a
    connection (the slave's address); by default the runtime's connection number."""

    def __init__(self, out, core, spec_cfg: Config, restarted: bool = False, conn_id=str) -> None:
        super().__init__(out, "master", spec_cfg, tf.MASTER_OBSERVES, sorted(core.cfg.bugs))
        self.core = core
        self.conn_id = conn_id
        self._attach(core)
        # The core reports every watermark move and ack it handles; the spec counts whole records,
        # so a label that moves nothing in records is no spec step (as reference/refinement.py reads it).
        self.committed = self.flushed = 0
        self.acks: dict[str, int] = {}
        if restarted:
            self.restarted(core)

    def _attach(self, core) -> None:
        """Requests by id, until answered for good: an observer's ``request_log`` when the core
        has one (the simulator's ghost history), else one this hook keeps and prunes."""
        if core.request_log is None:
            core.request_log = {}
            self._owns_log = True
        else:
            self._owns_log = False
        self.reqs = core.request_log

    def _prune(self) -> None:
        """Forget the requests the core forgot that no deadline can answer again (bounded memory)."""
        if self._owns_log and len(self.reqs) > len(self.core.requests):
            live = self.core.requests
            for req_id in [i for i, r in self.reqs.items() if i not in live and not r.flush_deadline_pending]:
                del self.reqs[req_id]

    def seq_recover(self, records: int) -> None:
        index = self.core.log.index
        # The records before the window are older segments' (recovery keeps them as they were).
        window = list(index.keys[:records - index.base_records])
        log = window if index.base_records == 0 else {"take": index.base_records, "append": window}
        self.step("Recover", {"mstate": "UP", "log": log, "committed": records, "flushed": records,
                              "writable": True})

    def restarted(self, core) -> None:
        """The runtime started a new core after a crash: the crash it went through (it cannot
        tell a process crash from a power loss, nor see either), then where it recovered to."""
        self.core = core
        self._attach(core)
        self.committed = self.flushed = core.log.records_upto(core.log.committed)
        self.acks = {}
        self.step(["MasterProcessCrash", "MasterMachineCrash"], {})
        self.seq_recover(core.log.records_upto(core.log.committed))

    def _records(self, offset: int) -> int:
        return self.core.log.records_upto(offset)

    def event(self, now_ms: int | None = None) -> None:
        core = self.core
        labels, core.spec_steps[:] = list(core.spec_steps), []
        for label in labels:
            kind = label[0]
            if kind in ("Put", "WriteFail") and label[1] is not None:
                req = self.reqs[label[1]]
                status = req.status.name if req.status is not None else None
                if kind == "Put" and status == "SERVICE_NOT_AVAILABLE" and req.next_offset == 0:
                    obs = {"reqs": {"append": [{"off": 0, "flushDone": False, "status": status}]}}
                else:
                    off = self._records(req.next_offset)
                    failed = kind == "WriteFail" and status == "UNKNOWN_ERROR"
                    obs = {"log": {"append": [req.key]},
                           "reqs": {"append": [{"off": off, "flushDone": not core.cfg.sync_flush and not failed,
                                                "status": "UNKNOWN_ERROR" if failed else "WAITING"}]}}
                    if kind == "WriteFail":
                        obs["writable"] = False
                    elif not core.cfg.transient_store_pool_enable:
                        obs["committed"] = self.committed = off
                self.step(kind, obs, now_ms, key=req.key)
            elif kind == "WriteFail":
                self.step("WriteFail", {"writable": False}, now_ms)
            elif kind == "Commit":
                if label[1] != self.committed:
                    self.committed = label[1]
                    self.step("Commit", {"committed": label[1]}, now_ms)
            elif kind == "Flush":
                if label[1] != self.flushed:
                    self.flushed = label[1]
                    self.step("Flush", {"flushed": label[1]}, now_ms)
            elif kind == "FlushFail":
                if label[1] is not None:
                    self.flushed = label[1]
                self.step("FlushFail", {"writable": False} if label[1] is None else {"flushed": label[1]}, now_ms)
            elif kind in ("Respond", "Timeout"):
                req = self.reqs[label[1]]
                status = "PUT_OK" if kind == "Respond" else label[2]
                self.step(f"{kind}({req.key})", {"reqs": {"set": {str(req.key): {"status": status}}}}, now_ms)
            elif kind == "ReplicaConnect":
                name = label[1]
                hc = core.conns[name]
                self.acks[name] = hc.ack_records
                self.step(f"ReplicaConnect({name})", {"connected": {name: True}, "ack": {name: hc.ack_records}},
                          now_ms, conn=self.conn_id(hc.conn))
            elif kind == "ReplicaAck":
                name, claimed = label[1], label[2]
                hc = core.conns.get(name)
                if hc is not None and claimed <= self.acks.get(name, 0):
                    continue                   # a report that completes no new record
                self.acks[name] = claimed if hc is not None else 0
                obs = {"ack": {name: claimed}} if hc is not None else {"connected": {name: False}, "ack": {name: 0}}
                self.step([f"ReplicaAck({name})", f"ForgedAck({name})"], obs, now_ms)
            elif kind == "ReplicaDisconnect":
                self.acks.pop(label[1], None)
                self.step(f"ReplicaDisconnect({label[1]})", {"connected": {label[1]: False}, "ack": {label[1]: 0}},
                          now_ms)
            else:
                raise AssertionError(f"unknown spec step {label}")
        self._prune()

    def connection_lost(self, name: str, conn, now_ms: int | None = None) -> None:
        """An accepted slave connection closed from the other side (spec: ReplicaDisconnect)."""
        self.acks.pop(name, None)
        self.step(f"ReplicaDisconnect({name})", {"connected": {name: False}, "ack": {name: 0}}, now_ms,
                  conn=self.conn_id(conn))


class ReplicaTraceHook(_Writer):
    """A slave's trace: ``ReplicaTraceHook(out, core, restarted=...)``; ``connecting(conn, now_ms)``
    when it sends its HANDSHAKE, ``event(now_ms)`` after every core event.  A slave does not know the
    master's configuration: its file gives none and takes the master's when they are merged."""

    def __init__(self, out, core, restarted: bool = False, conn_id=str) -> None:
        name = core.name
        super().__init__(out, name, None, tf.replica_observes(name))
        self.core, self.name, self.conn_id = core, name, conn_id
        self.records = core.index.count
        if restarted:
            self.restarted(core)

    def restarted(self, core) -> None:
        """The runtime started a new core after a crash (the page cache kept the records)."""
        self.core = core
        self.records = core.index.count
        self.step(f"ReplicaCrash({self.name})", {"rUp": {self.name: False}})
        self.step(f"ReplicaRestart({self.name})", {"rUp": {self.name: True}})

    def connecting(self, conn, now_ms: int | None = None) -> None:
        self.note("HANDSHAKE", now_ms, records=self.core.index.count, conn=self.conn_id(conn))

    def event(self, now_ms: int | None = None) -> None:
        core = self.core
        labels, core.spec_steps[:] = list(core.spec_steps), []
        for label in labels:
            assert label[0] == "Transfer", label
            self.records += 1
            self.step(f"Transfer({self.name})", {"rlog": {self.name: {"append": [label[2]]}}}, now_ms)


# ---------------------------------------------------------------------- the real runtimes' wrappers

# The event methods of each core (everything a runtime calls that can change it).  A test checks the
# lists against the cores' public methods, so a new event cannot go untraced.
MASTER_EVENTS = ("put", "tick", "writes_done", "write_done", "write_failed", "fsync_done", "fsync_failed",
                 "segment_read", "segment_read_failed", "replica_connection_opened", "replica_handshake",
                 "replica_ack", "replica_bad_input", "replica_disconnected", "replica_epoch_query")
REPLICA_EVENTS = ("connect", "heartbeat", "disconnected", "on_data", "on_bad_input")
# Events the write-path spec has no action for: a traced master refuses them.  Its SyncStateSet is
# the --replicas it started with; controller-driven changes (reference/real/node.py) are checked
# against spec/failover by reference/failover/refine.py, not by a trace.
MASTER_UNTRACED = ("change_sync_state_set", "begin_epoch", "set_confirm_view", "stop_serving")


class UntracedEvent(RuntimeError):
    """A traced core was asked for an event its trace cannot express."""


class _Traced:
    """A core as its runtime sees it, with a trace hook called after every event method: the runtime
    keeps calling ``core.put(...)`` and friends and holds no tracing or protocol logic of its own."""

    _events: tuple[str, ...] = ()
    _untraced: tuple[str, ...] = ()

    def __init__(self, core, hook, clock) -> None:
        object.__setattr__(self, "_core", core)
        object.__setattr__(self, "_hook", hook)
        object.__setattr__(self, "_clock", clock)

    def __getattr__(self, name):
        attr = getattr(self._core, name)
        if name in self._untraced:
            raise UntracedEvent(f"{name}: not an action of the write-path spec, so a traced master cannot "
                                "take it (run without --trace)")
        if name not in self._events:
            return attr

        def traced(*args, **kwargs):
            out = self._before(name, args)
            attr(*args, **kwargs)
            self._hook.event(self._clock())
            self._after(name, out)
        return traced

    def __setattr__(self, name, value) -> None:
        setattr(self._core, name, value)

    def _before(self, name, args):
        return None

    def _after(self, name, out) -> None:
        pass

    def close(self) -> None:
        self._hook.close()


class TracedMaster(_Traced):
    """``TracedMaster(core, MasterTraceHook(...), clock)``.  A slave connection that the runtime
    closes for its own reasons or that the slave closed (``replica_disconnected`` on an accepted
    one) is the spec's ReplicaDisconnect, which the core does not label (it did not decide it)."""

    _events = MASTER_EVENTS
    _untraced = MASTER_UNTRACED

    def _before(self, name, args):
        if name == "replica_disconnected":
            conn = args[0]
            return conn, self._core.name_of(conn)
        return None

    def _after(self, name, out) -> None:
        if out is not None and out[1] is not None:
            self._hook.connection_lost(out[1], out[0], self._clock())

    def close(self) -> str | None:
        """At a clean stop: the ``complete`` trailer when the master's own view shows a healed
        run (no request waiting, every slave connected and acknowledging all it committed: the
        goals a complete trace is checked against); else why the trace ends as a prefix."""
        core = self._core
        committed = core.log.records_upto(core.log.committed)
        if core.requests:
            return f"{len(core.requests)} request(s) unanswered"
        behind = [r for r in core.replicas if r not in core.conns or core.conns[r].ack_records != committed]
        if behind:
            return f"slave(s) {', '.join(behind)} not connected or not acknowledging all {committed} committed records"
        self._hook.close()
        return None


class TracedReplica(_Traced):
    """``TracedReplica(core, ReplicaTraceHook(...), clock, connection)``: ``connection()`` is the id
    of the slave's current HA connection as the master knows it (its local address), noted with
    the HANDSHAKE the core sends when it connects."""

    _events = REPLICA_EVENTS

    def __init__(self, core, hook, clock, connection) -> None:
        super().__init__(core, hook, clock)
        object.__setattr__(self, "_connection", connection)

    def _before(self, name, args):
        if name == "connect":
            # The note goes before the core's event: the Transfer steps of the connection follow it.
            self._hook.connecting(self._connection(), self._clock())
        return None
