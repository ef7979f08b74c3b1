"""`ackorder tlc` from the command line: listing, selection, JSON, exit codes."""

import json

import pytest

from spec.cli import main
from tla.manifest import MANIFEST_PATH


def test_list_shows_models_with_expectations(capsys):
    assert main(["tlc", "--list", "--kind", "bug"]) == 0
    out = capsys.readouterr().out
    assert "ack_on_wrote_bug" in out and "NoAckBeforeFlush" in out and "sync_flush " not in out


def test_unknown_model_lists_the_available_ones(capsys):
    assert main(["tlc", "no_such_model"]) == 2
    out = capsys.readouterr().out
    assert "unknown model no_such_model" in out and "sync_flush" in out


def test_malformed_manifest_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "manifest.json"
    bad.write_text('{"models": [{"model": "x"}]}')
    assert main(["tlc", "--manifest", str(bad)]) == 2
    assert "models[0]: field 'cfg' missing" in capsys.readouterr().out


@pytest.mark.tlc
def test_json_output_and_counterexample_table(tmp_path, capsys):
    out_file = tmp_path / "out.json"
    assert main(["tlc", "ack_on_wrote_bug", "reach_torn_tail", "--workers", "1", "--json", str(out_file)]) == 0
    rows = json.loads(out_file.read_text())
    assert [r["model"] for r in rows] == ["ack_on_wrote_bug", "reach_torn_tail"]
    assert set(rows[0]) == {"model", "expected", "outcome", "distinct_states", "generated_states", "depth", "seconds"}
    assert rows[0]["outcome"] == "NoAckBeforeFlush"
    out = capsys.readouterr().out
    assert "Counterexample: ack_on_wrote_bug violates NoAckBeforeFlush" in out
    assert "Respond(1)" in out  # the parameter comes from replaying the trace in the twin


@pytest.mark.tlc
def test_exit_code_is_1_when_an_outcome_is_unexpected(tmp_path, capsys):
    data = json.loads(MANIFEST_PATH.read_text())
    for m in data["models"]:
        if m["model"] == "reach_torn_tail":
            m["expected"] = "Debug_NoReplicaAhead"  # a wrong expectation
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(data))
    assert main(["tlc", "reach_torn_tail", "--workers", "1", "--manifest", str(manifest)]) == 1
    assert "unexpected outcome" in capsys.readouterr().out
