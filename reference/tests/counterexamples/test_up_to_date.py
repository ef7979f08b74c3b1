"""The committed counterexample tests (one per bug model, `ackorder tlc --kind bug --emit-test
reference/tests/counterexamples`) are what TLC and the generator give today.  A safety
counterexample is reproducible (one TLC worker), so its file is regenerated and compared; TLC's
liveness counterexamples vary from run to run (as their counts do, tla/manifest.py), so for those
the committed behaviour must still be a behaviour of today's spec that ends with the property's
goal unmet."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.emit import COUNTEREXAMPLE_TESTS, emit_for_run, counterexample_file
from spec.actions import initial_state, successors
from spec.cfgfile import load_cfg, model_from_cfg
from spec.properties import caught_up, diverged
from tla.check import judge
from tla.manifest import load_manifest
from tla.tests.smallmodel import check_small_model_run
from tla.tlc import TlcOptions, run_model

pytestmark = pytest.mark.tlc
# The write path's bug models: the failover ones (issue 14) have no controller in the reference to drive.
BUG_MODELS = [m for m in load_manifest() if m.kind == "bug" and m.size == "small" and m.is_write_path]
REGENERATE = "ackorder tlc --kind bug --size small --emit-test reference/tests/counterexamples"


def _namespace(path: Path) -> dict:
    ns: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)     # the generated module's constants
    return ns


def _still_a_lasso(model, behaviour: list[str]) -> bool:
    cfg, bounds = model_from_cfg(load_cfg(model.cfg_path))
    frontier = [initial_state(cfg)]
    for label in behaviour[1:]:
        if label == "Stuttering" or label.startswith("Back to"):
            break
        frontier = list({t: None for s in frontier for lab, t in successors(cfg, bounds, s) if lab == label})
        if not frontier:
            return False
    if model.expected == "EveryRequestAnswered":
        return any(any(r.status == "WAITING" for r in s.reqs) for s in frontier)
    return any(any(not (diverged(cfg, s, k) or caught_up(cfg, s, k)) for k in range(len(cfg.replicas)))
               for s in frontier)


def test_every_bug_model_has_its_counterexample_test():
    files = {p.name for p in COUNTEREXAMPLE_TESTS.glob("test_*_bug.py")}
    assert files == {counterexample_file(m.model) for m in BUG_MODELS}, f"regenerate with `{REGENERATE}`"


@pytest.mark.parametrize("model", BUG_MODELS, ids=lambda m: m.model)
def test_counterexample_test_is_what_tlc_gives_today(model, tmp_path):
    # This model's one TLC run in the suite: tla/tests/test_tlc_models.py leaves it to this test,
    # which makes the checks test_small_model makes of every other small model on it too.
    run = run_model(model, TlcOptions(workers=1), log_dir=tmp_path)
    check_small_model_run(model, run)
    verdict = judge(run)
    assert verdict.ok, (model.model, verdict.kind, verdict.detail)
    path = COUNTEREXAMPLE_TESTS / counterexample_file(model.model)
    committed = _namespace(path)
    assert committed["BUG"] == model.model and committed["PROPERTY"] in {model.expected, "LogMatching"}
    if model.counts_are_stable:
        rel = path.relative_to(COUNTEREXAMPLE_TESTS.parent.parent.parent)
        emitted = emit_for_run(run, f"ackorder tlc {model.model} --emit-test {rel}")
        assert emitted.text == path.read_text(), f"{path.name} is out of date; regenerate with `{REGENERATE}`"
    else:
        assert _still_a_lasso(model, committed["BEHAVIOUR"]), \
            f"{path.name} is out of date; regenerate with `{REGENERATE}`"
