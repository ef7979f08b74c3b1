"""One vocabulary: the TLA+ spec, the Python twin and the manifest use the
same names, and every property is shown to bite by some bug or reach model."""

import re

from spec import actions
from spec.cfgfile import load_cfg
from spec.config import BUG_NAMES
from spec.properties import ACTION_PROPERTIES, INVARIANTS, LIVENESS_PROPERTIES, SAFETY
from tla.manifest import TLA_DIR, load_manifest

MODELS = load_manifest()


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_tla_action_has_a_twin_function_of_the_same_name():
    text = (TLA_DIR / "AckOrder.tla").read_text()
    names = re.findall(r"\(\* ACTION: (\w+)", text)
    assert len(names) >= 14
    missing = [n for n in names if not callable(getattr(actions, snake(n), None))]
    assert not missing
    for name in names:  # and every action is defined right under its header
        assert re.search(rf"^{name}(\(\w+\))? ==", text, re.M), name


def test_every_twin_property_is_defined_in_tla():
    text = (TLA_DIR / "AckOrderProperties.tla").read_text() + (TLA_DIR / "AckOrderTypes.tla").read_text()
    for name in [*INVARIANTS, *ACTION_PROPERTIES]:
        assert re.search(rf"^{name} ==", text, re.M), name
    assert re.search(r"^EveryRequestAnsweredFor\(ids\) ==", text, re.M)


def test_bug_switches_are_the_same_in_tla_and_python():
    types = (TLA_DIR / "AckOrderTypes.tla").read_text()
    mc = (TLA_DIR / "MCAckOrder.tla").read_text()
    declared = re.findall(r"^\s+(Bug\w+),?\s", types[types.index("CONSTANTS\n    BugAckOnWrote"):], re.M)
    assert tuple(declared) == BUG_NAMES
    for bug in BUG_NAMES:
        assert re.search(rf'{bug}\s+<- ActiveBug = "{bug}"', mc), bug


def test_each_bug_switch_has_one_bug_model_and_it_fails():
    active = {}
    for m in MODELS:
        bug = load_cfg(m.cfg_path).constants["ActiveBug"][0]
        if bug != "none":
            assert m.kind == "bug", m.model
            active.setdefault(bug, []).append(m)
    assert sorted(active) == sorted(BUG_NAMES)
    assert all(len(ms) == 1 and ms[0].expected != "pass" for ms in active.values())


def test_every_safety_and_liveness_property_is_bitten_by_a_bug_model():
    bitten = {m.expected for m in MODELS if m.kind == "bug"}
    must_bite = (set(SAFETY) - {"TypeOK"}) | set(LIVENESS_PROPERTIES)
    assert must_bite <= bitten, must_bite - bitten


def test_every_debug_invariant_has_a_reachability_model():
    debug = {n for n in [*INVARIANTS, *ACTION_PROPERTIES] if n.startswith("Debug_")}
    assert debug == {m.expected for m in MODELS if m.kind == "reach"}


def test_green_models_check_every_safety_property():
    for m in MODELS:
        cfg = load_cfg(m.cfg_path)
        if m.kind == "green" and cfg.specification is None:
            assert cfg.invariants == SAFETY, m.model
        if m.kind == "bug" and cfg.specification is None:
            assert cfg.invariants == SAFETY, m.model  # the bug must be caught with everything else checked
