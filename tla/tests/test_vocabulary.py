"""One vocabulary: the TLA+ spec, the Python twin and the manifest use the
same names, and every property is shown to bite by some bug or reach model."""

import re

from spec import actions
from spec.cfgfile import load_cfg
from spec.config import BUG_NAMES
from spec.properties import ACTION_PROPERTIES, INVARIANTS, LIVENESS_PROPERTIES, SAFETY
from tla.manifest import TLA_DIR, load_manifest

ALL_MODELS = load_manifest()
MODELS = [m for m in ALL_MODELS if m.is_write_path]          # the write path (MCAckOrder)
FAILOVER_MODELS = [m for m in ALL_MODELS if m.is_failover]     # controller-driven failover (MCAckOrderFailover)


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


# --- the failover module (tla/AckOrderFailover*.tla, spec/failover/) -----------------------

def test_every_failover_action_has_a_twin_function_of_the_same_name():
    from spec.failover import actions as failover_actions

    text = (TLA_DIR / "AckOrderFailover.tla").read_text()
    names = re.findall(r"\(\* ACTION: (\w+)", text)
    assert len(names) >= 18
    missing = [n for n in names if not callable(getattr(failover_actions, snake(n), None))]
    assert not missing
    for name in names:
        assert re.search(rf"^{name}(\([\w, ]+\))? ==", text, re.M), name
    for header in re.findall(r"\(\* ACTION: .*?\*{20,}\)", text, re.S):   # every header says who and which code
        assert "(* WHO:" in header and "(* CODE:" in header, header[:60]
    fair = re.search(r"^FairnessOver\(ids\) ==(.*?)^SpecOver", text, re.M | re.S).group(1)
    assert set(re.findall(r"WF_vars\((\w+?)(?:If)?\(", fair)) | {"ElectMaster"} == set(failover_actions.FAIR_ACTIONS)


def test_every_failover_twin_property_is_defined_in_tla():
    from spec.failover.properties import ACTION_PROPERTIES as F_ACTION, INVARIANTS as F_INV, LIVENESS_PROPERTIES

    text = (TLA_DIR / "AckOrderFailoverProperties.tla").read_text() + (TLA_DIR / "AckOrderFailoverTypes.tla").read_text()
    for name in [*F_INV, *F_ACTION, "MasterEventuallyStable"]:
        assert re.search(rf"^{name} ==", text, re.M), name
    mc = (TLA_DIR / "MCAckOrderFailover.tla").read_text()
    for name in [*F_INV, *F_ACTION, *LIVENESS_PROPERTIES]:
        assert re.search(rf"^{name}\s+== FO!", mc, re.M), name


def test_failover_bug_switches_are_the_same_in_tla_and_python():
    from spec.failover.config import FAILOVER_BUG_NAMES

    types = (TLA_DIR / "AckOrderFailoverTypes.tla").read_text()
    mc = (TLA_DIR / "MCAckOrderFailover.tla").read_text()
    declared = re.findall(r"^\s+(Bug\w+),?\s", types[types.index("CONSTANTS\n    BugNoAllAck"):], re.M)
    assert tuple(declared) == FAILOVER_BUG_NAMES
    assert not set(FAILOVER_BUG_NAMES) & set(BUG_NAMES)
    for bug in FAILOVER_BUG_NAMES:
        assert re.search(rf'{bug}\s+<- ActiveBug = "{bug}"', mc), bug
        assert f'"{bug}"' in mc[mc.index("BugNames =="):mc.index("ASSUME ActiveBug")], bug


def test_each_failover_bug_switch_has_one_bug_model_and_it_fails():
    from spec.failover.config import FAILOVER_BUG_NAMES

    active = {}
    for m in FAILOVER_MODELS:
        bug = load_cfg(m.cfg_path).constants["ActiveBug"][0]
        if bug != "none":
            assert m.kind == "bug" and m.model == bug, m.model
            active.setdefault(bug, []).append(m)
    assert sorted(active) == sorted(FAILOVER_BUG_NAMES)
    assert all(len(ms) == 1 and ms[0].expected != "pass" for ms in active.values())


def test_at_least_eight_zoo_bugs_are_modelled_with_their_rocketmq_issue():
    zoo = {m.title.split(",")[0] for m in FAILOVER_MODELS if m.kind == "bug" and m.title.startswith("B")}
    assert len(zoo & {"B10", "B11", "B12", "B13", "B14", "B16", "B19", "B21", "B24"}) >= 8, zoo
    doc = (TLA_DIR.parent / "docs" / "model.md").read_text()
    for m in FAILOVER_MODELS:
        if m.kind == "bug":
            assert m.model in doc, f"docs/model.md does not name {m.model}"


def test_every_failover_property_is_bitten_by_a_bug_model():
    from spec.failover.properties import LIVENESS_PROPERTIES, SAFETY as F_SAFETY

    bitten = {m.expected for m in FAILOVER_MODELS if m.kind == "bug"}
    must_bite = (set(F_SAFETY) - {"TypeOK"}) | set(LIVENESS_PROPERTIES) - {"EveryRequestAnswered"}
    assert must_bite <= bitten, must_bite - bitten


def test_every_failover_debug_invariant_has_a_reachability_model():
    from spec.failover.properties import ACTION_PROPERTIES as F_ACTION, INVARIANTS as F_INV

    debug = {n for n in [*F_INV, *F_ACTION] if n.startswith("Debug_")}
    assert debug == {m.expected for m in FAILOVER_MODELS if m.kind == "reach"}


def test_failover_green_and_bug_models_check_every_safety_property():
    from spec.failover.properties import SAFETY as F_SAFETY

    for m in FAILOVER_MODELS:
        cfg = load_cfg(m.cfg_path)
        if m.kind in ("green", "bug") and cfg.specification is None:
            assert cfg.invariants == F_SAFETY, m.model
            assert cfg.symmetry == "FollowerSymmetry", m.model
        if cfg.specification is not None:
            assert cfg.symmetry is None, m.model   # symmetry is unsound for liveness


# --- the controllers module (tla/AckOrderControllers.tla, spec/controllers/, reference/failover/shards.py) ---

CONTROLLERS_MODELS = [m for m in ALL_MODELS if m.is_controllers]


def test_every_controllers_action_has_a_twin_function_and_a_header():
    from spec.controllers import actions as c_actions

    text = (TLA_DIR / "AckOrderControllers.tla").read_text()
    headers = re.findall(r"\(\* ACTION: ([\w() /,]+?)\s+\*\)", text)
    names = {n for h in headers for n in re.findall(r"(\w+)(?:\([\w, ]*\))?", h)}
    assert names >= {"TakeShard", "LeaseExpires", "Heartbeat", "Expire", "BrokerCrash", "BrokerRestart", "Read",
                     "ElectMaster", "AlterSyncStateSet"}
    assert not [n for n in names if not callable(getattr(c_actions, snake(n), None))]
    for name in names:
        assert re.search(rf"^{name}(\([\w, ]+\))? ==", text, re.M), name
    for header in re.findall(r"\(\* ACTION: .*?\*{20,}\)", text, re.S):
        assert "(* WHO:" in header and "(* CODE:" in header, header[:60]


def test_every_controllers_twin_property_is_defined_in_tla():
    from spec.controllers.properties import ACTION_PROPERTIES as C_ACTION, INVARIANTS as C_INV

    text = (TLA_DIR / "AckOrderControllers.tla").read_text()
    mc = (TLA_DIR / "MCAckOrderControllers.tla").read_text()
    for name in [*C_INV, *C_ACTION]:
        assert re.search(rf"^{name} ==", text, re.M), name
        assert re.search(rf"^{name}\s+== CS!", mc, re.M), name


def test_controllers_bug_switches_are_the_same_in_tla_python_and_the_runtime():
    from reference.failover.shards import SHARD_BUG_NAMES
    from spec.controllers.config import CONTROLLERS_BUG_NAMES

    text = (TLA_DIR / "AckOrderControllers.tla").read_text()
    mc = (TLA_DIR / "MCAckOrderControllers.tla").read_text()
    declared = re.findall(r"^\s+(Bug\w+),?\s", text[text.index("CONSTANTS\n    BugCommitWithoutCompare"):], re.M)
    assert tuple(declared) == CONTROLLERS_BUG_NAMES == SHARD_BUG_NAMES
    for bug in CONTROLLERS_BUG_NAMES:
        assert re.search(rf'{bug}\s+<- ActiveBug = "{bug}"', mc), bug


def test_each_controllers_bug_has_one_model_every_property_bites_and_docs_name_them():
    from spec.controllers.config import CONTROLLERS_BUG_NAMES
    from spec.controllers.properties import ACTION_PROPERTIES as C_ACTION, SAFETY as C_SAFETY

    active = {}
    for m in CONTROLLERS_MODELS:
        bug = load_cfg(m.cfg_path).constants["ActiveBug"][0]
        if bug != "none":
            assert m.kind == "bug" and m.model == bug, m.model
            active.setdefault(bug, []).append(m)
    assert sorted(active) == sorted(CONTROLLERS_BUG_NAMES)
    assert all(len(ms) == 1 and ms[0].expected != "pass" for ms in active.values())
    bitten = {m.expected for m in CONTROLLERS_MODELS if m.kind == "bug"}
    assert (set(C_SAFETY) - {"TypeOK"}) | set(C_ACTION) <= bitten
    doc = (TLA_DIR.parent / "docs" / "model.md").read_text()
    assert [m.model for m in CONTROLLERS_MODELS if m.kind == "bug" and m.model not in doc] == []
