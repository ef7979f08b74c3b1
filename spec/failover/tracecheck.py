"""Failover traces checked by the twin: is this sequence of AckOrderFailover actions a behaviour of
the bound-free spec with every bug switch off?

A failover trace is NDJSON: a header

    {"ackorder_trace": 1, "model": "failover", "brokers": ["b1", "b2", "b3"], "initial_master": "b1",
     "bugs": [...], "source": "..."}

then one line per step, ``{"step": k, "action": "ReplicaConnect(b2)", "state": {...}}`` with
k = 1, 2, ...  The labels are the spec's action names with their arguments; ``state`` (optional) is
the spec state the writer's abstraction maps its own state to after the step, one key per TLA+
variable (spec/failover/state.state_json), as reference/failover/drive.py writes it.  The check
follows every spec state the trace so far allows (without ``state``, a power loss may keep any
prefix): a step none of them can take under its label, or not to the state observed, is the
verdict's first bad step.  ``bugs`` names the switches the writer ran with; the check never turns
them on.  Liveness properties (MasterEventuallyStable) are not judged: a finite trace cannot show
that nothing happens forever.  (TLC does not check these traces yet: issue 35.)
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable

import attrs

from spec.config import ConfigError
from spec.failover.actions import initial_state
from spec.failover.config import FAILOVER_BUG_NAMES, FailoverConfig
from spec.failover.labels import ACTIONS, LabelError, allowed, parse_label
from spec.failover.state import COUNTER_KINDS, MASTER, SLAVE, STATUSES, WAITING, FState, state_json

VERSION = 1
MAX_LINE_CHARS = 1 << 20
MAX_BROKERS = 8
MAX_FRONTIER = 4096          # spec states one label prefix may leave; past it the check gives up (exit 2)
MAX_STEPS = 200_000           # steps of one trace (read whole before it is checked)
LABEL = re.compile(r"[A-Z][A-Za-z]{0,40}(\([A-Za-z0-9_]{1,32}(,[A-Za-z0-9_]{1,32}){0,3}\))?")
BROKER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")


class FailoverTraceError(ConfigError):
    """A malformed failover trace: the file and line, and what is wrong there."""


@attrs.frozen
class FailoverVerdict:
    steps: int
    ok: bool
    line: int | None = None          # the first step no spec state can take
    label: str | None = None
    bugs: tuple[str, ...] = ()
    source: str = ""
    actions: tuple[tuple[str, int], ...] = ()   # the spec actions of the steps explained, with their counts


def action_coverage(verdicts) -> dict[str, tuple[int, int]]:
    """Every action of AckOrderFailover -> (steps that took it, traces that took it) over ``verdicts``
    (the explained steps only): what `trace-check --coverage` reports; 0 is an action no trace reached."""
    out = {name: (0, 0) for name in ACTIONS}
    for v in verdicts:
        for name, n in v.actions:
            steps, traces = out[name]
            out[name] = (steps + n, traces + 1)
    return out


def is_failover_header(first_line: str) -> bool:
    """Whether a trace's first line is a failover header (the write-path header has no "model")."""
    try:
        head = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(head, dict) and head.get("model") == "failover"


def header(brokers: tuple[str, ...], initial_master: str, bugs: Iterable[str] = (), source: str = "") -> str:
    return json.dumps({"ackorder_trace": VERSION, "model": "failover", "brokers": list(brokers),
                       "initial_master": initial_master, "bugs": sorted(bugs), "source": source}) + "\n"


def _object(raw: str, where: str) -> dict:
    if len(raw) > MAX_LINE_CHARS:
        raise FailoverTraceError(f"{where}: line longer than {MAX_LINE_CHARS} characters")
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise FailoverTraceError(f"{where}: invalid JSON: {str(err)[:120]}") from None
    if not isinstance(obj, dict):
        raise FailoverTraceError(f"{where}: expected a JSON object")
    return obj


def _config(head: dict, where: str) -> tuple[FailoverConfig, tuple[str, ...], str]:
    unknown = set(head) - {"ackorder_trace", "model", "brokers", "initial_master", "bugs", "source"}
    if unknown:
        raise FailoverTraceError(f"{where}: header: unknown fields {', '.join(sorted(unknown))}")
    if head.get("ackorder_trace") != VERSION or isinstance(head.get("ackorder_trace"), bool):
        raise FailoverTraceError(f"{where}: trace format version {head.get('ackorder_trace')!r}; this ackorder "
                                 f"reads {VERSION}")
    brokers = head.get("brokers")
    if (not isinstance(brokers, list) or not 2 <= len(brokers) <= MAX_BROKERS or len(set(brokers)) != len(brokers)
            or not all(isinstance(b, str) and BROKER.fullmatch(b) for b in brokers)):
        raise FailoverTraceError(f"{where}: header.brokers: expected 2..{MAX_BROKERS} distinct broker names")
    master = head.get("initial_master")
    if master not in brokers:
        raise FailoverTraceError(f"{where}: header.initial_master: expected one of header.brokers")
    bugs = head.get("bugs", [])
    if not isinstance(bugs, list) or not all(isinstance(b, str) and b in FAILOVER_BUG_NAMES for b in bugs):
        raise FailoverTraceError(f"{where}: header.bugs: expected a list of failover bug switch names")
    source = head.get("source", "")
    if not isinstance(source, str):
        raise FailoverTraceError(f"{where}: header.source: expected a text")
    return FailoverConfig(tuple(brokers), master), tuple(bugs), source[:200]


NOT_A_STATE = "not a spec state"     # an observation no spec state has: both checkers refuse its step


def _nat(v) -> bool:
    return type(v) is int and v >= 0


def _sorted_set(v, item) -> bool:
    """A set as state_json writes one: a list, sorted, without duplicates."""
    return type(v) is list and all(item(x) for x in v) and all(a < b for a, b in zip(v, v[1:]))


def state_problem(cfg: FailoverConfig, obj: dict) -> str | None:
    """Why ``obj`` is not a state in state_json's canonical form (exact JSON types: a boolean is
    not a number; sets sorted and without duplicates; brokers of the header), or None.  Both
    checkers then compare exactly: the twin by equality, TLC by the values written into its module."""
    n = len(cfg.brokers)
    broker = lambda v: type(v) is str and v in cfg.brokers                    # noqa: E731
    broker_or_none = lambda v: broker(v) or v == cfg.no_broker               # noqa: E731
    brokers = lambda v: _sorted_set(v, broker)                               # noqa: E731
    nat_list = lambda v: type(v) is list and all(_nat(x) for x in v)         # noqa: E731
    entry = lambda v: type(v) is list and len(v) == 2 and _nat(v[0]) and _nat(v[1])      # noqa: E731
    request = lambda v: (type(v) is dict and set(v) == {"off", "status", "epoch", "master"} and _nat(v["off"])
                         and v["status"] in (*STATUSES, WAITING) and _nat(v["epoch"]) and broker(v["master"]))
    per = {"reachable": lambda v: type(v) is bool, "up": lambda v: type(v) is bool,
           "role": lambda v: v in (MASTER, SLAVE), "bMasterId": broker_or_none, "bEpoch": _nat, "bSSS": brokers,
           "bSssEpoch": _nat, "bRemoteSSS": brokers, "alterPending": lambda v: type(v) is bool, "blog": nat_list,
           "epochCache": lambda v: type(v) is list and all(entry(x) for x in v), "confirm": _nat,
           "staleTail": nat_list, "connected": lambda v: type(v) is bool, "ack": _nat, "cursorEpoch": _nat}
    whole = {"masterId": broker_or_none, "masterEpoch": _nat, "syncStateSet": brokers, "sssEpoch": _nat,
             "reqs": lambda v: type(v) is list and all(request(x) for x in v),
             "inv_pcLost": lambda v: _sorted_set(v, _nat),
             "aux_ctrs": lambda v: type(v) is dict and set(v) == set(COUNTER_KINDS) and all(map(_nat, v.values()))}
    if set(obj) != set(per) | set(whole):
        return "not one key per spec variable"
    for name, ok in whole.items():
        if not ok(obj[name]):
            return f"{name}: not a value of the spec's type"
    for name, ok in per.items():
        v = obj[name]
        if not (type(v) is list and len(v) == n and all(ok(x) for x in v)):
            return f"{name}: not one value of the spec's type per broker"
    return None


@attrs.frozen
class FailoverTrace:
    """A failover trace as read (every line checked for form): its configuration and its steps."""
    cfg: FailoverConfig
    bugs: tuple[str, ...]
    source: str
    steps: tuple[tuple[str, object, int], ...]   # (label, observed state, None or NOT_A_STATE, line number)


def read_failover_trace(lines: Iterable[str], name: str) -> FailoverTrace:
    """Read and check the form of every line of file ``name``: FailoverTraceError (file:line and the
    field) for malformed input.  What the steps mean is the checkers' (twin or TLC) to say."""
    it = iter(enumerate(lines, start=1))
    first = next(((n, raw) for n, raw in it if raw.strip()), None)
    if first is None:
        raise FailoverTraceError(f"{name}: empty trace (no header line)")
    cfg, bugs, source = _config(_object(first[1], f"{name}:{first[0]}"), f"{name}:{first[0]}")
    if len(first[1]) > MAX_LINE_CHARS:
        raise FailoverTraceError(f"{name}:{first[0]}: line longer than {MAX_LINE_CHARS} characters")
    steps = []
    for n, raw in it:
        if not raw.strip():
            continue
        where = f"{name}:{n}"
        obj = _object(raw, where)
        if not {"step", "action"} <= set(obj) <= {"step", "action", "state"}:
            raise FailoverTraceError(f"{where}: expected the fields step and action (and maybe state)")
        observed = obj.get("state")
        if observed is not None and not isinstance(observed, dict):
            raise FailoverTraceError(f"{where}: state: expected a JSON object (one key per spec variable)")
        if observed is not None and state_problem(cfg, observed) is not None:
            observed = NOT_A_STATE
        if obj["step"] != len(steps) + 1 or isinstance(obj["step"], bool):
            raise FailoverTraceError(f"{where}: step {obj['step']!r}, expected {len(steps) + 1}")
        label = obj["action"]
        if not isinstance(label, str) or not LABEL.fullmatch(label):
            raise FailoverTraceError(f"{where}: action: expected a spec action label such as ReplicaConnect(b2)")
        try:
            parse_label(cfg, label)
        except LabelError as err:
            raise FailoverTraceError(f"{where}: {err}") from None
        if len(steps) >= MAX_STEPS:
            raise FailoverTraceError(f"{where}: more than {MAX_STEPS} steps in one trace")
        steps.append((label, observed, n))
    return FailoverTrace(cfg, bugs, source, tuple(steps))


def check_failover_lines(lines: Iterable[str], name: str) -> FailoverVerdict:
    """Read the trace ``lines`` of file ``name`` and replay them through the twin (see the module doc).
    FailoverTraceError for malformed input."""
    return check_failover_trace(read_failover_trace(lines, name), name)


def check_failover_trace(trace: FailoverTrace, name: str) -> FailoverVerdict:
    """The twin's verdict on a trace read by read_failover_trace."""
    cfg = trace.cfg
    frontier: set[FState] = {initial_state(cfg)}
    taken: Counter[str] = Counter()
    for steps, (label, observed, n) in enumerate(trace.steps, start=1):
        frontier = set() if observed is NOT_A_STATE else \
            {t for s in frontier for t in allowed(cfg, s, label) if observed is None or state_json(t) == observed}
        if not frontier:
            return FailoverVerdict(steps, False, n, label, trace.bugs, trace.source, tuple(sorted(taken.items())))
        taken[label.split("(", 1)[0]] += 1
        if len(frontier) > MAX_FRONTIER:
            raise FailoverTraceError(f"{name}:{n}: {len(frontier)} spec states fit the labels so far (more than "
                                     f"{MAX_FRONTIER}): the trace says too little to check")
    return FailoverVerdict(len(trace.steps), True, None, None, trace.bugs, trace.source, tuple(sorted(taken.items())))
