"""The twin is exactly the TLA+ spec: on every small cfg its BFS finds the
distinct-state count and depth TLC recorded in tla/manifest.json, and on
every bug or reachability cfg the same verdict (and counterexample length)."""

import pytest

from tla.twincheck import twin_check
from tla.manifest import load_manifest

SMALL = [m for m in load_manifest() if m.size == "small"]


def test_the_manifest_records_counts_for_every_small_model():
    missing = [m.model for m in SMALL if m.distinct_states is None or m.depth is None]
    assert not missing, f"run `ackorder tlc --size small --workers 1 --update-manifest`: {missing}"


@pytest.mark.parametrize("model", SMALL, ids=lambda m: m.model)
def test_twin_agrees_with_tlc(model):
    result = twin_check(model)
    assert result.agrees, f"{model.model}: {result.problems}"
