"""The Python twin against TLC: explore spec/ on a model's cfg and compare outcome,
distinct states and depth with a TLC run made just now, or with the manifest's record.

For a passing model everything is compared.  For a violation, the counterexample's
length is (TLC with one worker finds a shortest one, as the twin's BFS does); the
distinct states at the moment of detection depend on the order states are expanded
within a level, so they are shown but not compared.
"""

from __future__ import annotations

import attrs

from spec import proofmemo
from spec.cfgfile import load_cfg
from spec.explore import explore_cfg
from tla.manifest import Model
from tla.tlc import TlcRun


@attrs.frozen
class TwinCheck:
    model: Model
    outcome: str
    distinct_states: int
    depth: int
    seconds: float
    against: str                     # "TLC run" or "manifest"
    tlc_outcome: str
    tlc_distinct_states: int | None
    tlc_depth: int | None
    problems: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return not self.problems

    @property
    def compares_distinct(self) -> bool:
        return self.outcome == "pass"


def _problems(model: Model, outcome: str, distinct: int, depth: int, tlc_outcome: str,
              tlc_distinct: int | None, tlc_depth: int | None, against: str) -> list[str]:
    out = []
    if outcome != model.expected:
        out.append(f"twin outcome {outcome}, expected {model.expected}")
    if outcome != tlc_outcome:
        out.append(f"twin outcome {outcome}, the {against} says {tlc_outcome}")
        return out
    if outcome == "pass":
        if distinct != tlc_distinct:
            out.append(f"{distinct:,} distinct states, the {against} {tlc_distinct if tlc_distinct is None else f'{tlc_distinct:,}'}")
        if depth != tlc_depth:
            out.append(f"depth {depth}, the {against} {tlc_depth}")
    elif model.counts_are_stable and depth != tlc_depth:
        out.append(f"counterexample of {depth} states, the {against} {tlc_depth}")
    return out


@attrs.frozen
class TlcCounts:
    """What a one-worker TLC run of a model found (from a TlcRun, or read back from JSON)."""
    outcome: str
    distinct_states: int | None
    depth: int | None

    @classmethod
    def of(cls, run: TlcRun) -> TlcCounts:
        assert run.options.workers == 1 and run.options.exhaustive, "compare with a one-worker exhaustive run"
        return cls(run.outcome, run.distinct_states, run.depth)


@attrs.frozen
class TwinSearch:
    """What the twin's search of a model found, as plain data (spec/proofmemo.py shares it)."""
    outcome: str
    distinct_states: int
    depth: int                       # of the counterexample, when there is one
    seconds: float
    labels: tuple[str, ...] | None   # the counterexample's actions, Init left out


@proofmemo.memo("twin.search")
def twin_search(model: Model) -> TwinSearch:
    """Explore the twin on ``model``'s cfg: once per process, and once per test session between
    pytest-xdist workers (the twin test and the failover proofs' pinned paths both want it)."""
    assert model.in_manifest_spec, f"{model.model}: the twin only knows this project's specs"
    if model.is_failover:
        from spec.failover.explore import explore_failover_cfg

        result = explore_failover_cfg(load_cfg(model.cfg_path))
    elif model.is_controllers:
        from spec.controllers.explore import explore_controllers_cfg

        result = explore_controllers_cfg(load_cfg(model.cfg_path))
    else:
        result = explore_cfg(load_cfg(model.cfg_path))
    if result.violation is None:
        return TwinSearch(result.outcome, result.distinct_states, result.depth, result.seconds, None)
    trace = result.violation.trace
    depth = len([s for lab, s in trace if lab != "Stuttering" and not lab.startswith("Cycle")])
    return TwinSearch(result.outcome, result.distinct_states, depth, result.seconds,
                      tuple(label for label, _ in trace[1:]))


def twin_check(model: Model, tlc: TlcCounts | None = None) -> TwinCheck:
    """Explore the twin on ``model``; compare with a TLC run (one worker) or the manifest."""
    result = twin_search(model)
    if tlc is not None:
        against, ref = "TLC run", (tlc.outcome, tlc.distinct_states, tlc.depth)
    else:
        against, ref = "manifest", (model.expected, model.distinct_states, model.depth)
    problems = _problems(model, result.outcome, result.distinct_states, result.depth, *ref, against)
    return TwinCheck(model, result.outcome, result.distinct_states, result.depth, result.seconds, against, *ref,
                     problems=tuple(problems))


def twin_counterexample(model: Model) -> tuple[str, ...] | None:
    """The action labels of the twin's breadth-first counterexample on a bug model of the failover
    or controllers module (as TLC's: shortest within the model's bounds), or None when the twin's
    search ends otherwise than in a violation of the model's expected property (a liveness bug's
    lasso is no path to a state).  spec/failover/proofs.py and spec/controllers/proofs.py pin it
    in z3."""
    from spec.controllers import properties as controllers
    from spec.failover.properties import INVARIANTS

    assert (model.is_failover or model.is_controllers) and model.kind == "bug", model.model
    # the controllers' z3 pins a path to an action property's violation too (its last step)
    pinned = {**controllers.INVARIANTS, **controllers.ACTION_PROPERTIES} if model.is_controllers else INVARIANTS
    if model.expected not in pinned:
        return None
    result = twin_search(model)
    return result.labels if result.outcome == model.expected else None
