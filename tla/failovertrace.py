"""Failover trace validation by TLC: a failover trace (spec/failover/tracecheck.py) becomes the
generated module AckOrderFailoverTraceData, which tla/AckOrderFailoverTrace.tla follows step by
step with every bug switch off.  A line's state fixes the state after its step, so the behaviours
that follow the trace form one chain and TLC's search depth is the number of steps explained,
plus one.  The verdict must be the twin's (spec/failover/tracecheck.check_failover_lines): the
CLI runs both and reports a disagreement as an unexpected outcome.

Observed states are written from a strict reading of their JSON (spec/failover/state.state_json's
shape: the 23 variables, brokers of the header, the spec's strings, integers TLC holds); a state
of another shape is one no spec state equals, written as "never", which TLC, like the twin,
refuses at that step.  Nothing of the input reaches the module but values so checked.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import attrs

from spec.failover.config import FailoverConfig
from spec.failover.labels import parse_label
from spec.failover.actions import initial_state
from spec.failover.state import COUNTER_KINDS, PER_BROKER, STATUSES, WAITING, FState, state_json
from spec.failover.tracecheck import NOT_A_STATE
from tla.manifest import TLA_DIR, Model
from tla.tlc import TlcOptions, run_model
from tla.tracecheck import TLC_INT_MAX, TraceCheckError, tla_items, tla_string

SPEC_MODULES = ("AckOrderFailoverTypes.tla", "AckOrderFailoverFunctions.tla", "AckOrderFailover.tla",
                "AckOrderFailoverTrace.tla")
ROLES = ("MASTER", "SLAVE")
VARIABLES = tuple(f.name for f in attrs.fields(FState))


class NotAState(ValueError):
    """An observed state of a shape no spec state has."""


@attrs.frozen
class FailoverTlcVerdict:
    ok: bool
    steps: int
    explained: int           # the steps TLC found a behaviour for
    seconds: float


def _int(v) -> str:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= TLC_INT_MAX:
        raise NotAState(f"{v!r} is not a natural number TLC holds")
    return str(v)


def _bool(v) -> str:
    if not isinstance(v, bool):
        raise NotAState(f"{v!r} is not a boolean")
    return "TRUE" if v else "FALSE"


def _list(v, item) -> str:
    if not isinstance(v, list):
        raise NotAState(f"{v!r} is not a list")
    return "<<" + tla_items([item(x) for x in v]) + ">>"


def _set(v, item) -> str:
    if not isinstance(v, list):
        raise NotAState(f"{v!r} is not a list")
    return "{" + ", ".join(item(x) for x in v) + "}"


class _Writer:
    """TLA+ text of one trace's values, checked against its configuration."""

    def __init__(self, cfg: FailoverConfig) -> None:
        self.cfg = cfg

    def broker(self, v) -> str:
        if v == self.cfg.no_broker:
            return "NoBroker"
        if v not in self.cfg.brokers:
            raise NotAState(f"{v!r} is not a broker of the header")
        return tla_string(v)

    def choice(self, v, allowed) -> str:
        if v not in allowed:
            raise NotAState(f"{v!r} is not one of {allowed}")
        return tla_string(v)

    def per_broker(self, v, item) -> str:
        if not isinstance(v, list) or len(v) != len(self.cfg.brokers):
            raise NotAState(f"{v!r} is not one value per broker")
        return "(" + " @@ ".join(f"{tla_string(b)} :> {item(x)}" for b, x in zip(self.cfg.brokers, v)) + ")"

    def entry(self, v) -> str:
        if not isinstance(v, list) or len(v) != 2:
            raise NotAState(f"{v!r} is not an epoch entry")
        return f"<<{_int(v[0])}, {_int(v[1])}>>"

    def request(self, v) -> str:
        if not isinstance(v, dict) or set(v) != {"off", "status", "epoch", "master"}:
            raise NotAState(f"{v!r} is not a request")
        return (f"[off |-> {_int(v['off'])}, status |-> {self.choice(v['status'], (*sorted(STATUSES), WAITING))}, "
                f"epoch |-> {_int(v['epoch'])}, master |-> {self.broker(v['master'])}]")

    def counters(self, v) -> str:
        if not isinstance(v, dict) or set(v) != set(COUNTER_KINDS):
            raise NotAState(f"{v!r} is not aux_ctrs")
        return "[" + ", ".join(f"{k} |-> {_int(v[k])}" for k in COUNTER_KINDS) + "]"

    def state(self, obj: dict, before: dict | None = None) -> str:
        """The record of the variables of ``obj`` that differ from ``before`` (all, without it)."""
        if set(obj) != set(VARIABLES):
            raise NotAState("not one key per spec variable")
        brokers = lambda v: _set(v, self.broker)               # noqa: E731
        value = {
            "masterId": self.broker, "masterEpoch": _int, "syncStateSet": brokers, "sssEpoch": _int,
            "reachable": _bool, "up": _bool, "role": lambda v: self.choice(v, ROLES), "bMasterId": self.broker,
            "bEpoch": _int, "bSSS": brokers, "bSssEpoch": _int, "bRemoteSSS": brokers, "alterPending": _bool,
            "blog": lambda v: _list(v, _int), "epochCache": lambda v: _list(v, self.entry), "confirm": _int,
            "staleTail": lambda v: _list(v, _int), "connected": _bool, "ack": _int, "cursorEpoch": _int,
            "reqs": lambda v: _list(v, self.request), "inv_pcLost": lambda v: _set(v, _int),
            "aux_ctrs": self.counters,
        }
        fields = []
        for name in VARIABLES:
            if before is not None and obj[name] == before[name]:
                continue
            text = self.per_broker(obj[name], value[name]) if name in PER_BROKER else value[name](obj[name])
            fields.append(f"{name} |-> {text}")
        return "[" + (",\n      ".join(fields) if fields else "unchanged |-> TRUE") + "]"

    def observed(self, obj, before: dict | None) -> str:
        """A line's observation; ``before``: the state the step starts from when a line fixed it."""
        if obj is None:
            return '[kind |-> "none"]'
        if obj is NOT_A_STATE:      # spec/failover/tracecheck.state_problem: the twin refuses it too
            return '[kind |-> "never"]'
        try:
            return f'[kind |-> "state", s |-> {self.state(obj, before)}]'
        except NotAState:
            return '[kind |-> "never"]'


def data_module(cfg: FailoverConfig, steps: list[tuple[str, object]]) -> str:
    """The generated module: the trace's configuration and its steps (label, observed state)."""
    w = _Writer(cfg)
    rows = []
    # Each observation lists only what changed since the state before its step (Init's, or the last
    # line's): the module stays linear in what the trace changed, not in its states' size.
    before: dict | None = state_json(initial_state(cfg))
    for label, observed in steps:
        name, args = parse_label(cfg, label)      # the label was read by the twin's reader: known names only
        args_text = "<<" + ", ".join(str(a) if isinstance(a, int) else tla_string(a) for a in args) + ">>"
        rows.append(f"  [action |-> {tla_string(name)}, args |-> {args_text},\n   "
                    f"observed |-> {w.observed(observed, before)}]")
        before = observed if isinstance(observed, dict) else None
    return ("---- MODULE AckOrderFailoverTraceData ----\n\\* Generated by `ackorder trace-check`.\n"
            "EXTENDS Naturals, Sequences, TLC\nCONSTANT NoBroker\n"
            f"TraceBrokers == {{{', '.join(tla_string(b) for b in cfg.brokers)}}}\n"
            f"TraceInitialMaster == {tla_string(cfg.initial_master)}\n"
            "TraceSteps == <<\n" + ",\n".join(rows) + "\n>>\n====\n")


CFG = ("\\* Generated by `ackorder trace-check`.\nCONSTANT NoBroker = NoBroker\n"
       "INIT TraceInit\nNEXT TraceNext\nVIEW TraceView\n")


def check_failover_tlc(cfg: FailoverConfig, steps: list[tuple[str, dict | None]],
                       options: TlcOptions | None = None, keep: Path | None = None) -> FailoverTlcVerdict:
    """TLC's verdict on one failover trace: how many of its steps a behaviour of AckOrderFailover
    (every switch off) explains."""
    options = options or TlcOptions(workers=1, short=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ackorder-ftrace-") as tmp:
        workdir = Path(tmp)
        for name in SPEC_MODULES:
            shutil.copy(TLA_DIR / name, workdir / name)
        (workdir / "AckOrderFailoverTraceData.tla").write_text(data_module(cfg, steps))
        cfg_path = workdir / "AckOrderFailoverTrace.cfg"
        cfg_path.write_text(CFG)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for f in workdir.iterdir():
                shutil.copy(f, keep / f.name)
        model = Model(model="failover-trace", cfg=str(cfg_path), kind="adhoc", size="small", expected="pass",
                      title="failover trace validation", spec=str(workdir / "AckOrderFailoverTrace.tla"))
        run = run_model(model, options, (keep / "logs") if keep is not None else workdir / "logs")
        if run.outcome != "pass" or run.depth is None:
            detail = "; ".join(run.errors) or f"outcome {run.outcome}"
            raise TraceCheckError(f"TLC gave no verdict on the failover trace module: {detail}")
    explained = min(run.depth - 1, len(steps))
    return FailoverTlcVerdict(explained == len(steps), len(steps), explained, time.perf_counter() - start)
