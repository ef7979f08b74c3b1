"""The failover z3 abstraction (spec/failover/proofs.py): every green
configuration's invariant is inductive with no vacuous action, every failover
bug has a reachable CTI, and each bug's abstract path, replayed through the
twin, breaks the same property there (and is harmless without the bug)."""

import re

import attrs
import pytest

from cli.prove import SLOW_CTIS

from spec.failover.actions import initial_state, successors
from spec.failover.config import FailoverBounds
from spec.failover.proofs import BMC_ONLY, SAFETY_HALF, bug_cti, cti_path, prove, vacuous_actions
from tla.manifest import FAILOVER_MODULE, spec_configs


def manifest_configs(kind):
    return spec_configs(kind, FAILOVER_MODULE)
from spec.failover.properties import INVARIANTS, stable_master

BOUNDS = FailoverBounds(max_puts=4, max_broker_crashes=2, max_power_losses=2, max_cut_offs=2, max_disconnects=2,
                        max_sss_proposals=4, max_elections=4)
# The slow CTIs (cli/prove.py's SLOW_CTIS: a 13-step bounded model check, about 110 s) are left to
# `ackorder run --full`, as `ackorder run` leaves them; their tests are marked `full`.
BUGS = [pytest.param(*c, marks=pytest.mark.full) if c[0] in SLOW_CTIS else c for c in manifest_configs("bug")]
# No xdist_group: both workers take these tests, and tla/tests/conftest.py shares each proof
# result between them (spec/proofmemo.py), so none is computed twice.


@pytest.mark.parametrize("name, cfg, expected", manifest_configs("green"), ids=lambda v: v if isinstance(v, str) else "")
def test_green_failover_configuration_is_inductive(name, cfg, expected):
    results = prove(name, cfg)
    assert {r.invariant for r in results} >= {"AckedSurvivesFailover", "OneMasterPerEpoch", "SSSContainsMaster"}
    assert not set(BMC_ONLY) & {r.invariant for r in results}
    assert [r for r in results if r.result != "proved"] == []
    assert vacuous_actions(cfg) == []


@pytest.mark.parametrize("name, cfg, expected", BUGS, ids=lambda v: v if isinstance(v, str) else "")
def test_failover_bug_has_a_reachable_cti(name, cfg, expected):
    r = bug_cti(name, cfg, expected)
    assert r.result == "CTI" and r.cti["reachable_in"] is not None, r
    assert r.cti["reachable_in"] < r.cti["property_violated_after"] or r.cti["reachable_in"] == 0


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
    path = cti_path(cfg, expected)
    assert path is not None, f"{name}: no path to a violation of {SAFETY_HALF.get(expected, expected)}"
    assert _replay(cfg, initial_state(cfg), path, expected, set()), f"{name}: {path} does not violate {expected}"


@pytest.mark.parametrize("name, cfg, expected", BUGS, ids=lambda v: v if isinstance(v, str) else "")
def test_the_same_path_is_harmless_without_the_bug(name, cfg, expected):
    path = cti_path(cfg, expected)
    fixed = attrs.evolve(cfg, bugs=frozenset())
    assert not _replay(fixed, initial_state(fixed), path, expected, set())
