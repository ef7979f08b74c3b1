"""The failover z3 abstraction (spec/failover/proofs.py): every green
configuration's invariant is inductive with no vacuous action, every failover
bug has a reachable CTI on the twin's counterexample pinned in z3, and each
bug's abstract path, replayed through the twin, breaks the same property there
(and is harmless without the bug).  z3's own bounded model check finds no
shorter path than the twin's, and its path replays through the twin too."""

import re

import attrs
import pytest
import z3

from cli.prove import failover_twin_paths
from spec.failover.actions import initial_state, successors
from spec.failover.config import FailoverBounds
from spec.failover.proofs import (BMC_ONLY, PATH_FROM_BMC, PATH_FROM_TWIN, SAFETY_HALF, Abstract, abstract_path,
                                  bug_cti, cti_path, pinned_violation, properties, prove, vacuous_actions)
from tla.manifest import FAILOVER_MODULE, spec_configs


def manifest_configs(kind):
    return spec_configs(kind, FAILOVER_MODULE)
from spec.failover.properties import INVARIANTS, stable_master

BOUNDS = FailoverBounds(max_puts=4, max_broker_crashes=2, max_power_losses=2, max_cut_offs=2, max_disconnects=2,
                        max_sss_proposals=4, max_elections=4)
BUGS = manifest_configs("bug")
# z3's own bounded model check, depth by depth, of the bugs whose shortest path is 6 steps or more
# takes 4-110 CPU-s each (BugSlaveConfirmFromMaxOffset's 12 steps: about 110 s): its cross-check
# against the twin's path is left to `ackorder run --full` for them.
DEEP_BMC = frozenset({"BugNoAllAck", "BugCommittedSssOnly", "BugConfirmOverConnected", "BugTransferCursorNotReset",
                      "BugTruncateNotDurable", "BugElectKeepsEpoch", "BugAlterWithoutFencing",
                      "BugSlaveConfirmFromMaxOffset", "BugShrinkBeforeCommit"})
BMC_BUGS = [pytest.param(*c, marks=pytest.mark.full) if c[0] in DEEP_BMC else c for c in BUGS]
# No xdist_group: both workers take these tests, and tla/tests/conftest.py shares each proof
# result between them (spec/proofmemo.py), so none is computed twice.


def twin_path(name: str) -> tuple[str, ...] | None:
    return failover_twin_paths([name]).get(name)


@pytest.mark.parametrize("name, cfg, expected", manifest_configs("green"), ids=lambda v: v if isinstance(v, str) else "")
def test_green_failover_configuration_is_inductive(name, cfg, expected):
    results = prove(name, cfg)
    assert {r.invariant for r in results} >= {"AckedSurvivesFailover", "OneMasterPerEpoch", "SSSContainsMaster"}
    assert not set(BMC_ONLY) & {r.invariant for r in results}
    assert [r for r in results if r.result != "proved"] == []
    assert vacuous_actions(cfg) == []


@pytest.mark.parametrize("name, cfg, expected", BUGS, ids=lambda v: v if isinstance(v, str) else "")
def test_failover_bug_has_a_reachable_cti(name, cfg, expected):
    r = bug_cti(name, cfg, expected, twin_path(name))
    assert r.result == "CTI" and r.cti["reachable_in"] is not None, r
    assert r.cti["reachable_in"] < r.cti["property_violated_after"] or r.cti["reachable_in"] == 0
    # every twin path to an invariant's violation is one of the abstraction's: none falls back
    assert r.cti["path_from"] == (PATH_FROM_TWIN if expected in INVARIANTS else PATH_FROM_BMC), r.cti["path_from"]


@pytest.mark.parametrize("name, cfg, expected", BMC_BUGS, ids=lambda v: v if isinstance(v, str) else "")
def test_z3s_own_bounded_model_check_agrees_with_the_twin(name, cfg, expected):
    """The abstraction's own shortest path is real: it replays through the twin (with bounds wider
    than the TLC model's) to the same violation, and is harmless without the bug.  It is never longer
    than the twin's path; it may be shorter, where the model's bounds cut a path (BugTruncateNotDurable:
    11 steps with a power loss, which its model leaves out, against the twin's 12)."""
    path = cti_path(cfg, expected)
    assert path is not None, f"{name}: z3 finds no path to a violation of {SAFETY_HALF.get(expected, expected)}"
    if (pinned := twin_path(name)) is not None:
        assert len(path) <= len(pinned), (path, pinned)
    assert _replay(cfg, initial_state(cfg), path, expected, set()), f"{name}: {path} does not violate {expected}"
    fixed = attrs.evolve(cfg, bugs=frozenset())
    assert not _replay(fixed, initial_state(fixed), path, expected, set())


def test_a_path_z3_cannot_follow_is_not_taken():
    """The pinned check can say no: the twin's path of a bug, in the abstraction without the bug,
    reaches no violation; a path with a step the abstraction does not name falls back to z3's own
    bounded model check, and says so."""
    name, cfg, expected = next(c for c in BUGS if c[0] == "BugUncleanElection")
    path = twin_path(name)
    assert path is not None
    fixed = attrs.evolve(cfg, bugs=frozenset())
    a = Abstract(fixed)
    assert pinned_violation(a, properties(a)[expected], abstract_path(a, fixed, path), "nobug") == (z3.unsat, None)
    r = bug_cti(name, cfg, expected, (*path, "Stuttering"))
    assert r.result == "CTI" and r.cti["path_from"].startswith(PATH_FROM_BMC + " (the twin's path has a step"), r


def test_a_weakened_invariant_is_not_inductive(monkeypatch):
    """The step case bites: without S_AckedHeld, AckedSurvivesFailover has a CTI (prove unmemoized,
    so the real proofs stay as they are)."""
    from spec.failover import proofs

    name, cfg, _ = manifest_configs("green")[0]
    whole = proofs.strengthening
    monkeypatch.setattr(proofs, "strengthening", lambda a: {k: f for k, f in whole(a).items() if k != "S_AckedHeld"})
    results = {r.invariant: r for r in proofs.prove.__wrapped__(name, cfg)}
    assert results["AckedSurvivesFailover"].result == "CTI", results["AckedSurvivesFailover"]
    assert results["AckedSurvivesFailover"].cti["post"]["rSt"] == "PUT_OK"
    assert [r.result for n, r in results.items() if n != "AckedSurvivesFailover"] == ["proved"] * (len(results) - 1)


def _violated(cfg, s, expected: str) -> bool:
    if expected == "MasterEventuallyStable":     # its safety half: no master, a live SSS member, no election
        live_member = any(s.up[cfg.index(b)] and s.reachable[cfg.index(b)] for b in s.syncStateSet)
        return (s.masterId == cfg.no_broker and live_member and not stable_master(cfg, s)
                and not any(label == "ElectMaster" for label, _ in successors(cfg, BOUNDS, s)))
    return not INVARIANTS[expected](cfg, s)


def _twin_label(cfg, abstract: str) -> str:
    """'ReplicaConnect(1)' -> 'ReplicaConnect(b2)'; 'Respond' stays a prefix."""
    name, _, args = abstract.partition("(")
    if not args:
        return name
    names = [cfg.brokers[int(x)] for x in args.rstrip(")").split(",")]
    return f"{name}({','.join(names)})"


def _replay(cfg, s, path: list[str], expected: str, seen: set) -> bool:
    """Depth-first through the twin's successors whose labels match the abstract path."""
    if not path:
        return _violated(cfg, s, expected)
    want = _twin_label(cfg, path[0])
    for label, t in successors(cfg, BOUNDS, s):
        if label != want and re.sub(r"\(\d+\)$", "", label) != want:
            continue
        key = (len(path), t)
        if key in seen:
            continue
        seen.add(key)
        if _replay(cfg, t, path[1:], expected, seen):
            return True
    return False


@pytest.mark.parametrize("name, cfg, expected", BUGS, ids=lambda v: v if isinstance(v, str) else "")
def test_cti_path_breaks_the_same_property_in_the_twin(name, cfg, expected):
    path = cti_path(cfg, expected, twin_path(name))
    assert path is not None, f"{name}: no path to a violation of {SAFETY_HALF.get(expected, expected)}"
    assert _replay(cfg, initial_state(cfg), path, expected, set()), f"{name}: {path} does not violate {expected}"


@pytest.mark.parametrize("name, cfg, expected", BUGS, ids=lambda v: v if isinstance(v, str) else "")
def test_the_same_path_is_harmless_without_the_bug(name, cfg, expected):
    path = cti_path(cfg, expected, twin_path(name))
    fixed = attrs.evolve(cfg, bugs=frozenset())
    assert not _replay(fixed, initial_state(fixed), path, expected, set())
