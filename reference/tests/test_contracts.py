"""CrossHair: the contracts of the pure decision functions hold (no
counterexample within the per-condition budget), and every seeded wrong
version is reported with a counterexample."""

from reference.contracts import TARGETS, crosshair, errors, seeded_module

WRONG = {"replica_coverage_wrong", "covered_count_wrong", "deadline_status_wrong", "decode_frames_wrong",
         "scan_segment_wrong"}


def test_contracts_hold():
    code, lines = crosshair(TARGETS)
    assert code == 0 and not errors(lines), "\n".join(lines)


def test_every_seeded_wrong_function_is_caught(tmp_path):
    module = seeded_module(tmp_path)
    code, lines = crosshair((module,), extra_path=tmp_path)
    found = errors(lines)
    assert code != 0
    assert set(found) == WRONG, f"caught {sorted(found)}; output:\n" + "\n".join(lines)
