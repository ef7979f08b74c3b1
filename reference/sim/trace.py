"""The simulator's trace writer: every spec step a run took, in the trace format of
spec/traceformat.py (version 1), for `ackorder trace-check` and `--twin`.

The simulator sees every variable (process ``sim``), so each step's ``obs`` is what it changed
and everything else is unchanged; each step also names the process that performed or first saw it
(``proc``), and each HA handshake a slave sends is a ``HANDSHAKE`` note, so that a run's trace can be
split into the files a master and its replicas would each write (``split``) and merged back.

Every CHECKPOINT_EVERY_STEPS steps the writer also gives the whole state (a checkpoint): a checker
verifies that the steps reach it, and TLC checks the trace in segments from one checkpoint to the
next (tla/tracecheck.py), each the size of a short trace, not one module of every step.
"""

from __future__ import annotations

import json

import attrs

from spec import traceformat as tf
from spec.config import Config
from spec.state import State

# Steps a replica performs (or, for its crash and restart, is the one to know of); the rest are the
# master's, its crashes included (a restarted master knows it went down).
REPLICA_STEPS = frozenset({"Transfer", "ReplicaCrash", "ReplicaRestart"})
TLC_MAX_FILE_SIZE = 1 << 30     # TLC's integers are 32-bit; any size beyond a trace's records is the same
# Half a TLC batch (tla/tracecheck.py's MAX_BATCH_STEPS), so that two segments share a TLC run; a
# checkpoint's line (the whole state) is written a few dozen times in a long run.
CHECKPOINT_EVERY_STEPS = 10_000


def trace_config(cfg: Config) -> Config:
    """The spec configuration a trace is checked against: the implementation's, every bug switch off."""
    return attrs.evolve(cfg, file_size=min(cfg.file_size, TLC_MAX_FILE_SIZE), bugs=frozenset())


def step_process(label: str) -> str:
    name, _, param = label.partition("(")
    return param.rstrip(")") if name in REPLICA_STEPS else "master"


class TraceWriter:
    """Writes one run's trace to a text stream, line by line as the run goes."""

    def __init__(self, out, cfg: Config, bugs=(), source: str = "", accepted_conn=lambda name: None,
                 checkpoint_every_steps: int | None = None) -> None:
        self.out = out
        self.cfg = trace_config(cfg)
        self.seq = 0
        self.spec_steps = 0
        # None: the module's interval, read now (a test sets a short one); 0: no checkpoints
        self.checkpoint_every_steps = CHECKPOINT_EVERY_STEPS if checkpoint_every_steps is None \
            else checkpoint_every_steps
        self.closed = False
        self.accepted_conn = accepted_conn    # the connection the master accepted for a slave, if any
        self.conns: dict[str, int] = {}       # slave -> the connection its steps are about
        self._line(tf.header("sim", self.cfg, tf.SIM_OBSERVES, bugs=bugs, source=source))

    def _line(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def steps(self, before: State, taken: list[tuple[str, State]], now_ms: int, what: str) -> None:
        for label, state in taken:
            self.seq += 1
            name, _, param = label.partition("(")
            line = {"seq": self.seq, "proc": step_process(label), "action": label,
                    "obs": tf.step_obs(self.cfg, before, state), "t_ms": now_ms, "what": what}
            if param and name not in ("Respond", "Timeout", "ReplicaRestart"):
                slave = param.rstrip(")")
                if name == "ReplicaConnect":
                    self.conns[slave] = self.accepted_conn(slave)
                if self.conns.get(slave) is not None:
                    line["conn"] = self.conns[slave]
            self._line(line)
            before = state
            self.spec_steps += 1
            if self.checkpoint_every_steps and self.spec_steps % self.checkpoint_every_steps == 0:
                self.seq += 1
                self._line({"seq": self.seq, "checkpoint": tf.checkpoint_json(self.cfg, state), "t_ms": now_ms})

    def note(self, proc: str, note: str, now_ms: int, **data) -> None:
        self.seq += 1
        self._line({"seq": self.seq, "proc": proc, "note": note, **data, "t_ms": now_ms})

    def end(self, complete: bool, violation: tuple[str, str] | None = None, now_ms: int | None = None) -> None:
        """The trailer: ``complete`` when the run healed to its end (or a request outlived its
        deadlines), and the run's own verdict."""
        if self.closed:
            return
        self.closed = True
        if complete:
            self._line({"end": "complete", "t_ms": now_ms})
        if violation is not None:
            self._line({"violation": violation[0], "message": violation[1]})


# ------------------------------------------------------------------ per-process files

KEY_BASE = 1000     # producer keys of a split run: request id + KEY_BASE, so that the merge must translate


def split(text: str, path: str = "sim.ndjson") -> dict[str, str]:
    """The files a master and each replica would have written for this simulator run: each sees
    only its own variables, names requests by producer key, and writes the steps it performed or
    saw.  A replica's crash while connected is two steps (the master sees the connection drop, the
    restarted replica knows it crashed); a master's crash is written by the restarted master, which
    cannot tell a process crash from a power loss and observes neither; the master cannot tell a
    forged ack from a true one."""
    trace = tf.read_trace(path, text)
    cfg = trace.config
    pool = cfg.transient_store_pool
    files: dict[str, list[str]] = {"master": [json.dumps(tf.header("master", cfg, tf.MASTER_OBSERVES, "keys",
                                                                     trace.bugs, f"split from {path}"))]}
    for r in cfg.replicas:
        files[r] = [json.dumps(tf.header(r, cfg, tf.replica_observes(r), "keys", trace.bugs, f"split from {path}"))]
    seq = {p: 0 for p in files}
    master_vars = set(tf.MASTER_OBSERVES)

    def key(v):
        return v if v == tf.TORN else v + KEY_BASE

    def keyed(obs: dict) -> dict:
        out = dict(obs)
        if "log" in out:
            out["log"] = _keyed_seq(out["log"], key)
        if "rlog" in out:
            out["rlog"] = {r: _keyed_seq(v, key) for r, v in out["rlog"].items()}
        if isinstance(out.get("reqs"), dict) and "set" in out["reqs"]:
            out["reqs"] = {**out["reqs"], "set": {str(key(int(i))): f for i, f in out["reqs"]["set"].items()}}
        return out

    def emit(proc: str, obj: dict) -> None:
        seq[proc] += 1
        files[proc].append(json.dumps({"seq": seq[proc], **obj}, separators=(",", ":")))

    requests = committed = 0
    log: list = []
    crashed, before_crash = False, []
    items = sorted([*trace.steps, *trace.notes], key=lambda x: x.seq)
    for x in items:
        if isinstance(x, tf.Note):
            emit(x.proc, {"note": x.note, **{k: v for k, v in x.data.items() if k not in ("seq", "proc", "note")}})
            continue
        (action, param), = x.actions
        committed = x.obs.get("committed", committed)     # the sim observes every variable
        if action in ("MasterProcessCrash", "MasterMachineCrash") and not crashed:
            crashed, before_crash = True, list(log)
        if "log" in x.obs:
            log = _apply(x.obs["log"], log)
        obs = keyed(x.obs)
        extra = {"t_ms": x.t_ms, "what": x.what, **({"conn": x.conn} if x.conn is not None else {})}
        if action == "Put" or (action == "WriteFail" and not pool):
            requests += 1
            extra["key"] = key(requests)
        label = tf.label_text(action, key(param) if action in ("Respond", "Timeout") else param)
        master_obs = {k: v for k, v in obs.items() if k in master_vars}
        if action in ("Transfer", "ReplicaRestart"):
            emit(param, {"action": label, "obs": _replica_obs(obs, param), **extra})
        elif action == "ReplicaCrash":
            if master_obs.get("connected", {}).get(param) is False:    # the master sees the connection drop
                emit("master", {"action": f"ReplicaDisconnect({param})", "obs": master_obs, **extra})
            emit(param, {"action": label, "obs": _replica_obs(obs, param), **extra})
        elif action in ("MasterProcessCrash", "MasterMachineCrash"):
            emit("master", {"action": ["MasterProcessCrash", "MasterMachineCrash"], "observes": [], "obs": {},
                            **extra})
        elif action in ("ReplicaAck", "ForgedAck"):
            emit("master", {"action": [f"ReplicaAck({param})", f"ForgedAck({param})"], "obs": master_obs, **extra})
        else:
            if action == "Recover":         # a restarted master knows where it stands
                # A restarted master knows where it stands: its watermark, and the log it recovered
                # (relative to the one it had before the crash it did not see).
                master_obs.setdefault("committed", committed)
                common = next((i for i, (a, b) in enumerate(zip(before_crash, log)) if a != b),
                              min(len(before_crash), len(log)))
                master_obs["log"] = {"take": common, "append": [key(v) for v in log[common:]]}
                crashed = False
            emit("master", {"action": label, "obs": master_obs, **{k: v for k, v in extra.items() if v is not None}})
    for proc, lines in files.items():
        if trace.complete:
            lines.append(json.dumps({"end": "complete"}))
    return {proc: "\n".join(lines) + "\n" for proc, lines in files.items()}


def _apply(obs, current: list) -> list:
    if isinstance(obs, list):
        return list(obs)
    return current[: obs.get("take", len(current))] + list(obs.get("append", ()))


def _keyed_seq(obs, key):
    if isinstance(obs, list):
        return [key(v) for v in obs]
    return {**obs, **({"append": [key(v) for v in obs["append"]]} if "append" in obs else {})}


def _replica_obs(obs: dict, r: str) -> dict:
    return {var: {r: obs[var][r]} for var in ("rlog", "rUp") if r in obs.get(var, {})}
