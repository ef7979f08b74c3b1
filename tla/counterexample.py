"""A TLC counterexample as data: one step per state, with the action named as the
twin names it (``Respond(1)``, ``Transfer(r1)``: TLC 2.15 does not print action
parameters), what changed, and the whole state — for tables and for JSON."""

from __future__ import annotations

import attrs

from tla.diff import changes
from tla.tlc import TlcRun
from tla.trace import TraceMismatch, replay_in_twin

GHOSTS = ("aux_ctrs", "inv_responses")


@attrs.frozen
class Step:
    number: int | None
    action: str                    # TLC's action name ("Init", "Respond", "Stuttering", "Back to state 3")
    label: str                     # the twin's label with parameters, or TLC's name when not replayed
    changed: tuple[str, ...]       # "reqs[1].status = \"PUT_OK\"", ...
    state: dict[str, str]          # every variable, as TLC printed it

    def to_json(self) -> dict:
        return attrs.asdict(self)


def twin_labels(run: TlcRun) -> tuple[list[str], str | None]:
    """The twin's labels for the run's trace, and why they could not be had (a user's own
    spec has no twin; a TLC step the twin cannot take is a finding and is named)."""
    names = [s.action for s in run.trace]
    if not run.model.in_manifest_spec:
        return names, None
    from spec.cfgfile import load_cfg, twin_model_from_cfg

    try:
        cfg, bounds = twin_model_from_cfg(load_cfg(run.model.cfg_path))
        return [step.label for step in replay_in_twin(cfg, bounds, list(run.trace))], None
    except TraceMismatch as err:
        return names, str(err)


def steps(run: TlcRun) -> tuple[list[Step], str | None]:
    labels, problem = twin_labels(run)
    out: list[Step] = []
    previous: dict[str, str] = {}
    for state, label in zip(run.trace, labels):
        current = state.as_dict()
        if not current:                 # stuttering, or back to an earlier state (a lasso)
            out.append(Step(state.number, state.action, label, (), {}))
            continue
        names = [k for k in current if previous or k not in GHOSTS]
        lines = tuple(line for k in names for line in changes(k, previous.get(k), current[k]))
        out.append(Step(state.number, state.action, label, lines, current))
        previous = current
    return out, problem


def behaviour(run: TlcRun):
    """(twin labels, twin states, spec configuration) of a run's counterexample (Init first)."""
    from spec.cfgfile import load_cfg, model_from_cfg

    cfg, bounds = model_from_cfg(load_cfg(run.model.cfg_path))
    steps = replay_in_twin(cfg, bounds, list(run.trace))
    return [s.label for s in steps], [s.state for s in steps], cfg
