"""TLC on every small model: the outcome the manifest expects, the counts it
recorded, and every counterexample is a behaviour of the Python twin that
violates the same property."""

import re
import shutil

import attrs

import pytest

from spec import properties as write_path
from spec.cfgfile import load_cfg, twin_model_from_cfg
from spec.failover import properties as failover
from tla.manifest import load_manifest
from tla.tlc import TlcOptions, run_model
from tla.trace import replay_in_twin

pytestmark = pytest.mark.tlc
SMALL = [m for m in load_manifest() if m.size == "small"]


@pytest.mark.parametrize("model", SMALL, ids=lambda m: m.model)
def test_small_model(model):
    run = run_model(model, TlcOptions(workers=1))
    assert run.outcome == model.expected, (run.errors, run.log_path)
    if model.counts_are_stable:
        assert (run.distinct_states, run.depth) == (model.distinct_states, model.depth)
    if run.outcome == "pass":
        return
    cfg, bounds = twin_model_from_cfg(load_cfg(model.cfg_path))
    steps = replay_in_twin(cfg, bounds, list(run.trace))   # raises if TLC took a step the twin cannot
    states = [s.state for s in steps if s.state is not None]
    props = failover if model.is_failover else write_path
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


def test_a_broken_spec_is_an_error_naming_file_and_line(tmp_path):
    from tla.manifest import TLA_DIR

    for f in TLA_DIR.glob("*.tla"):
        shutil.copy(f, tmp_path / f.name)
    model = next(m for m in SMALL if m.model == "sync_flush")
    shutil.copy(model.cfg_path, tmp_path / model.cfg)
    spec = tmp_path / "AckOrder.tla"
    text = spec.read_text().replace("Commit ==\n", "Commit ==\n    /\\ (\n", 1)
    spec.write_text(text)
    line = text.splitlines().index("    /\\ (") + 1
    run = run_model(attrs.evolve(model, cfg=str(tmp_path / model.cfg)), TlcOptions(workers=1))
    assert run.outcome == "error"
    assert any("AckOrder.tla:" in e for e in run.errors), run.errors
    assert any(f":{line}:" in e or f":{line + 1}:" in e for e in run.errors), run.errors
