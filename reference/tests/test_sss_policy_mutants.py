"""Defects seeded in the SyncStateSet policy (reference/failover/sss_policy.py) — none of them a
named bug switch — against the failover simulator and `ackorder fuzz --model failover`.

The node (reference/real/node.py) decides its SyncStateSet with this module's ``decide`` and
``may_expand``, the same functions the failover simulator checks against AckOrderFailover.tla at
every step: a defect here is a defect in both, and the fuzzer must find it.  A mutant that no
seed can find must be shown equivalent, with its reason checked over a bounded domain, so
"survived" never hides a gap in the checks.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reference.failover import sss_policy
from reference.failover.drive import simulate
from spark_fuzz.seeds import derive_seed

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(sss_policy.__file__)

# name -> (the text replaced in sss_policy.py, its replacement)
CAUGHT = {
    # a slave that has caught up with confirmOffset (not with the log end) joins: the records past
    # it were acknowledged by this master alone (its set was {itself}), and the new member can be
    # elected without them (the refinement check sees it first, at the ExpandSyncStateSet the spec
    # does not allow)
    "expand_at_confirm": ("return ack == log_end_offset and", "return ack >= confirm_offset and"),
}
# name -> (text, replacement, the invariant that makes the mutant equivalent: (ack, end, confirm, start) -> bool)
EQUIVALENT = {
    # ack == log_end_offset >= confirm_offset: a master's confirmOffset never passes its log end
    # (ReplicasManager.check_invariants, the spec's ConfirmWithinLog)
    "expand_ignores_confirm": (" and ack >= confirm_offset and", " and",
                               lambda ack, end, confirm, start: confirm <= end),
    # ack == log_end_offset >= epoch_start_offset: the current epoch starts at or before the log end
    "expand_ignores_epoch_start": (" and ack >= epoch_start_offset\n", "\n",
                                   lambda ack, end, confirm, start: start <= end),
    # a slave one byte behind: acks and log ends are record boundaries (MasterCore refuses a report
    # that is not, and one past its log), and a record is longer than one byte (HEADER_SIZE = 20)
    # — caught by the record-level simulator this replaced, where one unit was one record
    "expand_one_behind": ("return ack == log_end_offset and", "return ack + 1 >= log_end_offset and",
                          lambda ack, end, confirm, start: ack <= end and end - ack != 1),
}


def _mutated(name: str, table: dict) -> dict:
    old, new = table[name][:2]
    text = SOURCE.read_text()
    assert text.count(old) == 1, f"{name}: the text to mutate is no longer in sss_policy.py once"
    namespace: dict = {"__name__": "sss_policy_mutant"}
    exec(compile(text.replace(old, new), f"{SOURCE}:{name}", "exec"), namespace)
    return namespace


def _first_violation(seeds: int, campaign: str = "sss-mutant") -> tuple[int, object] | None:
    for index in range(seeds):
        run = simulate(derive_seed(campaign, index), 400)
        if run.violation:
            return index, run
    return None


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_a_defect_seeded_in_the_policy_is_found_by_the_failover_simulator(name, monkeypatch):
    """In-process, the seeds a campaign draws: the mutant is found within 1,000 seeds, and
    the clean policy runs the same seeds green."""
    mutant = _mutated(name, CAUGHT)
    with monkeypatch.context() as patch:
        patch.setattr(sss_policy, "may_expand", mutant["may_expand"])
        found = _first_violation(1_000)
    assert found is not None, f"{name}: survived 1,000 seeds of the failover simulator"
    index, run = found
    assert run.violation == "Refinement" and run.labels[-1].startswith("ExpandSyncStateSet"), (run.violation,
                                                                                               run.labels[-1:])
    assert _first_violation(index + 1) is None, "the clean policy fails the same seeds: not the mutant's catch"


@pytest.mark.parametrize("name", sorted(EQUIVALENT))
def test_an_equivalent_mutant_is_equivalent_under_its_stated_reason(name):
    """Equivalent over every small input that satisfies the invariant its reason names, and
    distinguishable without it — so the reason is the whole story."""
    mutant = _mutated(name, EQUIVALENT)["may_expand"]
    holds = EQUIVALENT[name][2]
    sss, me = frozenset({"b1"}), "b1"
    differs_outside = False
    for ack, end, confirm, start in itertools.product(range(4), repeat=4):
        acks = {"b2": ack}
        same = mutant(me, sss, frozenset(), acks, end, confirm, start, "b2") == \
            sss_policy.may_expand(me, sss, frozenset(), acks, end, confirm, start, "b2")
        if holds(ack, end, confirm, start):
            assert same, (name, ack, end, confirm, start)
        differs_outside |= not same
    assert differs_outside, f"{name}: the mutant is the original whatever the input; the table is stale"


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_fuzz_failover_finds_a_defect_seeded_in_the_policy_source(name, tmp_path):
    """Through the product: a copy of the project with the mutant written into sss_policy.py,
    `ackorder fuzz --model failover --seeds 1000 --max-failures 1` on a real SparkSession
    (its workers import the mutated file) exits 1 on a refinement failure at the expansion."""
    tree = tmp_path / "tree"
    for package in ("cli", "reference", "spec", "stateful_tests", "tla", "spark_fuzz", "docs"):
        shutil.copytree(ROOT / package, tree / package,
                        ignore=shutil.ignore_patterns("__pycache__", ".ackorder"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    target = tree / "reference" / "failover" / "sss_policy.py"
    old, new = CAUGHT[name][:2]
    target.write_text(target.read_text().replace(old, new, 1))
    done = subprocess.run([sys.executable, "-m", "cli", "fuzz", "--model", "failover", "--seeds", "1000",
                           "--max-failures", "1", "--batch-seeds", "100", "--no-audit", "--out",
                           str(tmp_path / "out")], cwd=tree, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "Refinement at ExpandSyncStateSet" in out, out[-3000:]
