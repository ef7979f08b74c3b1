"""Spec coverage: the labels of tla/AckOrder.tla and the twin's branch names are one vocabulary,
and on a whole model TLC takes each labelled branch exactly as often as the twin's BFS does; the
labels add no state (the manifest's counts are checked on the same runs, tla/tests/smallmodel.py)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from spec.actions import successors
from spec.cfgfile import load_cfg, model_from_cfg
from spec.coverage import ALL_BRANCHES, BRANCHES, BUG_ONLY, NEEDS, branch_of
from spec.explore import explore
from tla.coverage import branch_counts, label_spans
from tla.manifest import TLA_DIR, load_manifest, resolve
from tla.tests.smallmodel import RUN_WITH_COVERAGE, check_small_model_run
from tla.tlc import TlcOptions, run_model


def test_labels_and_branch_names_are_one_vocabulary():
    text = (TLA_DIR / "AckOrder.tla").read_text()
    labels = set(re.findall(r"\b([A-Z]\w*)(?:\([\w, ]*\))?::", text))
    named = {label for labels_ in BRANCHES.values() for label in labels_}
    taken = {f"{action}Taken" for action, labels_ in BRANCHES.items() if not labels_}
    # every one-branch action but those whose branches TakeReport names (ReplicaAck, ForgedAck) has
    # its last conjunct labelled <Action>Taken, so that TLC counts it
    assert labels == named | taken - {"CommitTaken"}, (labels ^ (named | taken))
    assert set(label_spans()) == labels
    assert set(BUG_ONLY) <= set(ALL_BRANCHES) and set(NEEDS) <= set(ALL_BRANCHES)


@pytest.mark.tlc
@pytest.mark.parametrize("name", RUN_WITH_COVERAGE)
def test_tlc_and_the_twin_take_every_branch_equally_often(name, tmp_path):
    model = resolve(load_manifest(), name)
    cfgfile = load_cfg(model.cfg_path)
    cfg, bounds = model_from_cfg(cfgfile)
    graph = explore(cfg, bounds, tuple(cfgfile.invariants), view=cfgfile.view, keep_graph=True).graph
    twin: Counter = Counter()
    for s in graph.states:
        for label, t in successors(cfg, bounds, s):
            twin[branch_of(cfg, label, s, t)] += 1
    run = run_model(model, TlcOptions(workers=1, coverage_minutes=60), tmp_path)
    check_small_model_run(model, run)        # this model's one TLC run in the suite (test_tlc_models.py)
    tlc = {k: int(v.split()[0].replace(",", "")) for k, v in branch_counts(run.log_path.read_text()).items()}
    assert run.generated_states == sum(twin.values()) + 1
    for key in ALL_BRANCHES:
        action, _, label = key.partition("/")
        if action in ("ReplicaAck", "ForgedAck"):       # TakeReport's branches serve both: TLC counts them together
            assert tlc[key] == twin[f"ReplicaAck/{label}"] + twin[f"ForgedAck/{label}"], key
        else:
            assert tlc[key] == twin[key], (key, tlc[key], twin[key])
    assert sum(1 for k in ALL_BRANCHES if twin[k]) >= 10      # the comparison is not of zeros
