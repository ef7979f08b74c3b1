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

* checkpoint: ``{"seq": 10012, "checkpoint": {every variable, whole}, "t_ms": 8120}``: the whole
  state after the steps before it, from a writer that observes everything (the simulator writes one
  every so many steps): the checkers verify the steps reach it, and TLC checks a long trace in
  segments between checkpoints (tla/tracecheck.py).

``read_trace`` validates all of it and names the file and line of any problem (TraceError); a
number is ASCII digits (``str.isdigit`` also says yes to '²', which ``int`` refuses), and JSON
nested past the parser or an integer past Python's digit limit is a TraceError too.  A gap in
``seq`` (a dropped line) or a ``t_ms`` going back within a process is a warning (``Trace.warnings``),
or with ``strict`` a TraceError.  ``TraceReader`` reads a file a line at a time, for a checker that
does not hold it.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator
from itertools import compress
from operator import is_not
from pathlib import Path

import attrs

from spec.config import ACK_POLICIES, FLUSH_MODES, REPL_MODES, Config, ConfigError
from spec.state import CAUSES, MASTER_STATES, STATUSES, TORN, WAITING, Counters, Request, State

VERSION = 1
MAX_LINE_BYTES = 1 << 20
# A checkpoint holds the whole state (every record and request so far): its line may be longer.
MAX_CHECKPOINT_BYTES = 1 << 28
MAX_WARNINGS = 10               # per file; the rest are counted

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

REPLICA_NAME = r"[A-Za-z_][A-Za-z0-9_]*"      # a TLA+ model value (ASCII: TLC reads no other)
_LABEL = re.compile(r"([A-Za-z]+)(?:\(([A-Za-z0-9_]+)\))?")
# ASCII digits only: str.isdigit also accepts '²' (which int() refuses) and other scripts' digits
# (which int() reads, so that "١" and "1" would name one request).
_REQUEST_ID = re.compile(r"[1-9][0-9]{0,17}")


class TraceError(ConfigError):
    """A malformed trace; the message starts with ``file:line:``."""


def brief(v, limit: int = 60) -> str:
    """A value of the input, for a one-line message: repr'd, cut short (a value may be megabytes,
    or nested as deep as the JSON parser allows, which repr cannot always follow)."""
    try:
        text = repr(v)
    except RecursionError:
        return f"a {type(v).__name__} nested too deeply to show"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def field_names(keys: Iterable[str]) -> str:
    """Unknown field names of the input, for a one-line message (as they are when printable)."""
    return ", ".join(k if k.isprintable() and len(k) <= 40 else brief(k, 40) for k in sorted(keys))


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
    # Set by the merge on a step no order of the files can place (spec/tracemerge.py): why, and
    # the step of another file it conflicts with.
    conflict: tuple[str, object] | None = attrs.field(default=None, eq=False, hash=False, repr=False)

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
class Checkpoint:
    """The whole state at a point of a trace (every variable, ghosts excepted), written by a
    process that sees everything: a checker verifies the steps before it reach exactly this state,
    and TLC checks the steps after it from it, as a trace of its own."""
    file: str
    line: int
    seq: int
    after: int                        # the steps of its file before it
    state: State = attrs.field(eq=False, repr=False)
    t_ms: int | float | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}"


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
    checkpoints: tuple[Checkpoint, ...] = ()
    warnings: tuple[str, ...] = ()    # irregular stamps (a seq gap, t_ms going back), "file:line: ..."


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
            raise TraceError(f"{where}: observes: expected variable names, got {brief(entry)}")
        m = re.fullmatch(r"([A-Za-z_]\w*)(?:\[([A-Za-z_]\w*)\])?", entry)
        var, r = (m.group(1), m.group(2)) if m else (entry, None)
        if var in GHOSTS:
            raise TraceError(f"{where}: observes: {var} is ghost state, derived by the spec, never observed")
        if m is None or var not in VARIABLES:
            raise TraceError(f"{where}: observes: unknown variable {brief(entry)}; known: {', '.join(VARIABLES)}")
        if var in PER_REPLICA:
            if r is not None and r not in replicas:
                raise TraceError(f"{where}: observes: {brief(entry)} names no replica of the configuration")
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
            ([f"missing {', '.join(missing)}"] if missing else [])
            + ([f"unknown {field_names(unknown)}"] if unknown else [])))
    reps = c["Replicas"]
    if not isinstance(reps, list) or not all(isinstance(r, str) and re.fullmatch(REPLICA_NAME, r) for r in reps):
        raise TraceError(f"{where}: config.Replicas: expected a list of names such as \"r1\"")
    checks = {"FlushMode": FLUSH_MODES, "ReplMode": REPL_MODES, "AckPolicy": ACK_POLICIES}
    for key, allowed in checks.items():
        if c[key] not in allowed:
            raise TraceError(f"{where}: config.{key} = {brief(c[key])}: must be one of {', '.join(allowed)}")
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


_REQUEST_KEYS = frozenset(REQUEST_FIELDS)
_STATUSES = STATUSES | {WAITING}


def _naturals(v) -> bool:
    return type(v) is list and all(type(x) is int and x >= 0 for x in v)


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
            self.fail(f"{path}: unknown request fields {field_names(unknown)}")
        if not partial and set(v) != set(REQUEST_FIELDS):
            self.fail(f"{path}: a new request needs {', '.join(REQUEST_FIELDS)}")
        if not v:
            self.fail(f"{path}: an empty change")
        for k, x in v.items():
            if not _typed(x, REQUEST_FIELDS[k]):
                self.fail(f"{path}.{k}: expected {REQUEST_FIELDS[k].__name__}")
        if "status" in v and v["status"] not in STATUSES | {WAITING}:
            self.fail(f"{path}.status: {brief(v['status'])} is not a status "
                      f"({', '.join(sorted(STATUSES | {WAITING}))})")

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
            if not _REQUEST_ID.fullmatch(key):
                self.fail(f"obs.reqs.set: {brief(key)} is not a request id (1, 2, ... in ASCII digits)")
            self.request(f"obs.reqs.set.{key}", r, partial=True)

    def obs(self, obs) -> None:
        if not isinstance(obs, dict):
            self.fail("obs: expected an object of variables")
        for var, v in obs.items():
            if var in GHOSTS:
                self.fail(f"obs.{var}: ghost state is derived by the spec, never observed")
            if var in SCALARS:
                if not _typed(v, SCALARS[var]):
                    self.fail(f"obs.{var}: expected {SCALARS[var].__name__}, got {brief(v)}")
                if var == "mstate" and v not in MASTER_STATES:
                    self.fail(f"obs.mstate: {brief(v)} is not one of {', '.join(sorted(MASTER_STATES))}")
            elif var in SETS:
                if not isinstance(v, list) or not all(_typed(x, SETS[var]) for x in v):
                    self.fail(f"obs.{var}: expected a list (a set) of {SETS[var].__name__}")
                if var == "syncStateSet" and not set(v) <= set(self.cfg.replicas):
                    self.fail(f"obs.syncStateSet: names no replica of the configuration: {brief(v)}")
            elif var in SEQUENCES:
                self.seq_obs(f"obs.{var}", v)
            elif var == "reqs":
                self.reqs_obs(v)
            elif var in PER_REPLICA:
                if not isinstance(v, dict) or not v:
                    self.fail(f"obs.{var}: expected {{\"replica\": value}}")
                for r, x in v.items():
                    if r not in self.cfg.replicas:
                        self.fail(f"obs.{var}: {brief(r)} is not a replica of the configuration "
                                  f"({', '.join(self.cfg.replicas)})")
                    if PER_REPLICA[var] == "seq":
                        self.seq_obs(f"obs.{var}.{r}", x)
                    elif not _typed(x, PER_REPLICA[var]):
                        self.fail(f"obs.{var}.{r}: expected {PER_REPLICA[var].__name__}, got {brief(x)}")
            else:
                self.fail(f"obs: unknown variable {brief(var)}; known: {', '.join(VARIABLES)}")

    def checkpoint(self, v) -> State:
        """A checkpoint's whole state: every variable, whole values (per-replica ones for every
        replica); the ghosts at their initial values (no guard of the bound-free spec reads them)."""
        if not isinstance(v, dict):
            self.fail("checkpoint: expected an object with every variable")
        missing = [var for var in VARIABLES if var not in v]
        unknown = sorted(set(v) - set(VARIABLES))
        if missing or unknown:
            self.fail("checkpoint: " + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else [])
                + ([f"unknown {field_names(unknown)}"] if unknown else [])
                + ["a checkpoint gives every variable"]))
        for var in (*SCALARS, *SETS):
            self.obs({var: v[var]})
        if not _naturals(v["log"]):
            self.seq_values("checkpoint.log", v["log"])
        if not isinstance(v["reqs"], list):
            self.fail("checkpoint.reqs: expected the list of every request")
        # (a checkpoint holds every request of the run: the common case at C speed, the slow
        # path only to name the bad one)
        if not all(type(r) is dict and r.keys() == _REQUEST_KEYS and type(r["off"]) is int and r["off"] >= 0
                   and type(r["flushDone"]) is bool and type(r["status"]) is str and r["status"] in _STATUSES
                   for r in v["reqs"]):
            for i, r in enumerate(v["reqs"], 1):
                self.request(f"checkpoint.reqs[{i}]", r, partial=False)
        for var, typ in PER_REPLICA.items():
            entries = v[var]
            if not isinstance(entries, dict) or set(entries) != set(self.cfg.replicas):
                self.fail(f"checkpoint.{var}: expected {{\"replica\": value}} for every replica "
                          f"({', '.join(self.cfg.replicas)})")
            for r, x in entries.items():
                if typ == "seq":
                    if not _naturals(x):
                        self.seq_values(f"checkpoint.{var}.{r}", x)
                elif not _typed(x, typ):
                    self.fail(f"checkpoint.{var}.{r}: expected {typ.__name__}, got {brief(x)}")
        per = {var: tuple(tuple(v[var][r]) if typ == "seq" else v[var][r] for r in self.cfg.replicas)
               for var, typ in PER_REPLICA.items()}
        return State(
            mstate=v["mstate"], log=tuple(v["log"]), committed=v["committed"], flushed=v["flushed"],
            durable=v["durable"], writable=v["writable"], unwritten=frozenset(v["unwritten"]), landed=v["landed"],
            reqs=tuple(Request(r["off"], r["flushDone"], r["status"]) for r in v["reqs"]),
            push2SlaveMaxOffset=v["push2SlaveMaxOffset"], syncStateSet=frozenset(v["syncStateSet"]),
            inv_responses=frozenset(), aux_ctrs=Counters(), **per)

    def actions(self, v) -> tuple[tuple[str, object], ...]:
        labels = v if isinstance(v, list) else [v]
        if not labels:
            self.fail("action: an empty list of alternatives")
        out = []
        for label in labels:
            m = _LABEL.fullmatch(label) if isinstance(label, str) else None
            if m is None:
                self.fail(f"action: {brief(label)} is not an action label such as \"Put\" or \"Respond(2)\"")
            name, param = m.group(1), m.group(2)
            if name not in ACTIONS:
                self.fail(f"action: unknown action {brief(name)}; known: {', '.join(ACTIONS)}")
            if name in ACTIONS_NO_PARAM:
                if param is not None:
                    self.fail(f"action: {name} takes no parameter")
            elif name in ACTIONS_REQUEST:
                if param is None or not _REQUEST_ID.fullmatch(param):
                    self.fail(f"action: {name} takes a request id (1, 2, ... in ASCII digits), as in {name}(1)")
                param = int(param)
            elif param not in self.cfg.replicas:
                self.fail(f"action: {name} takes a replica of the configuration "
                          f"({', '.join(self.cfg.replicas)}), got {brief(param)}")
            out.append((name, param))
        return tuple(out)


# ------------------------------------------------------------------ reading

def _json(raw: str, where: str):
    try:
        return json.loads(raw)
    except json.JSONDecodeError as err:
        raise TraceError(f"{where}: invalid JSON at column {err.colno}: {err.msg}") from None
    except RecursionError:
        raise TraceError(f"{where}: invalid JSON: nested deeper than the parser follows") from None
    except ValueError:      # an integer literal beyond Python's digit limit for str -> int
        raise TraceError(f"{where}: invalid JSON: a number of more than {sys.get_int_max_str_digits()} digits") \
            from None


def _time(obj: dict, where: str):
    t_ms = obj.get("t_ms")
    if t_ms is not None and (isinstance(t_ms, bool) or not isinstance(t_ms, (int, float))
                             or not math.isfinite(t_ms)):
        raise TraceError(f"{where}: t_ms: expected a number, got {brief(t_ms)}")
    return t_ms


class TraceReader:
    """One trace file, read and validated a line at a time: the header when it is made, then its
    steps, notes and checkpoints from ``items()``; the trailer's facts (``complete``, the writer's
    verdict) are known once ``items()`` is exhausted.  A long trace is checked without holding it.

    ``strict``: a gap in ``seq`` (a line dropped) or a ``t_ms`` going back within one process is a
    TraceError, not a warning."""

    def __init__(self, path: Path | str, text: str | bytes | None = None, strict: bool = False) -> None:
        self.name = str(path)
        self.strict = strict
        self.warnings: list[str] = []
        self.warnings_left_out = 0
        self.complete = False
        self.verdict: tuple[str, str] | None = None
        self.steps_read = 0
        self._started = False
        if text is None:
            try:
                source = open(path, "rb")      # noqa: SIM115  (closed by _lines when it ends)
            except OSError as err:
                raise TraceError(f"{self.name}: cannot read: {err.strerror}") from None
        elif isinstance(text, bytes):
            source = io.BytesIO(text)
        else:
            source = io.StringIO(text)
        self._objects = self._lines(source)
        self._header(next(self._objects, None))

    def _lines(self, source) -> Iterator[tuple[int, dict]]:
        """(line number, object) of each non-blank line; one line at most MAX_CHECKPOINT_BYTES in
        memory, whatever the file holds."""
        with source:
            lineno = 0
            while True:
                try:
                    raw = source.readline(MAX_CHECKPOINT_BYTES + 1)
                except OSError as err:
                    raise TraceError(f"{self.name}: cannot read: {err.strerror}") from None
                if not raw:
                    return
                lineno += 1
                where = f"{self.name}:{lineno}"
                if len(raw) > MAX_CHECKPOINT_BYTES:
                    raise TraceError(f"{where}: line longer than {MAX_CHECKPOINT_BYTES} bytes")
                if isinstance(raw, bytes):
                    try:
                        raw = raw.decode("utf-8")
                    except UnicodeDecodeError as err:
                        raise TraceError(f"{where}: not UTF-8 text (byte {err.start + 1} of the line)") from None
                if not raw.strip():
                    continue
                # a long line is parsed only if it says it is a checkpoint (its name is near its start)
                if len(raw) > MAX_LINE_BYTES and '"checkpoint"' not in raw[:MAX_LINE_BYTES]:
                    raise TraceError(f"{where}: line longer than {MAX_LINE_BYTES} bytes (only a checkpoint may be)")
                obj = _json(raw, where)
                if not isinstance(obj, dict):
                    raise TraceError(f"{where}: expected a JSON object")
                if len(raw) > MAX_LINE_BYTES and "checkpoint" not in obj:
                    raise TraceError(f"{where}: line longer than {MAX_LINE_BYTES} bytes (only a checkpoint may be)")
                yield lineno, obj

    def _header(self, first: tuple[int, dict] | None) -> None:
        name = self.name
        if first is None:
            raise TraceError(f"{name}: empty trace (no header line)")
        lineno, head = first
        where = f"{name}:{lineno}"
        if "ackorder_trace" not in head:
            raise TraceError(f"{where}: the first line must be the header {{\"ackorder_trace\": {VERSION}, ...}}")
        if head["ackorder_trace"] != VERSION or isinstance(head["ackorder_trace"], bool):
            raise TraceError(f"{where}: trace format version {brief(head['ackorder_trace'])}; "
                             f"this ackorder reads {VERSION}")
        unknown = set(head) - {"ackorder_trace", "process", "ids", "config", "observes", "bugs", "source"}
        if unknown:
            raise TraceError(f"{where}: header: unknown fields {field_names(unknown)}")
        process = head.get("process")
        if not isinstance(process, str) or not process:
            raise TraceError(f"{where}: header.process: expected the name of the writing process")
        ids = head.get("ids", "spec")
        if ids not in ("spec", "keys"):
            raise TraceError(f"{where}: header.ids: expected \"spec\" or \"keys\", got {brief(ids)}")
        config_known = "config" in head
        if config_known:
            cfg = config_from_json(head["config"], where)
        elif process in ("master", "sim"):
            raise TraceError(f"{where}: header.config: the {process}'s file must give the configuration")
        else:
            # A slave's file: its steps are its own, validated as those of a one-slave group for now.
            if not re.fullmatch(REPLICA_NAME, process):
                raise TraceError(f"{where}: header.process {brief(process)}: a slave's name is a letter or '_', "
                                 "then letters, digits or '_' (a TLA+ model value)")
            cfg = Config(replicas=(process,), flush_mode=FLUSH_MODES[0], repl_mode=REPL_MODES[0])
        observes_list = head.get("observes")
        if not isinstance(observes_list, list):
            raise TraceError(f"{where}: header.observes: expected a list of variable names")
        observes = expand_observes(observes_list, cfg.replicas, where + ": header")
        bugs = head.get("bugs", [])
        if not isinstance(bugs, list) or not all(isinstance(b, str) for b in bugs):
            raise TraceError(f"{where}: header.bugs: expected a list of bug switch names")
        source = head.get("source", "")
        if not isinstance(source, str):
            raise TraceError(f"{where}: header.source: expected a text")
        self.process, self.config, self.ids, self.observes = process, cfg, ids, observes
        self.bugs, self.source, self.head, self.config_known = tuple(bugs), source, head, config_known
        self.observes_everything = observes == expand_observes(SIM_OBSERVES, cfg.replicas, where)

    def _irregular(self, where: str, what: str) -> None:
        if self.strict:
            raise TraceError(f"{where}: {what} (--strict)")
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(f"{where}: {what}")
        else:
            self.warnings_left_out += 1

    def items(self) -> Iterator[Step | Note | Checkpoint]:
        """The file's steps, notes and checkpoints, in its order, each validated (once only)."""
        assert not self._started, "a trace file's items are read once"
        self._started = True
        name, cfg, ids, observes = self.name, self.config, self.ids, self.observes
        last_seq = 0
        last_time: dict[str, tuple[float, int]] = {}     # process -> (t_ms, line): each its own clock
        trailer_line = None
        for lineno, obj in self._objects:
            where = f"{name}:{lineno}"
            if "end" in obj or "violation" in obj:
                if "end" in obj:
                    if obj["end"] != "complete" or set(obj) - {"end", "t_ms"}:
                        raise TraceError(f"{where}: trailer: expected {{\"end\": \"complete\"}}")
                    _time(obj, where)
                    self.complete = True
                else:
                    if not isinstance(obj.get("violation"), str) or not isinstance(obj.get("message", ""), str):
                        raise TraceError(f"{where}: trailer: expected {{\"violation\": PROPERTY, \"message\": TEXT}}")
                    self.verdict = (obj["violation"], obj.get("message", ""))
                trailer_line = trailer_line or lineno
                continue
            if trailer_line is not None:
                raise TraceError(f"{where}: nothing but trailers may follow the trailer on line {trailer_line}")
            seq = obj.get("seq", last_seq + 1)
            if not _nat(seq) or seq <= last_seq:
                raise TraceError(f"{where}: seq: expected an integer above the previous line's {last_seq}")
            if seq > last_seq + 1:
                missing = seq - last_seq - 1
                self._irregular(where, f"seq: {seq} follows {last_seq}: {missing} line{'s' if missing > 1 else ''} "
                                       "missing (dropped?)")
            last_seq = seq
            proc = obj.get("proc", self.process)
            if not isinstance(proc, str):
                raise TraceError(f"{where}: proc: expected a process name")
            t_ms = _time(obj, where)
            if t_ms is not None:
                before = last_time.get(proc)
                if before is not None and t_ms < before[0]:
                    self._irregular(where, f"t_ms: {proc}'s clock goes back from {before[0]} (line {before[1]}) "
                                           f"to {t_ms}")
                last_time[proc] = (t_ms, lineno)
            conn = obj.get("conn")
            if conn is not None and (not isinstance(conn, (str, int)) or isinstance(conn, bool)):
                raise TraceError(f"{where}: conn: expected a connection id (a string such as \"10.0.0.2:40312\", "
                                 "or a number)")
            if "checkpoint" in obj:
                unknown = set(obj) - {"seq", "checkpoint", "t_ms"}
                if unknown:
                    raise TraceError(f"{where}: checkpoint: unknown fields {field_names(unknown)}")
                if not self.observes_everything or ids != "spec":
                    raise TraceError(f"{where}: checkpoint: only a file that observes every variable and names "
                                     "requests by spec ids (a simulator's) can give the whole state")
                state = _Line(where, cfg).checkpoint(obj["checkpoint"])
                yield Checkpoint(name, lineno, seq, self.steps_read, state, t_ms)
                continue
            if "note" in obj:
                if not isinstance(obj["note"], str) or "action" in obj:
                    raise TraceError(f"{where}: a note is {{\"note\": NAME, ...}} and no step")
                if obj["note"] == "HANDSHAKE" and not _nat(obj.get("records")):
                    raise TraceError(f"{where}: a HANDSHAKE note needs \"records\": the slave's record count")
                yield Note(name, lineno, proc, seq, obj["note"], obj)
                continue
            if "action" not in obj:
                raise TraceError(f"{where}: expected a step (\"action\"), a note (\"note\"), a checkpoint "
                                 "(\"checkpoint\") or a trailer (\"end\")")
            unknown = set(obj) - {"seq", "proc", "action", "obs", "observes", "key", "after", "t_ms", "what", "conn"}
            if unknown:
                raise TraceError(f"{where}: unknown fields {field_names(unknown)}")
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
            what = obj.get("what")
            if what is not None and not isinstance(what, str):
                check.fail("what: expected a text")
            self.steps_read += 1
            yield Step(name, lineno, proc, seq, actions, obs, step_observes, key,
                       tuple((a, s) for a, s in after), t_ms, what, conn)

    def trace(self) -> Trace:
        """The whole file, read (what ``read_trace`` returns)."""
        steps, notes, checkpoints = [], [], []
        for item in self.items():
            (steps if isinstance(item, Step) else notes if isinstance(item, Note) else checkpoints).append(item)
        return Trace(self.name, self.process, self.config, self.ids, self.observes, tuple(steps), tuple(notes),
                     self.complete, self.verdict, self.bugs, self.source, self.head, self.config_known,
                     tuple(checkpoints), self.all_warnings())

    def all_warnings(self) -> tuple[str, ...]:
        more = (f"{self.name}: {self.warnings_left_out} more irregular stamp(s) not shown",) \
            if self.warnings_left_out else ()
        return (*self.warnings, *more)


def read_trace(path: Path | str, text: str | bytes | None = None, strict: bool = False) -> Trace:
    """Parse and validate one trace file (TraceError names the file and line of a problem)."""
    return TraceReader(path, text, strict).trace()


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


def _changed_positions(a, b) -> Iterable[int]:
    """The positions below both lengths where ``a`` and ``b`` differ.  Two versions of one Seq
    (spec/seq.py: the simulator's shadow holds them) share every chunk a step did not touch, so
    only the others are read, and the chunks are matched at C speed: reading every request at
    every step made writing a trace quadratic in its length."""
    from spec.seq import CHUNK, Seq

    n = min(len(a), len(b))
    if not (isinstance(a, Seq) and isinstance(b, Seq)):
        return (i for i in range(n) if a[i] is not b[i] and a[i] != b[i])
    ca, cb = a._chunks, b._chunks
    shared = min(len(ca), len(cb))
    touched = () if ca is cb else compress(range(shared), map(is_not, ca, cb))
    out = [k * CHUNK + j for k in touched for j, (x, y) in enumerate(zip(ca[k], cb[k])) if x is not y and x != y]
    out += [i for i in range(shared * CHUNK, n) if a[i] is not b[i] and a[i] != b[i]]
    return out


def _reqs_change(a: tuple[Request, ...], b: tuple[Request, ...]):
    if len(b) < len(a):
        return [request_json(r) for r in b]
    out: dict = {}
    if len(b) > len(a):
        out["append"] = [request_json(r) for r in b[len(a):]]
    changed = {}
    for i in _changed_positions(a, b):
        x, y = a[i], b[i]
        i += 1
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


def checkpoint_json(cfg: Config, s: State) -> dict:
    """A checkpoint's ``checkpoint`` object: every variable of ``s``, whole (ghosts left out)."""
    out: dict = {}
    for var in VARIABLES:
        v = getattr(s, var)
        if var in PER_REPLICA:
            out[var] = {r: list(x) if var == "rlog" else x for r, x in zip(cfg.replicas, v)}
        elif var == "log":
            out[var] = list(v)
        elif var == "reqs":
            out[var] = [request_json(r) for r in v]
        elif var in SETS:
            out[var] = sorted(v)
        else:
            out[var] = v
    return out


def step_line(seq: int, label, obs: dict, proc: str | None = None, **extra) -> str:
    obj = {"seq": seq}
    if proc is not None:
        obj["proc"] = proc
    obj["action"] = label
    obj["obs"] = obs
    obj.update({k: v for k, v in extra.items() if v is not None})
    return json.dumps(obj, separators=(",", ":"))
