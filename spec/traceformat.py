"""The ackorder trace format (NDJSON, version 1): what an implementation did, in the spec's vocabulary.

A trace file is one JSON object per line.  The first line is the header::

    {"ackorder_trace": 1, "process": "master", "ids": "keys",
     "config": {"Replicas": ["r1", "r2"], "FlushMode": "SYNC_FLUSH", "ReplMode": "SYNC_MASTER",
                "TransientStorePool": false, "AckPolicy": "ALL_IN_SYNC", "InSyncReplicas": 2,
                "FileSize": 1000000000000, "CommitOnReplicaWait": false},
     "observes": ["mstate", "log", "committed", "flushed", "writable", "reqs", "connected", "ack",
                  "push2SlaveMaxOffset", "syncStateSet"],
     "bugs": [], "source": "how the trace was made"}

A slave's runtime does not know the master's configuration (flush mode, role, the other slaves):
its file may leave ``config`` out, and takes the configuration of the files it is merged with
(spec/tracemerge.py), which must name it among their ``Replicas``.

``process`` names who wrote the file (``master``, a replica's name, or ``sim`` for a simulator that
sees everything); ``observes`` the TLA+ variables it sees, whole (``log``) or one replica's entry of a
per-replica function (``rlog[r1]``).  ``ids`` says how requests are named: ``spec`` (the spec's
request ids, 1, 2, ... in put order) or ``keys`` (producer keys, turned into spec ids when the files
are merged, by the order of the events that create requests).  ``bugs`` records the switches the
implementation ran with: information only, a trace is always checked against the correct spec.

Every other line is a spec step, a note, or a trailer:

* step: ``{"seq": 7, "action": "Respond(1)", "obs": {...}, "t_ms": 12, "what": "fsync done"}``.
  ``action`` is a TLA+ action with its parameter as the twin names it (``Put``, ``Flush``,
  ``Transfer(r1)``, ``Timeout(2)``), or a list of such when the writer cannot tell them apart (a
  master cannot tell ``ReplicaAck`` from ``ForgedAck``).  ``obs`` gives the variables the step
  changed, in forms linear in the trace's length:

  - a scalar or a set: its new value (``"flushed": 3``, ``"unwritten": [4]``);
  - ``log`` and each ``rlog`` entry: a whole list, ``{"append": [...]}``, or
    ``{"take": n, "append": [...]}`` (the first n records, then those);
  - ``reqs``: a whole list, or ``{"append": [{"off": 1, "flushDone": false, "status": "WAITING"}],
    "set": {"2": {"status": "PUT_OK"}}}`` (fields of requests, by request id, after the append);
  - ``connected``, ``ack``, ``rUp``, ``rlog``: ``{"r1": value, ...}``, one entry per replica seen.

  A variable the file observes and the step does not mention is unchanged; a variable it does not
  observe is the checker's to search.  ``observes`` on a step overrides the header for that step
  (a restarted master writes the crash it went through with ``"observes": []``).  A request-creating
  step (``Put``, or ``WriteFail`` without the transient store pool) carries ``"key": k`` in a
  ``keys`` file.  ``after``: ``[["r1", 5], ...]``, steps (process, seq) this one causally follows,
  for merging files; HA data gives most of that order without them (see spec/tracemerge.py).
  ``conn``: the HA connection a step is about (ReplicaConnect, ReplicaAck, ForgedAck,
  ReplicaDisconnect, ReplicaCrash, Transfer), an id both ends know (the slave's
  "host:port"): the merge pairs the two ends' steps by it.
* note: ``{"seq": 3, "note": "HANDSHAKE", "records": 2, "conn": "10.0.0.2:40312"}``: not a spec
  step, a causal anchor (a replica's HA handshake on that connection, which the master's
  ``ReplicaConnect`` with the same ``conn`` follows when it accepts it).
* trailer: ``{"end": "complete"}``: the writer let the system heal and stopped where nothing more
  would happen (or a request outlived both deadlines): the last state must then have every request
  answered and every replica caught up or diverged (the goals of EveryRequestAnswered and
  ReplicasCatchUp).  ``{"violation": P, "message": M}``: the writer's own verdict (reported, never
  trusted).

``read_trace`` validates all of it and names the file and line of any problem (TraceError).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import attrs

from spec.config import ACK_POLICIES, FLUSH_MODES, REPL_MODES, Config, ConfigError
from spec.state import CAUSES, MASTER_STATES, STATUSES, TORN, WAITING, Request, State

VERSION = 1
MAX_LINE_BYTES = 1 << 20

# The TLA+ variables an implementation can observe, and how each is shaped.
SCALARS = {"mstate": str, "committed": int, "flushed": int, "durable": int, "writable": bool,
           "landed": int, "push2SlaveMaxOffset": int}
SETS = {"unwritten": int, "syncStateSet": str}
PER_REPLICA = {"connected": bool, "ack": int, "rUp": bool, "rlog": "seq"}
SEQUENCES = ("log",)
VARIABLES = ("mstate", "log", "committed", "flushed", "durable", "writable", "unwritten", "landed", "reqs",
             "connected", "ack", "push2SlaveMaxOffset", "syncStateSet", "rlog", "rUp")
GHOSTS = ("inv_responses", "aux_ctrs")       # derived by the spec, never observed

# What each kind of process sees (a process sees only its own variables).
MASTER_OBSERVES = ("mstate", "log", "committed", "flushed", "writable", "reqs", "connected", "ack",
                   "push2SlaveMaxOffset", "syncStateSet")
SIM_OBSERVES = VARIABLES


def replica_observes(name: str) -> tuple[str, ...]:
    return (f"rlog[{name}]", f"rUp[{name}]")


ACTIONS_NO_PARAM = ("Put", "Commit", "Flush", "FlushFail", "WriteFail", "MasterProcessCrash",
                    "MasterMachineCrash", "Recover")
ACTIONS_REQUEST = ("Respond", "Timeout")
ACTIONS_REPLICA = ("ReplicaConnect", "Transfer", "ReplicaAck", "ForgedAck", "ReplicaDisconnect",
                   "ReplicaCrash", "ReplicaRestart")
ACTIONS = ACTIONS_NO_PARAM + ACTIONS_REQUEST + ACTIONS_REPLICA
REQUEST_CREATING = ("Put", "WriteFail")     # WriteFail creates a request only without the pool
REQUEST_FIELDS = {"off": int, "flushDone": bool, "status": str}

REPLICA_NAME = r"[A-Za-z_]\w*"      # a TLA+ model value
_LABEL = re.compile(r"^([A-Za-z]+)(?:\(([A-Za-z0-9_]+)\))?$")


class TraceError(ConfigError):
    """A malformed trace; the message starts with ``file:line:``."""


# ------------------------------------------------------------------ the parsed trace

Name = tuple[str, str | None]      # an observable: (variable, replica or None)


@attrs.frozen
class Step:
    """One spec step of a trace (or of a merge of traces)."""
    file: str
    line: int
    proc: str
    seq: int
    actions: tuple[tuple[str, object], ...]      # (action, parameter) alternatives
    obs: dict = attrs.field(eq=False, hash=False, repr=False)   # validated "obs" object
    observes: frozenset[Name]                    # what this step vouches for (mentioned or unchanged)
    key: int | None = None                       # producer key of the request it creates
    after: tuple[tuple[str, int], ...] = ()
    t_ms: int | None = None
    what: str | None = None
    conn: str | int | None = None                # the HA connection the step is about

    @property
    def label(self) -> str:
        return " | ".join(label_text(a, p) for a, p in self.actions)

    def mentioned(self) -> frozenset[Name]:
        return frozenset(mentioned_names(self.obs))

    def where(self) -> str:
        return f"{self.file}:{self.line}"


@attrs.frozen
class Note:
    file: str
    line: int
    proc: str
    seq: int
    note: str
    data: dict = attrs.field(eq=False, hash=False, repr=False)


@attrs.frozen
class Trace:
    path: str
    process: str
    config: Config
    ids: str                          # "spec" or "keys"
    observes: frozenset[Name]
    steps: tuple[Step, ...]
    notes: tuple[Note, ...] = ()
    complete: bool = False
    writer_verdict: tuple[str, str] | None = None
    bugs: tuple[str, ...] = ()
    source: str = ""
    header: dict = attrs.field(factory=dict, eq=False, hash=False, repr=False)
    config_known: bool = True         # False: a slave's file without "config" (the merge supplies it)


def label_text(action: str, param) -> str:
    return action if param is None else f"{action}({param})"


def mentioned_names(obs: dict) -> Iterable[Name]:
    for var, value in obs.items():
        if var in PER_REPLICA:
            for r in value:
                yield (var, r)
        else:
            yield (var, None)


def expand_observes(names: Iterable[str], replicas: tuple[str, ...], where: str) -> frozenset[Name]:
    """Header or step ``observes`` entries to (variable, replica) names."""
    out: set[Name] = set()
    for entry in names:
        if not isinstance(entry, str):
            raise TraceError(f"{where}: observes: expected variable names, got {entry!r}")
        m = re.fullmatch(r"(\w+)(?:\[(\w+)\])?", entry)
        var, r = (m.group(1), m.group(2)) if m else (entry, None)
        if var in GHOSTS:
            raise TraceError(f"{where}: observes: {var} is ghost state, derived by the spec, never observed")
        if m is None or var not in VARIABLES:
            raise TraceError(f"{where}: observes: unknown variable {entry!r}; known: {', '.join(VARIABLES)}")
        if var in PER_REPLICA:
            if r is not None and r not in replicas:
                raise TraceError(f"{where}: observes: {entry!r} names no replica of the configuration")
            out |= {(var, x) for x in ([r] if r else replicas)}
        elif r is not None:
            raise TraceError(f"{where}: observes: {var} is not a per-replica variable")
        else:
            out.add((var, None))
    return frozenset(out)


# ------------------------------------------------------------------ header and configuration

CONFIG_KEYS = ("Replicas", "FlushMode", "ReplMode", "TransientStorePool", "AckPolicy", "InSyncReplicas",
               "FileSize", "CommitOnReplicaWait")


def config_to_json(cfg: Config) -> dict:
    return {"Replicas": list(cfg.replicas), "FlushMode": cfg.flush_mode, "ReplMode": cfg.repl_mode,
            "TransientStorePool": cfg.transient_store_pool, "AckPolicy": cfg.ack_policy,
            "InSyncReplicas": cfg.in_sync_replicas, "FileSize": cfg.file_size,
            "CommitOnReplicaWait": cfg.commit_on_replica_wait}


def config_from_json(c: object, where: str) -> Config:
    """The spec configuration of a header, always with every bug switch off."""
    if not isinstance(c, dict):
        raise TraceError(f"{where}: config: expected an object with {', '.join(CONFIG_KEYS)}")
    missing = [k for k in CONFIG_KEYS if k not in c]
    unknown = sorted(set(c) - set(CONFIG_KEYS))
    if missing or unknown:
        raise TraceError(f"{where}: config: " + "; ".join(
            ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown {', '.join(unknown)}"] if unknown else [])))
    reps = c["Replicas"]
    if not isinstance(reps, list) or not all(isinstance(r, str) and re.fullmatch(REPLICA_NAME, r) for r in reps):
        raise TraceError(f"{where}: config.Replicas: expected a list of names such as \"r1\"")
    checks = {"FlushMode": FLUSH_MODES, "ReplMode": REPL_MODES, "AckPolicy": ACK_POLICIES}
    for key, allowed in checks.items():
        if c[key] not in allowed:
            raise TraceError(f"{where}: config.{key} = {c[key]!r}: must be one of {', '.join(allowed)}")
    for key in ("TransientStorePool", "CommitOnReplicaWait"):
        if not isinstance(c[key], bool):
            raise TraceError(f"{where}: config.{key}: expected true or false")
    for key in ("InSyncReplicas", "FileSize"):
        if not _nat(c[key]):
            raise TraceError(f"{where}: config.{key}: expected a natural number")
    try:
        return Config(replicas=tuple(reps), flush_mode=c["FlushMode"], repl_mode=c["ReplMode"],
                      transient_store_pool=c["TransientStorePool"], ack_policy=c["AckPolicy"],
                      in_sync_replicas=c["InSyncReplicas"], file_size=c["FileSize"],
                      commit_on_replica_wait=c["CommitOnReplicaWait"])
    except ConfigError as err:
        raise TraceError(f"{where}: config: {err}") from None


def header(process: str, cfg: Config | None, observes: Iterable[str], ids: str = "spec", bugs: Iterable[str] = (),
           source: str = "") -> dict:
    """A file's first line (``cfg`` None: a slave that does not know the configuration)."""
    head = {"ackorder_trace": VERSION, "process": process, "ids": ids, "config": None,
            "observes": list(observes), "bugs": sorted(bugs), "source": source}
    if cfg is None:
        del head["config"]
    else:
        head["config"] = config_to_json(cfg)
    return head


# ------------------------------------------------------------------ validating one line

def _nat(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _typed(v, typ) -> bool:
    if typ is int:
        return _nat(v)
    return isinstance(v, typ)


class _Line:
    """Validation of one line, with the place in every message."""

    def __init__(self, where: str, cfg: Config) -> None:
        self.where, self.cfg = where, cfg

    def fail(self, what: str):
        raise TraceError(f"{self.where}: {what}")

    def seq_values(self, path: str, v) -> None:
        if not isinstance(v, list) or not all(_nat(x) for x in v):
            self.fail(f"{path}: expected a list of record values (request ids or keys, {TORN} for a torn record)")

    def seq_obs(self, path: str, v) -> None:
        if isinstance(v, list):
            return self.seq_values(path, v)
        if not isinstance(v, dict) or not v or set(v) - {"append", "take"}:
            self.fail(f"{path}: expected a list, {{\"append\": [...]}} or {{\"take\": n, \"append\": [...]}}")
        if "take" in v and not _nat(v["take"]):
            self.fail(f"{path}.take: expected a natural number")
        self.seq_values(f"{path}.append", v.get("append", []))

    def request(self, path: str, v, partial: bool) -> None:
        if not isinstance(v, dict):
            self.fail(f"{path}: expected a request object with {', '.join(REQUEST_FIELDS)}")
        unknown = set(v) - set(REQUEST_FIELDS)
        if unknown:
            self.fail(f"{path}: unknown request fields {', '.join(sorted(unknown))}")
        if not partial and set(v) != set(REQUEST_FIELDS):
            self.fail(f"{path}: a new request needs {', '.join(REQUEST_FIELDS)}")
        if not v:
            self.fail(f"{path}: an empty change")
        for k, x in v.items():
            if not _typed(x, REQUEST_FIELDS[k]):
                self.fail(f"{path}.{k}: expected {REQUEST_FIELDS[k].__name__}")
        if "status" in v and v["status"] not in STATUSES | {WAITING}:
            self.fail(f"{path}.status: {v['status']!r} is not a status ({', '.join(sorted(STATUSES | {WAITING}))})")

    def reqs_obs(self, v) -> None:
        if isinstance(v, list):
            for i, r in enumerate(v, 1):
                self.request(f"obs.reqs[{i}]", r, partial=False)
            return
        if not isinstance(v, dict) or not v or set(v) - {"append", "set"}:
            self.fail("obs.reqs: expected a list, or {\"append\": [...], \"set\": {\"id\": {...}}}")
        if not isinstance(v.get("append", []), list):
            self.fail("obs.reqs.append: expected a list of requests")
        for i, r in enumerate(v.get("append", []), 1):
            self.request(f"obs.reqs.append[{i}]", r, partial=False)
        changes = v.get("set", {})
        if not isinstance(changes, dict):
            self.fail("obs.reqs.set: expected an object keyed by request id")
        for key, r in changes.items():
            if not (key.isdigit() and int(key) >= 1):
                self.fail(f"obs.reqs.set: {key!r} is not a request id")
            self.request(f"obs.reqs.set.{key}", r, partial=True)

    def obs(self, obs) -> None:
        if not isinstance(obs, dict):
            self.fail("obs: expected an object of variables")
        for var, v in obs.items():
            if var in GHOSTS:
                self.fail(f"obs.{var}: ghost state is derived by the spec, never observed")
            if var in SCALARS:
                if not _typed(v, SCALARS[var]):
                    self.fail(f"obs.{var}: expected {SCALARS[var].__name__}, got {v!r}")
                if var == "mstate" and v not in MASTER_STATES:
                    self.fail(f"obs.mstate: {v!r} is not one of {', '.join(sorted(MASTER_STATES))}")
            elif var in SETS:
                if not isinstance(v, list) or not all(_typed(x, SETS[var]) for x in v):
                    self.fail(f"obs.{var}: expected a list (a set) of {SETS[var].__name__}")
                if var == "syncStateSet" and not set(v) <= set(self.cfg.replicas):
                    self.fail(f"obs.syncStateSet: names no replica of the configuration: {v!r}")
            elif var in SEQUENCES:
                self.seq_obs(f"obs.{var}", v)
            elif var == "reqs":
                self.reqs_obs(v)
            elif var in PER_REPLICA:
                if not isinstance(v, dict) or not v:
                    self.fail(f"obs.{var}: expected {{\"replica\": value}}")
                for r, x in v.items():
                    if r not in self.cfg.replicas:
                        self.fail(f"obs.{var}: {r!r} is not a replica of the configuration "
                                  f"({', '.join(self.cfg.replicas)})")
                    if PER_REPLICA[var] == "seq":
                        self.seq_obs(f"obs.{var}.{r}", x)
                    elif not _typed(x, PER_REPLICA[var]):
                        self.fail(f"obs.{var}.{r}: expected {PER_REPLICA[var].__name__}, got {x!r}")
            else:
                self.fail(f"obs: unknown variable {var!r}; known: {', '.join(VARIABLES)}")

    def actions(self, v) -> tuple[tuple[str, object], ...]:
        labels = v if isinstance(v, list) else [v]
        if not labels:
            self.fail("action: an empty list of alternatives")
        out = []
        for label in labels:
            m = _LABEL.match(label) if isinstance(label, str) else None
            if m is None:
                self.fail(f"action: {label!r} is not an action label such as \"Put\" or \"Respond(2)\"")
            name, param = m.group(1), m.group(2)
            if name not in ACTIONS:
                self.fail(f"action: unknown action {name!r}; known: {', '.join(ACTIONS)}")
            if name in ACTIONS_NO_PARAM:
                if param is not None:
                    self.fail(f"action: {name} takes no parameter")
            elif name in ACTIONS_REQUEST:
                if param is None or not param.isdigit() or int(param) < 1:
                    self.fail(f"action: {name} takes a request id, as in {name}(1)")
                param = int(param)
            elif param not in self.cfg.replicas:
                self.fail(f"action: {name} takes a replica of the configuration "
                          f"({', '.join(self.cfg.replicas)}), got {param!r}")
            out.append((name, param))
        return tuple(out)


# ------------------------------------------------------------------ reading

def read_trace(path: Path | str, text: str | None = None) -> Trace:
    """Parse and validate one trace file (TraceError names the file and line of a problem)."""
    path = Path(path)
    name = str(path)
    if text is None:
        try:
            data = path.read_bytes()
        except OSError as err:
            raise TraceError(f"{name}: cannot read: {err.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceError(f"{name}: not a UTF-8 text file") from None
    lines = text.split("\n")
    objects: list[tuple[int, dict]] = []
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"{name}:{lineno}"
        if len(raw) > MAX_LINE_BYTES:
            raise TraceError(f"{where}: line longer than {MAX_LINE_BYTES} bytes")
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            raise TraceError(f"{where}: invalid JSON at column {err.colno}: {err.msg}") from None
        if not isinstance(obj, dict):
            raise TraceError(f"{where}: expected a JSON object")
        objects.append((lineno, obj))
    if not objects:
        raise TraceError(f"{name}: empty trace (no header line)")
    lineno, head = objects[0]
    where = f"{name}:{lineno}"
    if "ackorder_trace" not in head:
        raise TraceError(f"{where}: the first line must be the header {{\"ackorder_trace\": {VERSION}, ...}}")
    if head["ackorder_trace"] != VERSION:
        raise TraceError(f"{where}: trace format version {head['ackorder_trace']!r}; this ackorder reads {VERSION}")
    unknown = set(head) - {"ackorder_trace", "process", "ids", "config", "observes", "bugs", "source"}
    if unknown:
        raise TraceError(f"{where}: header: unknown fields {', '.join(sorted(unknown))}")
    process = head.get("process")
    if not isinstance(process, str) or not process:
        raise TraceError(f"{where}: header.process: expected the name of the writing process")
    ids = head.get("ids", "spec")
    if ids not in ("spec", "keys"):
        raise TraceError(f"{where}: header.ids: expected \"spec\" or \"keys\", got {ids!r}")
    config_known = "config" in head
    if config_known:
        cfg = config_from_json(head["config"], where)
    elif process in ("master", "sim"):
        raise TraceError(f"{where}: header.config: the {process}'s file must give the configuration")
    else:
        # A slave's file: its steps are its own, validated as those of a one-slave group for now.
        if not re.fullmatch(REPLICA_NAME, process):
            raise TraceError(f"{where}: header.process {process!r}: a slave's name is a letter or '_', then "
                             "letters, digits or '_' (a TLA+ model value)")
        cfg = Config(replicas=(process,), flush_mode=FLUSH_MODES[0], repl_mode=REPL_MODES[0])
    observes_list = head.get("observes")
    if not isinstance(observes_list, list):
        raise TraceError(f"{where}: header.observes: expected a list of variable names")
    observes = expand_observes(observes_list, cfg.replicas, where + ": header")
    bugs = head.get("bugs", [])
    if not isinstance(bugs, list) or not all(isinstance(b, str) for b in bugs):
        raise TraceError(f"{where}: header.bugs: expected a list of bug switch names")
    steps: list[Step] = []
    notes: list[Note] = []
    complete = False
    verdict = None
    last_seq = 0
    for lineno, obj in objects[1:]:
        where = f"{name}:{lineno}"
        if "end" in obj or "violation" in obj:
            if "end" in obj:
                if obj["end"] != "complete" or set(obj) - {"end", "t_ms"}:
                    raise TraceError(f"{where}: trailer: expected {{\"end\": \"complete\"}}")
                complete = True
            else:
                if not isinstance(obj.get("violation"), str):
                    raise TraceError(f"{where}: trailer: expected {{\"violation\": PROPERTY, \"message\": TEXT}}")
                verdict = (obj["violation"], str(obj.get("message", "")))
            continue
        seq = obj.get("seq", last_seq + 1)
        if not _nat(seq) or seq <= last_seq:
            raise TraceError(f"{where}: seq: expected an integer above the previous line's {last_seq}")
        last_seq = seq
        proc = obj.get("proc", process)
        if not isinstance(proc, str):
            raise TraceError(f"{where}: proc: expected a process name")
        if "note" in obj:
            if not isinstance(obj["note"], str) or "action" in obj:
                raise TraceError(f"{where}: a note is {{\"note\": NAME, ...}} and no step")
            if obj["note"] == "HANDSHAKE" and not _nat(obj.get("records")):
                raise TraceError(f"{where}: a HANDSHAKE note needs \"records\": the slave's record count")
            notes.append(Note(name, lineno, proc, seq, obj["note"], obj))
            continue
        if "action" not in obj:
            raise TraceError(f"{where}: expected a step (\"action\"), a note (\"note\") or a trailer (\"end\")")
        unknown = set(obj) - {"seq", "proc", "action", "obs", "observes", "key", "after", "t_ms", "what", "conn"}
        if unknown:
            raise TraceError(f"{where}: unknown fields {', '.join(sorted(unknown))}")
        check = _Line(where, cfg)
        actions = check.actions(obj["action"])
        obs = obj.get("obs", {})
        check.obs(obs)
        step_observes = observes
        if "observes" in obj:
            if not isinstance(obj["observes"], list):
                check.fail("observes: expected a list of variable names")
            step_observes = expand_observes(obj["observes"], cfg.replicas, where)
        key = obj.get("key")
        if key is not None and not (_nat(key) and key >= 1):
            check.fail("key: expected a positive producer key")
        if ids == "keys" and key is None and any(a in REQUEST_CREATING for a, _ in actions) \
                and not (cfg.transient_store_pool and all(a == "WriteFail" for a, _ in actions)):
            check.fail("a step that creates a request needs its producer \"key\" in an ids=keys file")
        after = obj.get("after", [])
        if not isinstance(after, list) or not all(
                isinstance(a, list) and len(a) == 2 and isinstance(a[0], str) and _nat(a[1]) for a in after):
            check.fail("after: expected a list of [process, seq] pairs")
        t_ms = obj.get("t_ms")
        if t_ms is not None and not isinstance(t_ms, (int, float)):
            check.fail("t_ms: expected a number")
        conn = obj.get("conn")
        if conn is not None and (not isinstance(conn, (str, int)) or isinstance(conn, bool)):
            check.fail("conn: expected a connection id (a string such as \"10.0.0.2:40312\", or a number)")
        steps.append(Step(name, lineno, proc, seq, actions, obs, step_observes, key,
                          tuple((a, s) for a, s in after), t_ms, obj.get("what"), conn))
    # a trailer may only end the file
    trailer_lines = [ln for ln, o in objects[1:] if "end" in o or "violation" in o]
    if trailer_lines and any(ln > trailer_lines[0] for ln, o in objects[1:] if "end" not in o and "violation" not in o):
        bad = next(ln for ln, o in objects[1:] if ln > trailer_lines[0] and "end" not in o and "violation" not in o)
        raise TraceError(f"{name}:{bad}: nothing but trailers may follow the trailer on line {trailer_lines[0]}")
    return Trace(name, process, cfg, ids, observes, tuple(steps), tuple(notes), complete, verdict,
                 tuple(bugs), str(head.get("source", "")), head, config_known)


# ------------------------------------------------------------------ writing

def _seq_change(a: tuple, b: tuple):
    if len(b) >= len(a) and b[: len(a)] == a:
        return {"append": list(b[len(a):])}
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    if common == 0 and len(b) <= 2:
        return list(b)
    return {"take": common, "append": list(b[common:])}


def request_json(r: Request) -> dict:
    return {"off": r.off, "flushDone": r.flush_done, "status": r.status}


def _reqs_change(a: tuple[Request, ...], b: tuple[Request, ...]):
    if len(b) < len(a):
        return [request_json(r) for r in b]
    out: dict = {}
    if len(b) > len(a):
        out["append"] = [request_json(r) for r in b[len(a):]]
    changed = {}
    for i, (x, y) in enumerate(zip(a, b), 1):
        if x is y or x == y:
            continue
        fields = {}
        if x.off != y.off:
            fields["off"] = y.off
        if x.flush_done != y.flush_done:
            fields["flushDone"] = y.flush_done
        if x.status != y.status:
            fields["status"] = y.status
        changed[str(i)] = fields
    if changed:
        out["set"] = changed
    return out


def step_obs(cfg: Config, before: State, after: State, observes: frozenset[Name] | None = None) -> dict:
    """The ``obs`` of a step from ``before`` to ``after``: what changed among the observed variables,
    in the compact forms (appends, truncations, changed fields)."""
    out: dict = {}
    for var in VARIABLES:
        a, b = getattr(before, var), getattr(after, var)
        if a is b or a == b:
            continue
        if var in PER_REPLICA:
            entries = {}
            for k, r in enumerate(cfg.replicas):
                if a[k] == b[k] or (observes is not None and (var, r) not in observes):
                    continue
                entries[r] = _seq_change(a[k], b[k]) if var == "rlog" else b[k]
            if entries:
                out[var] = entries
            continue
        if observes is not None and (var, None) not in observes:
            continue
        if var == "log":
            out[var] = _seq_change(a, b)
        elif var == "reqs":
            out[var] = _reqs_change(a, b)
        elif var in SETS:
            out[var] = sorted(b)
        else:
            out[var] = b
    return out


def step_line(seq: int, label, obs: dict, proc: str | None = None, **extra) -> str:
    obj = {"seq": seq}
    if proc is not None:
        obj["proc"] = proc
    obj["action"] = label
    obj["obs"] = obs
    obj.update({k: v for k, v in extra.items() if v is not None})
    return json.dumps(obj, separators=(",", ":"))
