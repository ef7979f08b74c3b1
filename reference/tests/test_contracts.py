"""CrossHair: the contracts of the pure decision functions hold (no
counterexample within the per-condition budget), and every seeded wrong
version is reported with a counterexample.  One test per function, so both
pytest-xdist workers share them."""

import pytest

from reference.contracts import DEEP_PER_CONDITION_TIMEOUT_S, SEEDED_PER_CONDITION_TIMEOUT_S, TARGETS, \
    contract_targets, crosshair, errors, seeded_module

WRONG = ("replica_coverage_wrong", "covered_count_wrong", "deadline_status_wrong", "decode_frames_wrong",
         "scan_segment_wrong")


def test_the_targets_are_the_functions_of_the_modules_named():
    targets = contract_targets()
    assert "reference.decisions.replica_coverage" in targets and "reference.frames.decode_frames" in targets
    assert all(any(t == m or t.startswith(m + ".") for m in TARGETS) for t in targets)
    assert len(targets) == len(set(targets)) >= len(TARGETS)


@pytest.mark.parametrize("target", contract_targets())
def test_contracts_hold(target):
    code, lines = crosshair((target,))
    assert code == 0 and not errors(lines), "\n".join(lines)


@pytest.mark.full
@pytest.mark.parametrize("target", contract_targets())
def test_contracts_hold_under_a_deep_search(target):
    """The same, with fifteen times the budget per condition (`make run --full`)."""
    code, lines = crosshair((target,), timeout_s=DEEP_PER_CONDITION_TIMEOUT_S)
    assert code == 0 and not errors(lines), "\n".join(lines)


@pytest.mark.parametrize("wrong", WRONG)
def test_every_seeded_wrong_function_is_caught(tmp_path, wrong):
    module = seeded_module(tmp_path)
    code, lines = crosshair((f"{module}.{wrong}",), extra_path=tmp_path, timeout_s=SEEDED_PER_CONDITION_TIMEOUT_S)
    found = errors(lines)
    assert code != 0
    assert set(found) == {wrong}, f"caught {sorted(found)}; output:\n" + "\n".join(lines)


def test_every_seeded_wrong_function_is_tested(tmp_path):
    """The seeded module defines exactly the wrong functions tested above, one each."""
    import re

    source = (tmp_path / f"{seeded_module(tmp_path)}.py").read_text()
    assert sorted(re.findall(r"^def (\w+)\(", source, re.M)) == sorted(WRONG)
