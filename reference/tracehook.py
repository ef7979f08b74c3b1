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
"""

from __future__ import annotations

import json

from spec import traceformat as tf
from spec.config import Config

TLC_MAX_FILE_SIZE = 1 << 30


def _name(var: str, r: str | None) -> str:
    return f"{var}[{r}]" if r else var


class _Writer:
    def __init__(self, out, process: str, cfg: Config, observes, bugs=()) -> None:
        self.out = out
        self.seq = 0
        cfg = Config(replicas=cfg.replicas, flush_mode=cfg.flush_mode, repl_mode=cfg.repl_mode,
                     transient_store_pool=cfg.transient_store_pool, ack_policy=cfg.ack_policy,
                     in_sync_replicas=cfg.in_sync_replicas, file_size=min(cfg.file_size, TLC_MAX_FILE_SIZE),
                     commit_on_replica_wait=cfg.commit_on_replica_wait)
        self.cfg = cfg
        self._line(tf.header(process, cfg, observes, "keys", bugs, f"{process} runtime"))

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
        # The core reports every watermark move and ack it handles; the spec counts whole records,
        # so a label that moves nothing in records is no spec step (as reference/refinement.py reads it).
        self.committed = self.flushed = 0
        self.acks: dict[str, int] = {}
        if restarted:
            self.restarted(core)

    def seq_recover(self, records: int) -> None:
        keys = list(self.core.log.index.keys[:records])
        self.step("Recover", {"mstate": "UP", "log": keys, "committed": records, "flushed": records,
                              "writable": True})

    def restarted(self, core) -> None:
        """The runtime started a new core after a crash: the crash it went through (it cannot
        tell a process crash from a power loss, nor see either), then where it recovered to."""
        self.core = core
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
                req = core.requests[label[1]]
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
                req = core.requests[label[1]]
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

    def connection_lost(self, name: str, conn, now_ms: int | None = None) -> None:
        """An accepted slave connection closed from the other side (spec: ReplicaDisconnect)."""
        self.acks.pop(name, None)
        self.step(f"ReplicaDisconnect({name})", {"connected": {name: False}, "ack": {name: 0}}, now_ms,
                  conn=self.conn_id(conn))


class ReplicaTraceHook(_Writer):
    """A slave's trace: ``ReplicaTraceHook(out, core, spec_cfg, restarted=...)``; ``connecting(conn,
    now_ms)`` when it sends its HANDSHAKE, ``event(now_ms)`` after every core event."""

    def __init__(self, out, core, spec_cfg: Config, restarted: bool = False, conn_id=str) -> None:
        name = core.name
        super().__init__(out, name, spec_cfg, tf.replica_observes(name))
        self.core, self.name, self.conn_id = core, name, conn_id
        self.records = len(core.index.keys)
        if restarted:
            self.restarted(core)

    def restarted(self, core) -> None:
        """The runtime started a new core after a crash (the page cache kept the records)."""
        self.core = core
        self.records = len(core.index.keys)
        self.step(f"ReplicaCrash({self.name})", {"rUp": {self.name: False}})
        self.step(f"ReplicaRestart({self.name})", {"rUp": {self.name: True}})

    def connecting(self, conn, now_ms: int | None = None) -> None:
        self.note("HANDSHAKE", now_ms, records=len(self.core.index.ends), conn=self.conn_id(conn))

    def event(self, now_ms: int | None = None) -> None:
        core = self.core
        labels, core.spec_steps[:] = list(core.spec_steps), []
        for label in labels:
            assert label[0] == "Transfer", label
            key = core.index.keys[self.records]
            self.records += 1
            self.step(f"Transfer({self.name})", {"rlog": {self.name: {"append": [key]}}}, now_ms)
