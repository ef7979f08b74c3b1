"""The design model of issue 37 (docs/controllers.md): several controllers over one linearizable
store, each decision a read and then a compare-and-write fenced by a shard lease.  It is a design
check, not yet a spec of the manifest (no twin, no proofs): its four bug switches must each be
caught by the property the design says, and its green model must pass (``-m full``: 25 s)."""

from pathlib import Path

import pytest

from tla.manifest import adhoc_model
from tla.tlc import TlcOptions, run_model

pytestmark = pytest.mark.tlc
HERE = Path(__file__).resolve().parents[2] / "docs" / "design" / "controllers"
SPEC = HERE / "Controllers.tla"


def _outcome(cfg: str, tmp_path: Path, workers: int = 1):
    run = run_model(adhoc_model(HERE / cfg, SPEC), TlcOptions(workers=workers), tmp_path)
    assert not run.errors and run.bad_input is None, (run.errors, run.bad_input)
    return run


@pytest.mark.parametrize("cfg, caught_by, states", [
    ("BugCommitWithoutCompare.cfg", "ElectOnlyASilentMaster", 6),
    ("BugOwnerSkipsMetadataCompare.cfg", "OneMasterPerEpoch", 7),
    ("BugNoTakeoverGrace.cfg", "ElectOnlyASilentMaster", 5),
    ("BugActAfterLeaseExpired.cfg", "ElectOnlyASilentMaster", 6),
])
def test_each_controller_bug_is_caught_by_its_property(cfg, caught_by, states, tmp_path):
    run = _outcome(cfg, tmp_path)
    assert run.outcome == caught_by and len(run.trace) == states, (run.outcome, len(run.trace))


@pytest.mark.full
def test_the_fenced_design_passes(tmp_path):
    run = _outcome("green.cfg", tmp_path, workers=2)
    assert run.outcome == "pass" and run.distinct_states == 1_523_680 and run.depth == 29, \
        (run.outcome, run.distinct_states, run.depth)
