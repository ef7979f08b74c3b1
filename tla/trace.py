"""TLC counterexamples, read back into the Python twin.

Each TLC trace state becomes a ``spec.state.State``; each step is then
matched against the twin's successors of the previous state.  That names
the parameters TLC does not print (``Respond(2)``, ``Transfer(r1)``) and is
a cross-check of the twin: every TLC step must be a twin step.
"""

from __future__ import annotations

import attrs

from spec.actions import successors
from spec.config import Bounds, Config
from spec.state import Counters, Request, ResponseEvent, State
from tla.tlcout import TraceState
from tla.values import FunctionValue, Record, parse_value


class TraceMismatch(AssertionError):
    """A TLC step that the twin cannot take."""


def _names(value) -> frozenset[str]:
    return frozenset(str(v) for v in value)


def _per_replica(cfg: Config, fn, convert=lambda v: v) -> tuple:
    if not isinstance(fn, (FunctionValue, Record)):   # a function over strings prints as a record
        raise TraceMismatch(f"expected a function over Replicas, got {fn!r}")
    by_name = {str(k): v for k, v in fn.items()}
    return tuple(convert(by_name[r]) for r in cfg.replicas)


def state_from_tlc(cfg: Config, assignments: dict[str, str]) -> State:
    v = {name: parse_value(text) for name, text in assignments.items()}
    reqs = tuple(Request(r["off"], r["flushDone"], r["status"]) for r in v["reqs"])
    events = frozenset(
        ResponseEvent(
            id=e["id"], off=e["off"], status=e["status"], cause=e["cause"], wrote=e["wrote"],
            committed=e["committed"], flushed=e["flushed"], durable=e["durable"],
            holders=_names(e["holders"]), sss=_names(e["sss"]), written=e["written"],
            precedenceOK=e["precedenceOK"],
        )
        for e in v["inv_responses"]
    )
    ctrs: Record = v["aux_ctrs"]
    return State(
        mstate=v["mstate"], log=tuple(v["log"]), committed=v["committed"], flushed=v["flushed"],
        durable=v["durable"], writable=v["writable"], unwritten=frozenset(v["unwritten"]), landed=v["landed"],
        reqs=reqs,
        connected=_per_replica(cfg, v["connected"]), ack=_per_replica(cfg, v["ack"]),
        push2SlaveMaxOffset=v["push2SlaveMaxOffset"], syncStateSet=_names(v["syncStateSet"]),
        rlog=_per_replica(cfg, v["rlog"], tuple), rUp=_per_replica(cfg, v["rUp"]),
        inv_responses=events, aux_ctrs=Counters(**dict(ctrs)),
    )


def failover_state_from_tlc(cfg, assignments: dict[str, str]):
    """A TLC trace state of MCAckOrderFailover as a spec.failover.state.FState."""
    from spec.failover.state import BROKER_SET_VALUED, PER_BROKER, FCounters, FRequest, FState

    v = {name: parse_value(text) for name, text in assignments.items()}

    def per_broker(name: str) -> tuple:
        fn = v[name]
        if not isinstance(fn, FunctionValue):
            raise TraceMismatch(f"expected a function over Brokers for {name}, got {fn!r}")
        by_name = {str(k): x for k, x in fn.items()}
        out = []
        for b in cfg.brokers:
            x = by_name[b]
            if name in BROKER_SET_VALUED:
                x = _names(x)
            elif name == "bMasterId":
                x = str(x)
            elif name == "epochCache":
                x = tuple(tuple(e) for e in x)
            out.append(x)
        return tuple(out)

    return FState(
        masterId=str(v["masterId"]), masterEpoch=v["masterEpoch"], syncStateSet=_names(v["syncStateSet"]),
        sssEpoch=v["sssEpoch"], **{name: per_broker(name) for name in PER_BROKER},
        reqs=tuple(FRequest(r["off"], r["status"], r["epoch"], str(r["master"])) for r in v["reqs"]),
        inv_pcLost=frozenset(v["inv_pcLost"]), aux_ctrs=FCounters(**dict(v["aux_ctrs"])),
    )


def controllers_state_from_tlc(cfg, assignments: dict[str, str]):
    """A TLC trace state of MCAckOrderControllers as a spec.controllers.state.CState."""
    from spec.controllers.state import CCounters, CState, Snap

    v = {name: parse_value(text) for name, text in assignments.items()}

    def over(name: str, domain: tuple[str, ...], convert=lambda x: x) -> tuple:
        fn = v[name] if name in v else name
        if not isinstance(fn, (FunctionValue, Record)):
            raise TraceMismatch(f"expected a function for {name}, got {fn!r}")
        by_name = {str(k): x for k, x in fn.items()}
        return tuple(convert(by_name[d]) for d in domain)

    def snap(r) -> Snap:
        return Snap(str(r["master"]), r["epoch"], _names(r["sss"]), r["sssEpoch"], r["rev"])

    def heard(fn) -> tuple:
        by_name = {str(k): x for k, x in fn.items()}
        return tuple(by_name[b] for b in cfg.brokers)

    return CState(
        masterId=str(v["masterId"]), masterEpoch=v["masterEpoch"], syncStateSet=_names(v["syncStateSet"]),
        sssEpoch=v["sssEpoch"], rev=v["rev"], owner=str(v["owner"]), token=v["token"],
        up=over("up", cfg.brokers), snap=over("snap", cfg.controllers, snap), held=over("held", cfg.controllers),
        heard=over("heard", cfg.controllers, heard),
        inv_elected=frozenset((e, str(m)) for e, m in v["inv_elected"]),
        inv_silent=over("inv_silent", cfg.brokers), aux_ctrs=CCounters(**dict(v["aux_ctrs"])))


@attrs.frozen
class TwinStep:
    label: str          # the twin's action label, parameters included
    state: State | None


def replay_in_twin(cfg: Config, bounds: Bounds, trace: list[TraceState]) -> list[TwinStep]:
    """Match every TLC step with a twin step; raise TraceMismatch if one has none.
    ``cfg`` is the write path's Config or the failover module's FailoverConfig."""
    from spec.controllers.config import ControllersConfig
    from spec.failover.config import FailoverConfig

    if isinstance(cfg, FailoverConfig):
        from spec.failover.actions import successors as next_states

        to_state = failover_state_from_tlc
    elif isinstance(cfg, ControllersConfig):
        from spec.controllers.actions import successors as next_states

        to_state = controllers_state_from_tlc
    else:
        next_states, to_state = successors, state_from_tlc
    out: list[TwinStep] = []
    previous: State | None = None
    for step in trace:
        if step.action == "Stuttering" or step.action.startswith("Back to"):
            out.append(TwinStep(step.action, previous))
            continue
        state = to_state(cfg, step.as_dict())
        if previous is None:
            label = "Init"
        else:
            labels = [lab for lab, t in next_states(cfg, bounds, previous) if t == state]
            if not labels:
                raise TraceMismatch(f"TLC step {step.number} ({step.action}) is not a step of the twin")
            matching = [lab for lab in labels if lab.split("(")[0] == step.action]
            label = (matching or labels)[0]
        out.append(TwinStep(label, state))
        previous = state
    return out

