"""spec/proofmemo.py: a proof result is computed once across the processes sharing a
directory, keys are the same whatever a process's hash seed, and a result another process
is computing is passed over under ``skipping_busy``."""

import fcntl
import os
import subprocess
import sys

import pytest

from spec import proofmemo


@pytest.fixture
def shared(tmp_path, monkeypatch):
    monkeypatch.setattr(proofmemo, "_memory", {})
    monkeypatch.setattr(proofmemo, "_directory", None)
    proofmemo.share_in(tmp_path / "memo")
    yield tmp_path / "memo"
    proofmemo.share_in(None)


def test_a_result_is_computed_once_and_read_by_another_process(shared, monkeypatch):
    calls = []
    assert proofmemo.memoized("f", (1, frozenset({"a"})), lambda: calls.append(1) or {"x": [1, 2]}) == {"x": [1, 2]}
    assert proofmemo.memoized("f", (1, frozenset({"a"})), lambda: calls.append(1) or "again") == {"x": [1, 2]}
    monkeypatch.setattr(proofmemo, "_memory", {})           # as another process: only the disk
    assert proofmemo.memoized("f", (1, frozenset({"a"})), lambda: calls.append(1) or "again") == {"x": [1, 2]}
    assert calls == [1]
    assert proofmemo.memoized("f", (2, frozenset({"a"})), lambda: calls.append(2) or "other") == "other"
    assert calls == [1, 2]


def test_keys_are_the_same_whatever_the_hash_seed():
    code = ("import attrs; from spec import proofmemo; from tla.manifest import spec_configs; "
            "cfg = attrs.evolve(spec_configs('green')[0][1], bugs=frozenset({'BugAckOnWrote', 'BugTimeoutAsOK', "
            "'BugDoubleResponse', 'BugAckOnCommitted'})); print(proofmemo.key_of('f', 'name', cfg))")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2, 3)}
    assert len(keys) == 1 and keys.pop().startswith("f-")


def test_a_result_being_computed_elsewhere_is_passed_over_only_when_asked(shared):
    key = proofmemo.key_of("g", 7)
    with open(shared / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)                     # another process is computing it
        with proofmemo.skipping_busy(), pytest.raises(proofmemo.Busy):
            proofmemo.memoized("g", (7,), lambda: "computed")
    assert proofmemo.memoized("g", (7,), lambda: "computed") == "computed"


def test_a_value_with_no_canonical_form_is_refused():
    with pytest.raises(AssertionError, match="no canonical form"):
        proofmemo.key_of("f", object())
