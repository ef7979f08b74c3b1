"""The controllers' z3 abstraction (spec/controllers/proofs.py): the green configuration's
invariant is inductive with unbounded epochs, revisions and tokens, both action properties
hold on every step from it, no action is vacuous; every bug's TLC counterexample (the twin's,
the same length) is a path of the abstraction, and on it the inductive invariant breaks at a
reachable step: a CTI.  Without the bug the same path is not a violation."""

import attrs
import pytest

from cli.prove import failover_twin_paths
from spec.controllers.proofs import ACTION_PROPERTIES, STATE_PROPERTIES, bug_cti, pinned_path, prove, vacuous_actions
from tla.manifest import CONTROLLERS_MODULE, spec_configs

GREEN = spec_configs("green", CONTROLLERS_MODULE)
BUGS = spec_configs("bug", CONTROLLERS_MODULE)


def test_the_manifest_has_the_controllers_configurations():
    assert [name for name, _, _ in GREEN] == ["controllers_green"]
    assert {name for name, _, _ in BUGS} == {"BugCommitWithoutCompare", "BugOwnerSkipsMetadataCompare",
                                              "BugNoTakeoverGrace", "BugActAfterLeaseExpired"}


@pytest.mark.parametrize("name, cfg, expected", GREEN, ids=lambda v: v if isinstance(v, str) else "")
def test_green_controllers_configuration_is_inductive(name, cfg, expected):
    results = prove(name, cfg)
    assert {r.invariant for r in results} >= {*STATE_PROPERTIES, *ACTION_PROPERTIES, "OwnerViewSound"}
    assert [r for r in results if r.result != "proved"] == []
    assert vacuous_actions(cfg) == []


@pytest.mark.parametrize("name, cfg, expected", BUGS, ids=lambda v: v if isinstance(v, str) else "")
def test_controllers_bug_has_a_reachable_cti_on_the_twins_path(name, cfg, expected):
    path = failover_twin_paths([name])[name]
    r = bug_cti(name, cfg, expected, path)
    assert r.result == "CTI" and r.cti["reachable_in"] is not None and r.cti["path"] == list(path), r
    assert r.cti["reachable_in"] < r.cti["property_violated_after"]
    answer, found = pinned_path(attrs.evolve(cfg, bugs=frozenset()), tuple(path), expected)
    assert found is None, f"{name}: the twin's path violates {expected} without the bug too"

