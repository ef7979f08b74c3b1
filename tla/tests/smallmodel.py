"""What one TLC run of a small model must show (shared by tla/tests/test_tlc_models.py,
tla/tests/test_coverage.py and reference/tests/counterexamples/test_up_to_date.py, so that a
model's TLC run is made once and read by every check of it): the outcome the manifest expects, the counts it recorded, and every
counterexample is a behaviour of the Python twin that violates the same property."""

from __future__ import annotations

import re

from spec import properties as write_path
from spec.cfgfile import load_cfg, twin_model_from_cfg
from spec.controllers import properties as controllers
from spec.failover import properties as failover
from tla.manifest import Model
from tla.tlc import TlcRun
from tla.trace import replay_in_twin


# Run (once, with -coverage) by tla/tests/test_coverage.py, which makes these checks on that run.
RUN_WITH_COVERAGE = ("sync_master_k2_tsp", "write_fail_sync_flush", "write_fail_sync_flush_tsp")


def check_small_model_run(model: Model, run: TlcRun) -> None:
    assert run.outcome == model.expected, (run.errors, run.log_path)
    if model.counts_are_stable:
        assert (run.distinct_states, run.depth) == (model.distinct_states, model.depth)
    if run.outcome == "pass":
        return
    cfg, bounds = twin_model_from_cfg(load_cfg(model.cfg_path))
    steps = replay_in_twin(cfg, bounds, list(run.trace))   # raises if TLC took a step the twin cannot
    states = [s.state for s in steps if s.state is not None]
    props = failover if model.is_failover else controllers if model.is_controllers else write_path
    INVARIANTS, ACTION_PROPERTIES = props.INVARIANTS, props.ACTION_PROPERTIES
    if run.outcome in INVARIANTS:
        assert not INVARIANTS[run.outcome](cfg, states[-1])
        assert all(INVARIANTS[run.outcome](cfg, s) for s in states[:-1])
    elif run.outcome in ACTION_PROPERTIES:
        assert not ACTION_PROPERTIES[run.outcome](cfg, states[-2], states[-1])
    else:  # liveness: the lasso ends in a state the property's "eventually" never leaves
        from spec.properties import caught_up, diverged

        assert steps[-1].label == "Stuttering" or steps[-1].label.startswith("Back to")
        last = states[-1]
        if run.outcome == "MasterEventuallyStable":   # the cycle (or the stuttering state) has no stable master
            back = re.match(r"Back to state (\d+)", steps[-1].label)
            cycle = states[int(back.group(1)) - 1:] if back else [last]
            assert any(not failover.stable_master(cfg, s) for s in cycle)
        elif run.outcome == "ReplicasCatchUp":
            assert any(not (diverged(cfg, last, k) or caught_up(cfg, last, k)) for k in range(len(cfg.replicas)))
        else:
            assert any(r.status == "WAITING" for r in last.reqs)
