"""`ackorder trace-check` at its edges, as a user runs it: malformed input (a number in another
script's digits, JSON nested past the parser, an integer past Python's digit limit) is exit 2 and
one line naming file:line and the field, never a traceback; a slave that stored two records
swapped is exit 1 naming both steps, by the twin and by TLC; a dropped line is a warning, and exit
2 with --strict; a forged checkpoint is exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import errors
from cli.tests.test_exit_codes import ackorder_in_process, assert_usage_error
from spec import traceformat as tf
from spec.config import Config
from spec.tests.test_trace_edges import forged, answer_differently, sim_text, swapped_run

HEAD = json.dumps(tf.header("sim", Config(replicas=("r1",), flush_mode="SYNC_FLUSH", repl_mode="SYNC_MASTER"),
                            tf.SIM_OBSERVES))


@pytest.mark.parametrize("line, field", [
    ('{"seq": 1, "action": "Put", "obs": {"reqs": {"set": {"²": {"status": "PUT_OK"}}}}}', "obs.reqs.set"),
    ('{"seq": 1, "action": "Respond(\\u0663)"}', "action"),
    ('{"seq": 1, "action": "Put", "obs": ' + "[" * 50_000, "invalid JSON: nested deeper"),
    ('{"seq": 1, "action": "Put", "key": 9' + "9" * 5000 + "}", "invalid JSON: a number of more than"),
], ids=["superscript-id", "arabic-indic-param", "deep", "5000-digits"])
@pytest.mark.parametrize("checker", ["--twin", "tlc"])
def test_malformed_input_is_exit_2_and_one_line(tmp_path, line, field, checker):
    path = tmp_path / "t.ndjson"
    path.write_text(HEAD + "\n" + line + "\n")
    p = ackorder_in_process("trace-check", str(path), *([checker] if checker == "--twin" else []))
    assert_usage_error(p, f"{path}:2: ", field)


def test_a_slave_storing_two_records_swapped_is_exit_1_naming_both(tmp_path):
    paths, slave_line, master_line = swapped_run(tmp_path)
    p = ackorder_in_process("trace-check", "--twin", "--json", str(tmp_path / "v.json"), *map(str, paths))
    assert p.returncode == errors.VIOLATION, p.stdout + p.stderr
    assert slave_line in p.stdout and f"conflicts with {tmp_path}/{master_line}" in p.stdout, p.stdout
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert f"{Path(verdict['failed']['file']).name}:{verdict['failed']['line']}" == slave_line
    assert f"{Path(verdict['conflict']['file']).name}:{verdict['conflict']['line']}" == master_line


@pytest.mark.tlc
def test_tlc_gives_the_swapped_records_the_same_verdict(tmp_path):
    paths, slave_line, master_line = swapped_run(tmp_path)
    p = ackorder_in_process("trace-check", *map(str, paths))
    assert p.returncode == errors.VIOLATION, p.stdout + p.stderr
    assert slave_line in p.stdout and master_line in p.stdout, p.stdout


def test_a_dropped_line_is_a_warning_and_exit_2_with_strict(tmp_path):
    lines = sim_text(3).splitlines()
    dropped = next(i for i, line in enumerate(lines) if '"action":"Put"' in line)
    del lines[dropped]
    path = tmp_path / "gap.ndjson"
    path.write_text("\n".join(lines) + "\n")
    p = ackorder_in_process("trace-check", "--twin", str(path))
    # the line held a Put: the steps after it are not explained either
    assert p.returncode in (errors.OK, errors.VIOLATION), p.stdout + p.stderr
    assert p.stderr.startswith(f"ackorder trace-check: warning: {path}:{dropped + 1}: seq: "), p.stderr
    assert_usage_error(ackorder_in_process("trace-check", "--twin", "--strict", str(path)),
                       f"{path}:{dropped + 1}: seq: ", "missing", "--strict")


def test_a_forged_checkpoint_is_exit_1(tmp_path, monkeypatch):
    text, line = forged(sim_text(0, every=50, monkeypatch=monkeypatch), answer_differently)
    path = tmp_path / "forged.ndjson"
    path.write_text(text)
    p = ackorder_in_process("trace-check", "--twin", str(path))
    assert p.returncode == errors.VIOLATION and f"checkpoint at {path}:{line}" in p.stdout, p.stdout + p.stderr
    assert "FLUSH_DISK_TIMEOUT" in p.stdout and "the state the steps before" in p.stdout, p.stdout


def test_bench_traces_checks_runs_past_the_tlc_limit_by_the_twin_only(tmp_path):
    """`ackorder bench traces --trace-tlc-max-events N`: a run of more events has the twin's figures
    and TLC's cells say "not run" (never a number nobody measured); the others have both."""
    out = tmp_path / "b.json"
    p = ackorder_in_process("bench", "traces", "--trace-events", "1500,2500", "--trace-tlc-max-events", "2000",
                            "--trace-real-messages", "0", "--trace-split-max-events", "0", "--json", str(out))
    assert p.returncode == 0, p.stderr
    first, second = json.loads(out.read_text())["rows"]
    assert first["tlc_s"] > 0 and first["twin_s"] > 0 and first["steps"] > 1500
    assert second["twin_s"] > 0 and second["steps"] > 2500
    assert {second[k] for k in ("tlc_s", "tlc_segments", "tlc_s_per_1000", "tlc_over_twin")} == {"not run"}
