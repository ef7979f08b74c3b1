"""TLC on every small model: the outcome the manifest expects, the counts it
recorded, and every counterexample is a behaviour of the Python twin that
violates the same property (tla/tests/smallmodel.py).  The write path's bug
models are run by reference/tests/counterexamples/test_up_to_date.py, which
checks the same of that one run and that the committed counterexample test
is what the run gives; three models by test_coverage.py, with -coverage."""

import shutil

import attrs

import pytest

from tla.manifest import checks_liveness, load_manifest
from tla.tests.smallmodel import RUN_WITH_COVERAGE, check_small_model_run
from tla.tlc import C1_BELOW_STATES, TlcOptions, run_model

pytestmark = pytest.mark.tlc
SMALL = [m for m in load_manifest() if m.size == "small"]
# Run (once) by test_up_to_date.py, which checks their counterexample tests on the same run.
WITH_COUNTEREXAMPLE_TEST = {m.model for m in SMALL if m.kind == "bug" and m.is_write_path}


# A liveness model that passes makes TLC search the whole behaviour graph for a fair lasso: the
# longest runs here (20-70 s each), left to `ackorder run --full` as `ackorder run` leaves them.
# Their twin checks (test_twin_matches_tlc.py) and the liveness bug models stay in `make test`.
# So do the passing safety models large enough for TLC to need its C2 JIT (C1_BELOW_STATES:
# forged_ack_sync_master_tsp, forged_ack_sync_both_all, failover_crash; 55,000-200,000 states,
# 16-20 s each on the idle 2-core machine, the longest TLC runs left): `make run` (`ackorder run`)
# checks the same outcome and counts against the manifest on each, and their twin checks stay.
SLOW = {m.model for m in SMALL if m.expected == "pass"
        and (checks_liveness(m) or (m.distinct_states or 0) >= C1_BELOW_STATES)}


@pytest.mark.parametrize("model", [pytest.param(m, marks=pytest.mark.full) if m.model in SLOW else m
                                   for m in SMALL if m.model not in WITH_COUNTEREXAMPLE_TEST
                                   and m.model not in RUN_WITH_COVERAGE],
                         ids=lambda m: m.model)
def test_small_model(model, tmp_path):
    check_small_model_run(model, run_model(model, TlcOptions(workers=1), tmp_path))


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
    run = run_model(attrs.evolve(model, cfg=str(tmp_path / model.cfg)), TlcOptions(workers=1), tmp_path / "logs")
    assert run.outcome == "error"
    assert any("AckOrder.tla:" in e for e in run.errors), run.errors
    assert any(f":{line}:" in e or f":{line + 1}:" in e for e in run.errors), run.errors
