"""The campaign's input files, fuzzed: `ackorder fuzz --config-matrix FILE` (``load_matrix``) and an
OUT directory's summary.json (``ledger.load_summary``, read by `fuzz-report --out` and `tlc
--coverage --fuzz-out`).  Each is its documented error in one line naming the file, or a result the
campaign can use — never another exception.  What each caught is in its docstring."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.sim.params import draw
from spark_fuzz import ledger
from spark_fuzz.seeds import load_matrix
from spec.config import ConfigError

SMALL = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FULL = settings(SMALL, max_examples=3_000)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=10)
HOSTILE = [b"\xff\xfe", b"9" * 5000, b"[" * 50_000, b"", b"[", b'[{"replicas": ' + b"1" * 5000 + b"}]",
           b'\xef\xbb\xbf[{"replicas": 2}]']
KNOBS = st.sampled_from(["replicas", "bug", "flush_disk_type", "net_delay_ms", "fsync_failure_probability",
                         "mapped_file_size_commit_log", "no_such_knob"])
VALUES = st.one_of(JSON, st.sampled_from(["2", 2, "SYNC_FLUSH", "5,1", [0, 2], [5, 1], "nan", -1, "BugAckOnWrote",
                                          "²", "١", 2**40]))


def matrices() -> st.SearchStrategy[bytes]:
    entries = st.lists(st.dictionaries(KNOBS, VALUES, max_size=3), max_size=3)
    return st.one_of(entries.map(lambda v: json.dumps(v).encode()), JSON.map(lambda v: json.dumps(v).encode()),
                     st.sampled_from(HOSTILE))


def write(tmp_path_factory, name: str, raw: bytes):
    path = tmp_path_factory.mktemp("in") / name
    path.write_bytes(raw)
    return path


def check_matrix(path) -> None:
    try:
        matrix = load_matrix(path)
    except ConfigError as err:
        assert str(err).startswith(str(path)) and "\n" not in str(err), str(err)
        return
    assert matrix
    for pairs in matrix:
        draw(0, dict(pairs))                     # each row is one a seed runs with


@SMALL
@given(matrices())
def test_a_config_matrix_is_rows_or_a_config_error(tmp_path_factory, raw):
    """Caught: an integer of over 4,300 digits (ValueError) and nesting deeper than the stack
    (RecursionError) escaped `ackorder fuzz --config-matrix` as tracebacks."""
    check_matrix(write(tmp_path_factory, "matrix.json", raw))


@pytest.mark.full
@FULL
@given(matrices())
def test_a_config_matrix_is_rows_or_a_config_error_full(tmp_path_factory, raw):
    check_matrix(write(tmp_path_factory, "matrix.json", raw))


def summaries() -> st.SearchStrategy[bytes]:
    good = {"campaign": "c1", "seeds": 3, "steps": 10, "outcomes": {"ok": 3}, "reproducers": [], "by_config": {}}
    changed = st.fixed_dictionaries({}, optional={k: st.one_of(st.just(v), JSON) for k, v in good.items()})
    return st.one_of(changed.map(lambda v: json.dumps(v).encode()), JSON.map(lambda v: json.dumps(v).encode()),
                     st.sampled_from(HOSTILE + [b'{"campaign": "c", "seeds": ' + b"1" * 5000 + b"}"]))


def check_summary(out) -> None:
    try:
        summary = ledger.load_summary(out)
    except ledger.LedgerError as err:
        assert "summary.json" in str(err) and "\n" not in str(err), str(err)
        return
    for key, kind in ledger.SUMMARY_KEYS.items():
        assert isinstance(summary[key], kind)


@SMALL
@given(summaries())
def test_a_summary_is_a_campaign_s_or_a_ledger_error(tmp_path_factory, raw):
    """Caught: an integer of over 4,300 digits (ValueError) and nesting deeper than the stack
    (RecursionError) escaped `ackorder fuzz-report --out DIR` as tracebacks."""
    path = write(tmp_path_factory, "summary.json", raw)
    check_summary(path.parent)


@pytest.mark.full
@FULL
@given(summaries())
def test_a_summary_is_a_campaign_s_or_a_ledger_error_full(tmp_path_factory, raw):
    path = write(tmp_path_factory, "summary.json", raw)
    check_summary(path.parent)
