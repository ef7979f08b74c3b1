"""The z3 proofs: every green configuration proved, every bug variant a
reachable CTI, and each CTI's path replayed through the twin, where the
same property breaks — so the abstraction and the spec agree."""

import json
import re

import pytest

from spec.actions import initial_state, replica_connect, successors
from spec.config import Bounds
from spec.functions import is_prefix
from spec.properties import INVARIANTS
from spec.proofs import SAFETY_HALF, Abstract, cti_path, properties, prove, vacuous_actions
from tla.manifest import CONTROLLERS_MODULE, FAILOVER_MODULE, SPEC_MODULE, spec_configs as manifest_configs
from spec.state import WAITING

BOUNDS = Bounds(max_puts=4, max_master_process_crashes=2, max_master_machine_crashes=2, max_replica_crashes=2,
                max_replica_disconnects=2, max_fsync_failures=2, max_write_failures=2, max_forged_reports=2)
CRASHES = {"MasterProcessCrash", "MasterMachineCrash"}
# No xdist_group: both workers take these tests, and tla/tests/conftest.py shares each proof
# result between them (spec/proofmemo.py), so none is computed twice.


# The configurations `ackorder prove` proves, one test each, so both workers share them (the
# CLI test then reads the results, spec/proofmemo.py); the CLI test checks them all again.
@pytest.mark.parametrize("name, cfg, expected", manifest_configs("green"), ids=lambda v: v if isinstance(v, str) else "")
def test_green_configuration_is_inductive(name, cfg, expected):
    results = prove(name, cfg)
    assert {r.invariant for r in results} >= set(properties(Abstract(cfg)))
    assert [r for r in results if r.result != "proved"] == []
    assert vacuous_actions(cfg) == []


def test_a_weakened_invariant_is_not_inductive(monkeypatch):
    """The step case bites: without S_AckedDurable, AckedSurvivesCrash has a CTI (prove unmemoized,
    so the real proofs stay as they are)."""
    from spec import proofs

    name, cfg, _ = manifest_configs("green")[0]
    whole = proofs.strengthening
    monkeypatch.setattr(proofs, "strengthening",
                        lambda a: {k: f for k, f in whole(a).items() if k != "S_AckedDurable"})
    results = {r.invariant: r for r in proofs.prove.__wrapped__(name, cfg)}
    assert results["AckedSurvivesCrash"].result == "CTI", results["AckedSurvivesCrash"]
    assert results["AckedSurvivesCrash"].cti["action"] in {a for a in proofs.actions(
        proofs.Abstract(cfg), proofs.S(proofs.Abstract(cfg), "x"), proofs.S(proofs.Abstract(cfg), "y"))}
    assert [r.result for n, r in results.items() if n != "AckedSurvivesCrash"] == ["proved"] * (len(results) - 1)


def _violated(cfg, s, expected: str) -> bool:
    if expected == "EveryRequestAnswered":     # its safety half: a waiter nothing can time out
        waiting = [i for i, r in enumerate(s.reqs, 1) if r.status == WAITING and not r.flush_done]
        labels = {label for label, _ in successors(cfg, BOUNDS, s)}
        return any(f"Timeout({i})" not in labels for i in waiting)
    if expected == "ReplicasCatchUp":          # its safety half: a slave that follows the master is refused
        return s.mstate == "UP" and any(
            s.rUp[k] and not s.connected[k] and is_prefix(s.rlog[k], s.log[: s.committed])
            and not replica_connect(cfg, s, k) for k in range(len(cfg.replicas)))
    return not INVARIANTS[expected](cfg, s)


def _replay(cfg, s, path: list[str], expected: str, depth: int = 0) -> bool:
    """Depth-first through the twin's successors whose labels match the path."""
    if not path:
        return _violated(cfg, s, expected)
    name, _, arg = path[0].partition("(")
    want = name + (f"(r{int(arg.rstrip(')')) + 1})" if arg else "")
    for label, t in successors(cfg, BOUNDS, s):
        base = re.sub(r"\(\d+\)$", "", label)
        if label != want and base != want:
            continue
        if name in CRASHES:                    # the abstract crash includes the recovery
            t = next((u for lab, u in successors(cfg, BOUNDS, t) if lab == "Recover"), None)
            if t is None:
                continue
        if _replay(cfg, t, path[1:], expected, depth + 1):
            return True
    return False


@pytest.mark.parametrize("name, cfg, expected", manifest_configs("bug"), ids=lambda v: v if isinstance(v, str) else "")
def test_cti_path_breaks_the_same_property_in_the_twin(name, cfg, expected):
    path = cti_path(cfg, expected)
    assert path is not None, f"{name}: no path to a violation of {SAFETY_HALF.get(expected, expected)}"
    assert _replay(cfg, initial_state(cfg), path, expected), f"{name}: {path} does not violate {expected} in the twin"


@pytest.mark.parametrize("name, cfg, expected", manifest_configs("bug"), ids=lambda v: v if isinstance(v, str) else "")
def test_the_same_path_is_harmless_without_the_bug(name, cfg, expected):
    import attrs

    path = cti_path(cfg, expected)
    fixed = attrs.evolve(cfg, bugs=frozenset())
    assert not _replay(fixed, initial_state(fixed), path, expected)


def _prove_from_the_far_end() -> None:
    """What `ackorder prove` computes, in the reverse of its order and of the per-item tests'
    (spec/proofmemo.py keeps each result for the CLI), passing over what the other worker is
    computing now: the two meet in the middle instead of one waiting in lockstep behind the other."""
    from cli.prove import failover_twin_paths
    from spec import proofmemo
    from spec import proofs as write_path
    from spec.failover import proofs as failover

    paths = failover_twin_paths([name for name, _, _ in manifest_configs("bug", FAILOVER_MODULE)])
    items = [(lambda n, cfg, expected: failover.bug_cti(n, cfg, expected, paths.get(n)), c)
             for c in reversed(manifest_configs("bug", FAILOVER_MODULE))]
    items += [(write_path.bug_cti, c) for c in reversed(manifest_configs("bug", SPEC_MODULE))]
    for module, spec in ((failover, FAILOVER_MODULE), (write_path, SPEC_MODULE)):
        items += [(f, c) for c in reversed(manifest_configs("green", spec))
                  for f in (lambda n, cfg, _, m=module: m.prove(n, cfg), lambda _, cfg, __, m=module: m.vacuous_actions(cfg))]
    with proofmemo.skipping_busy():
        for f, config in items:
            try:
                f(*config)
            except proofmemo.Busy:
                pass                           # the CLI below waits for it, if it is not done by then


# Last in the module: by then the tests above (on both workers) have found much of what it reports.
def test_prove_proves_green_and_finds_a_reachable_cti_for_every_bug(tmp_path):
    from cli.main import build_parser

    _prove_from_the_far_end()
    args = build_parser().parse_args(["prove", "--json", str(tmp_path / "prove.json")])
    assert args.func(args) == 0
    out = json.loads((tmp_path / "prove.json").read_text())
    assert out["ok"]
    assert all(r["result"] == "proved" for g in out["green"] for r in g["results"])
    assert all(not g["vacuous"] for g in out["green"])

    bugs = {b["config"]: b for b in out["bugs"]}
    every = {name for name, _, _ in [*manifest_configs("bug"), *manifest_configs("bug", FAILOVER_MODULE),
                                     *manifest_configs("bug", CONTROLLERS_MODULE)]}
    assert set(bugs) == every
    for b in bugs.values():
        assert b["result"] == "CTI" and b["cti"]["reachable_in"] is not None, b


def test_a_ctrl_c_during_a_check_reaches_pythons_handler_not_z3s():
    """z3 used to take SIGINT itself during a check: one that landed where z3 did not cancel the
    check was lost (no handler ran, nothing recorded), and a `prove` run once went on to "all proofs
    hold", exit 0, after a Ctrl-C (`test_a_ctrl_c_stops_prove_with_130`, now and then).  The signal
    must reach the process's handler, and the check must raise KeyboardInterrupt once it returns."""
    import os
    import signal
    import threading

    import z3

    from spec import proofs

    xs = [z3.Int(f"x{i}") for i in range(60)]
    solver = z3.Solver()
    solver.set("timeout", 3000)                 # a check that runs until the signal has landed
    solver.add(z3.Sum(*[x * x * (i + 1) for i, x in enumerate(xs)]) == 1_234_567_891, *[x >= 0 for x in xs])
    seen: list[int] = []

    def record(signum, frame):                  # as cli/prove.py's handler: only recorded
        seen.append(signum)
        proofs.STOP.set()

    previous = signal.signal(signal.SIGINT, record)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            proofs.check(solver)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
        proofs.STOP.clear()
    assert seen == [signal.SIGINT], "z3 took the Ctrl-C: no handler of the process saw it"
