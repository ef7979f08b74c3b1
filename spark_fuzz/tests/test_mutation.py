"""`ackorder mutate` (spark_fuzz/mutation/): cosmic-ray's mutants of the cores, judged on Spark."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spark_fuzz.mutation import equivalents
from spark_fuzz.mutation.killsuite import UNIT_TESTS, SuiteOptions
from spark_fuzz.mutation.mutants import (CORE_MODULES, DEFAULT_OPERATORS, ROOT, diff, enumerate_mutants,
                                         mutated_source)
from spec.config import ConfigError

# Chosen from measured campaigns (docs/benchmarks.md, Mutation): one mutant each check kills first, and
# one survivor reviewed as equivalent in spark_fuzz/mutation/equivalent.json.
POLICY = "reference/failover/sss_policy.py"


def _a_master_mutant_outside_ack_deciding() -> str:
    """An id that changes with every edit of master.py: looked up, not written out."""
    from spark_fuzz.mutation.mutants import ACK_DECIDING

    ack = ACK_DECIDING["reference/master.py"]
    return next(m.mutant_id for m in enumerate_mutants(("reference/master.py",), DEFAULT_OPERATORS)
                if m.definition not in ack)
KILLED_BY_UNIT = (POLICY, "core/AddNot", 5)
KILLED_BY_FUZZ = (POLICY, "core/ReplaceComparisonOperator_NotEq_Gt", 0)    # an assertion of the core, on seed 0
EQUIVALENT = (POLICY, "core/NumberReplacer", 4)


def _find(module: str, operator: str, occurrence: int):
    return next(m for m in enumerate_mutants((module,), (operator,)) if m.occurrence == occurrence)


def test_every_core_module_has_unit_tests_that_exist():
    assert set(CORE_MODULES) <= set(UNIT_TESTS)
    for module, tests in UNIT_TESTS.items():
        assert (ROOT / module).is_file(), module
        for test in tests:
            assert (ROOT / test.split("::")[0]).is_file(), test


def test_every_function_named_as_deciding_an_acknowledgement_is_mutated():
    """A name in ACK_DECIDING that matches no function (a typo, a rename) would drop its lines from
    the score that must reach 100% without a word."""
    import ast

    from spark_fuzz.mutation.mutants import ACK_DECIDING

    for module, names in ACK_DECIDING.items():
        assert module in CORE_MODULES, module
        tree = ast.parse((ROOT / module).read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert set(names) <= defined, (module, set(names) - defined)
    mutated = {m.definition for m in enumerate_mutants(tuple(ACK_DECIDING), DEFAULT_OPERATORS)}
    assert len(mutated & {n for names in ACK_DECIDING.values() for n in names}) >= 25


def test_mutants_are_cosmic_rays_one_change_each_and_named_by_their_source(tmp_path):
    mutants = enumerate_mutants(("reference/decisions.py",), DEFAULT_OPERATORS)
    assert len(mutants) > 40 and len({m.mutant_id for m in mutants}) == len(mutants)
    for m in mutants[:25]:
        text = diff(m)
        removed = [line for line in text.splitlines() if line.startswith("-") and not line.startswith("---")]
        added = [line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
        assert len(removed) == 1 and len(added) == 1, text
    # a mutant is of the source it was listed from: an edited module is refused, never mutated blindly
    (tmp_path / "reference").mkdir()
    copy = tmp_path / "reference" / "decisions.py"
    shutil.copy(ROOT / "reference" / "decisions.py", copy)
    copy.write_text(copy.read_text() + "\n# edited\n")
    with pytest.raises(ValueError, match="changed since"):
        mutated_source(mutants[0], tmp_path)


def test_an_equivalence_claim_needs_its_reason(tmp_path):
    reviewed = equivalents.load()
    assert reviewed and all(len(r) >= equivalents.MIN_REASON_CHARS for r in reviewed.values())
    assert _find(*EQUIVALENT).key in reviewed, "the make-test equivalent is no longer reviewed (source changed?)"
    bad = tmp_path / "equivalent.json"
    bad.write_text(json.dumps({_find(*EQUIVALENT).key: "same"}))
    with pytest.raises(ConfigError, match="needs its reason"):
        equivalents.load(bad)
    bad.write_text(json.dumps({"decisions.py": "a reason long enough to be read as one, but no key"}))
    with pytest.raises(ConfigError, match="not a mutant key"):
        equivalents.load(bad)
    bad.write_text("[1]")
    with pytest.raises(ConfigError, match="not an object"):
        equivalents.load(bad)


def test_a_campaign_judges_each_mutant_in_its_own_tree_and_resumes(spark, tmp_path):
    """End to end on the shared local Spark session: a mutant the unit tests kill, one only the seeded
    simulation kills, and a survivor the reviewed file calls equivalent (so the module's score counts
    it out); run again, the ledger has all three and nothing is judged again."""
    from spark_fuzz.mutation.campaign import MutationSpec, read_rows, run_mutation_campaign

    unit, fuzz, equivalent = _find(*KILLED_BY_UNIT), _find(*KILLED_BY_FUZZ), _find(*EQUIVALENT)
    spec = MutationSpec(modules=(POLICY,), out=tmp_path / "out", only=(unit.mutant_id, fuzz.mutant_id,
                        equivalent.mutant_id), suite=SuiteOptions(fuzz_seeds=4), batch=3)
    summary = run_mutation_campaign(spark, spec)
    rows = {r["mutant_id"]: r for r in read_rows(spec.out, summary["campaign"])}
    assert rows[unit.mutant_id]["outcome"] == "killed" and rows[unit.mutant_id]["killed_by"] == "unit"
    assert rows[unit.mutant_id]["detail"].startswith("FAILED reference/tests/"), rows[unit.mutant_id]["detail"]
    assert rows[fuzz.mutant_id]["outcome"] == "killed" and rows[fuzz.mutant_id]["killed_by"] == "fuzz"
    assert rows[fuzz.mutant_id]["detail"].startswith("violation failover seed 0:"), rows[fuzz.mutant_id]["detail"]
    assert rows[equivalent.mutant_id]["outcome"] == "survived"
    assert json.loads(rows[equivalent.mutant_id]["stages"]).keys() == {"unit", "fuzz", "machines"}
    assert summary["outcomes"] == {"killed": 2, "equivalent": 1}
    assert summary["killed_by"] == {"unit": 1, "fuzz": 1}
    assert summary["scores"][POLICY]["score"] == 100.0
    assert summary["equivalents"][0]["key"] == equivalent.key and not summary["survivors"]
    # the working tree stays untouched: each mutant was applied in a copy of a snapshot
    assert (ROOT / POLICY).read_text() == mutated_source(unit)[0]
    progress = []
    again = run_mutation_campaign(spark, spec, lambda done, total: progress.append((done, total)))
    assert progress == [(3, 3)] and again["outcomes"] == summary["outcomes"]


@pytest.mark.parametrize("argv, needle", [
    (("--module", "nope.py", "--list"), "--module nope.py: not a Python file of the tree"),
    (("--module", "reference/failover/group.py", "--list"), "no unit tests are named for it"),
    (("--operators", "Bogus", "--list"), "--operators 'Bogus': unknown: core/Bogus"),
    (("--module", "reference/decisions.py", "--mutant", "deadbeef", "--list"), "--mutant deadbeef: no mutant"),
    (("--fail-under", "200", "--list"), "--fail-under 200.0: a percentage"),
    (("--ack-deciding", "--module", "reference/admission.py", "--list"), "no function of reference/admission.py decides"),
    (("--ack-deciding", "--mutant", _a_master_mutant_outside_ack_deciding(), "--list"),
     "not in a function that decides an acknowledgement"),
    # each was judged and counted twice
    (("--module", POLICY, "--module", POLICY, "--list"), f"--module {POLICY}: named twice"),
    (("--module", POLICY, "--mutant", "0766fc86807bcf81", "--sample", "1", "--list"), "--mutant and --sample"),
    # an empty table and exit 0, --fail-under or not
    (("--module", POLICY, "--operators", "ReplaceBreakWithContinue", "--fail-under", "90"), "no mutant"),
    # the copy of the tree held itself: 628 MB, then a RecursionError
    (("--module", POLICY, "--mutant", "0766fc86807bcf81", "--out", "docs/mutate"), "--out docs/mutate: inside docs/"),
])
def test_wrong_input_is_exit_2_and_one_line(argv, needle):
    from cli.tests import zygote

    done = zygote.run(["mutate", *argv], timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.stderr


def test_a_kill_suite_that_fails_on_the_clean_tree_stops_the_campaign_before_any_mutant():
    """A kill by a red suite proves nothing: the clean baseline must pass, or no mutant is judged
    (`ackorder mutate` exits 1 naming the stage and the module)."""
    from spark_fuzz.mutation.killsuite import CleanSuiteFailed, copy_tree, measure_baseline

    tree = copy_tree()
    try:
        test = tree / UNIT_TESTS[POLICY][0]
        test.write_text(test.read_text() + "\n\ndef test_red():\n    assert False\n")
        with pytest.raises(CleanSuiteFailed, match=f"the unit stage of {POLICY} does not pass on the clean tree"):
            measure_baseline((POLICY,), SuiteOptions(fuzz_seeds=1), tree)
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def test_a_stage_past_its_budget_is_stopped_with_everything_it_started(tmp_path):
    """A mutant that hangs (a loop that no longer ends) is a timeout, and the stage's whole process
    group goes: a child it started (a test's broker) does not outlive it."""
    import os
    import sys

    from spark_fuzz.mutation.killsuite import _run

    pid_file = tmp_path / "child.pid"
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            f" open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    verdict, took, _ = _run([sys.executable, "-c", code], tmp_path, 2.0)
    assert verdict == "timeout" and took < 30, (verdict, took)
    child = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break
        import time
        time.sleep(0.1)
    else:
        raise AssertionError(f"the stage's child {child} outlived its timeout")


def test_a_stage_without_its_clean_time_is_an_error_never_a_survivor():
    """A baseline that lacks a stage (an older file, a stage added since) cannot budget it: before,
    the mutant went through no stage at all and was reported "survived, every stage passed"."""
    from spark_fuzz.mutation.killsuite import Baseline, judge

    row = judge(_find(*KILLED_BY_UNIT), Baseline({}), SuiteOptions(fuzz_seeds=1))
    assert row["outcome"] == "error" and "no clean time for the unit stage" in row["detail"], row


def test_with_all_stages_a_guard_killed_by_its_unit_tests_still_faces_the_simulator_and_the_machine():
    """--all-stages: the stages past the first kill run too, and the report's guard table says what
    each check did with the guard turned around (AddNot#5 is `if remote_sss:` in decide)."""
    from spark_fuzz.mutation.campaign import GUARD_OPERATOR
    from spark_fuzz.mutation.killsuite import Baseline, judge
    from spark_fuzz.mutation.report import markdown

    mutant = _find(*KILLED_BY_UNIT)
    assert mutant.operator == GUARD_OPERATOR
    baseline = Baseline({f"{POLICY}|{stage}": 60.0 for stage in ("unit", "fuzz", "machines")})
    row = judge(mutant, baseline, SuiteOptions(fuzz_seeds=1, all_stages=True))
    stages = json.loads(row["stages"])
    assert row["outcome"] == "killed" and row["killed_by"] == "unit", row
    assert set(stages) == {"unit", "fuzz", "machines"} and stages["unit"]["verdict"] == "fail", stages
    assert stages["machines"]["verdict"] == "fail", stages      # the failover machine reaches it too
    summary = {"campaign": "c", "modules": [POLICY], "operators": "default", "sample": None, "sample_seed": 0,
               "suite": {"fuzz_seeds": 1, "fuzz_steps": 400, "all_stages": True}, "mutants": 1,
               "outcomes": {"killed": 1}, "killed_by": {"unit": 1}, "scores": {}, "seconds": 1, "cpu_wall_s": 1,
               "survivors": [], "equivalents": [], "contradicted": [],
               "guards": [{"module": POLICY, "line": row["line"], "definition": row["definition"], "stages": stages,
                           "outcome": "killed"}]}
    text = markdown(summary)
    assert "## Which checks reach each guard (1 conditions negated" in text
    assert f"| `{POLICY}:{row['line']}` `{row['definition']}` | **kills** |" in text


def test_two_campaigns_in_one_out_directory_are_refused(tmp_path):
    """The second deleted the first's snapshot while its tasks copied from it."""
    from spark_fuzz.mutation.campaign import CampaignBusy, MutationSpec, _lock, run_mutation_campaign

    held = _lock(tmp_path)
    try:
        with pytest.raises(CampaignBusy, match="another mutation campaign is running there"):
            run_mutation_campaign(None, MutationSpec(modules=(POLICY,), out=tmp_path))
    finally:
        held.close()


@pytest.mark.full
def test_a_resume_over_an_edited_tree_is_a_new_campaign_and_a_refuted_claim_is_said(spark, tmp_path):
    """The verdicts are the tree's: a test added between a run and its resume makes a new campaign
    (before, the resume kept the old verdicts, and kept the old baseline without checking that the
    clean suite still passes).  The new test kills the mutant reviewed as equivalent: the summary
    says the claim is refuted."""
    from spark_fuzz.mutation.campaign import MutationSpec, run_mutation_campaign
    from spark_fuzz.mutation.killsuite import copy_tree

    tree = copy_tree()
    try:
        equivalent = _find(*EQUIVALENT)
        spec = MutationSpec(modules=(POLICY,), out=tmp_path / "out", only=(equivalent.mutant_id,),
                            suite=SuiteOptions(fuzz_seeds=2))
        first = run_mutation_campaign(spark, spec, root=tree)
        assert first["outcomes"] == {"equivalent": 1} and not first["contradicted"]
        test = tree / "reference" / "tests" / "test_sss_policy.py"
        test.write_text(test.read_text() + "\n\ndef test_the_bound():\n    assert sss_policy.MAX_TRACKED_MEMBERS == 128\n")
        second = run_mutation_campaign(spark, spec, root=tree)
        assert second["campaign"] != first["campaign"]
        assert second["outcomes"] == {"killed": 1}, second["outcomes"]
        assert [c["key"] for c in second["contradicted"]] == [equivalent.key]
    finally:
        shutil.rmtree(tree, ignore_errors=True)
