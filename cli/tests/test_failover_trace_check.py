"""`ackorder trace-check` on failover traces (spec/failover/tracecheck.py): the simulator's trace of a
correct run is a behaviour of AckOrderFailover; the trace of a run with any safety switch is not,
and the verdict names the step; malformed input is exit 2 and one line naming file:line."""

from __future__ import annotations

import json

import pytest

from cli import errors
from cli.tests.test_exit_codes import ackorder_in_process, assert_usage_error
from reference.failover.drive import simulate, trace_lines
from spec.failover.config import FAILOVER_BUG_NAMES
from spec.failover.tracecheck import check_failover_lines, header

LIVENESS_ONLY = {"BugElectOnlyOnMasterDeath"}      # MasterEventuallyStable: no finite trace shows it


def _trace(seed: int, bugs: tuple[str, ...] = ()) -> tuple[object, list[str]]:
    states: list = []
    run = simulate(seed, bugs=bugs, states=states)
    return run, trace_lines(run, states, f"seed {seed}")


def test_a_correct_runs_trace_is_valid_and_exit_0(tmp_path):
    run, lines = _trace(3)
    path = tmp_path / "green.ndjson"
    path.write_text("".join(lines))
    p = ackorder_in_process("trace-check", str(path), "--json", str(tmp_path / "v.json"))
    assert p.returncode == errors.OK, p.stdout + p.stderr
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["valid"] and verdict["steps"] == len(run.labels) > 100 and verdict["model"] == "failover"
    assert verdict["checker"] == "TLC and the twin" and verdict["disagreements"] == []


def _first_failing(bug: str):
    """The switch's first failing seed (reference/tests/failover_seeds.py), its run and trace."""
    from reference.tests.failover_seeds import FIRST_FAILING_SEED

    seed = FIRST_FAILING_SEED[bug]
    run, lines = _trace(seed, (bug,))
    assert run.violation, f"{bug}: seed {seed} no longer fails; python -m reference.tests.failover_seeds"
    return seed, run, lines


def _tlc_and_twin_agree(bug: str) -> None:
    from spec.failover.tracecheck import check_failover_trace, read_failover_trace
    from tla.failovertrace import check_failover_tlc

    seed, run, lines = _first_failing(bug)
    trace = read_failover_trace(lines, bug)
    twin = check_failover_trace(trace, bug)
    tlc = check_failover_tlc(trace.cfg, [(label, state) for label, state, _ in trace.steps])
    assert not twin.ok and not tlc.ok and tlc.explained + 1 == twin.steps, (bug, seed, twin, tlc)


@pytest.mark.parametrize("bug", ["BugNoAllAck", "BugTransferCursorNotReset", "BugSlaveConfirmFromMaxOffset"])
def test_tlc_rejects_a_bugs_trace_at_the_twins_step(bug):
    """tla/AckOrderFailoverTrace.tla over the generated trace module: the same first unexplained step."""
    _tlc_and_twin_agree(bug)


@pytest.mark.full
@pytest.mark.parametrize("bug", sorted(set(FAILOVER_BUG_NAMES) - LIVENESS_ONLY))
def test_tlc_rejects_every_safety_bugs_trace_at_the_twins_step(bug):
    _tlc_and_twin_agree(bug)


def test_a_disagreement_of_tlc_and_the_twin_is_exit_1_and_said(tmp_path, monkeypatch):
    import tla.failovertrace as ft

    run, lines = _trace(3)
    path = tmp_path / "green.ndjson"
    path.write_text("".join(lines))
    monkeypatch.setattr(ft, "check_failover_tlc", lambda cfg, steps, *a, **k: ft.FailoverTlcVerdict(
        False, len(steps), 5, 0.0))
    p = ackorder_in_process("trace-check", str(path))
    assert p.returncode == errors.VIOLATION, p.stdout + p.stderr
    assert "TLC and the twin disagree" in p.stdout and "TLC explains 5 of" in p.stdout


@pytest.mark.parametrize("bug", sorted(set(FAILOVER_BUG_NAMES) - LIVENESS_ONLY))
def test_the_trace_of_each_failover_bug_is_rejected(bug):
    """The first failing seed's trace, written with the switch on, checked with every switch off: the
    step the bug changed is the first one no spec state can take (at or before the violation)."""
    seed, run, lines = _first_failing(bug)
    verdict = check_failover_lines(lines, bug)
    assert not verdict.ok and verdict.steps <= len(run.labels), (bug, seed, verdict)


def test_a_liveness_bug_is_not_judged_on_a_finite_trace():
    bug = "BugElectOnlyOnMasterDeath"
    run, lines = next((r, t) for r, t in (_trace(s, (bug,)) for s in range(50)) if r.violation)
    assert run.violation == "MasterEventuallyStable" and check_failover_lines(lines, bug).ok


def test_a_forged_state_is_exit_1_at_its_step(tmp_path):
    run, lines = _trace(3)
    step = json.loads(lines[20])
    step["state"]["confirm"][0] += 1          # the master claims a confirmOffset its acks do not give
    lines[20] = json.dumps(step) + "\n"
    path = tmp_path / "forged.ndjson"
    path.write_text("".join(lines))
    p = ackorder_in_process("trace-check", str(path))
    assert p.returncode == errors.VIOLATION, p.stdout + p.stderr
    assert f"step 20 ({path}:21, {step['action']})" in p.stdout, p.stdout


HEAD = header(("b1", "b2", "b3"), "b1")


@pytest.mark.parametrize("text, where, needle", [
    ('{"ackorder_trace": 1, "model": "failover", "brokers": ["b1"], "initial_master": "b1"}\n', 1, "header.brokers"),
    ('{"ackorder_trace": 1, "model": "failover", "brokers": ["b1", "b2"], "initial_master": "b9"}\n', 1,
     "header.initial_master"),
    ('{"ackorder_trace": 2, "model": "failover", "brokers": ["b1", "b2"], "initial_master": "b1"}\n', 1, "version"),
    (HEAD + '{"step": 1, "action": "ReplicaConnect(b9)"}\n', 2, "of the brokers b1, b2, b3"),
    (HEAD + '{"step": 1, "action": "Respond(x)"}\n', 2, "names one request by its number"),
    (HEAD + '{"step": 1, "action": "Nope(b1)"}\n', 2, "not a failover action label"),
    (HEAD + '{"step": 2, "action": "Put(b1)"}\n', 2, "step 2, expected 1"),
    (HEAD + '{"step": 1, "action": "Put(b1)", "state": []}\n', 2, "state: expected a JSON object"),
    (HEAD + '{"step": 1, "action": "Put(b1)", "extra": 1}\n', 2, "the fields step and action"),
    (HEAD + '{"step": 1, "action": "Put(b1)", "state": ' + "[" * 50_000 + "\n", 2, "invalid JSON"),
], ids=["one-broker", "unknown-master", "version", "unknown-broker", "request-not-a-number", "unknown-action",
        "step-gap", "state-not-object", "extra-field", "deep"])
def test_malformed_failover_traces_are_exit_2_and_one_line(tmp_path, text, where, needle):
    path = tmp_path / "t.ndjson"
    path.write_text(text)
    p = ackorder_in_process("trace-check", str(path))
    assert_usage_error(p, f"{path}:{where}: ", needle)


def test_flags_that_do_not_apply_to_failover_traces_are_refused(tmp_path):
    path = tmp_path / "t.ndjson"
    path.write_text(HEAD)
    assert_usage_error(ackorder_in_process("trace-check", str(path), "--strict"), "--strict")
    other = tmp_path / "write-path.ndjson"
    other.write_text('{"ackorder_trace": 1}\n')
    assert_usage_error(ackorder_in_process("trace-check", str(path), str(other)), "a write-path trace among")


def test_coverage_over_many_failover_traces_names_every_action_and_the_ones_never_taken(tmp_path):
    files = []
    for seed in range(6):
        _, lines = _trace(seed)
        files.append(tmp_path / f"s{seed}.ndjson")
        files[-1].write_text("".join(lines))
    p = ackorder_in_process("trace-check", *map(str, files), "--twin", "--coverage", "--json",
                            str(tmp_path / "v.json"))
    assert p.returncode == errors.OK, p.stdout + p.stderr
    verdict = json.loads((tmp_path / "v.json").read_text())
    from spec.failover.labels import ACTIONS

    assert set(verdict["coverage"]) == set(ACTIONS) and verdict["valid"] and len(verdict["files"]) == 6
    taken = {k for k, v in verdict["coverage"].items() if v["steps"]}
    assert {"Put", "Transfer", "ReplicaAck", "Respond", "ElectMaster"} <= taken, taken
    assert sum(v["steps"] for v in verdict["coverage"].values()) == verdict["steps"]
    assert f"{len(taken)} of {len(ACTIONS)} actions taken" in p.stdout


def test_one_rejected_trace_among_many_is_exit_1_and_named(tmp_path):
    good, bad = tmp_path / "good.ndjson", tmp_path / "bad.ndjson"
    _, lines = _trace(3)
    good.write_text("".join(lines))
    step = json.loads(lines[20])
    step["state"]["confirm"][0] += 1
    bad.write_text("".join(lines[:20] + [json.dumps(step) + "\n"] + lines[21:]))
    p = ackorder_in_process("trace-check", str(good), str(bad), "--twin", "--coverage", "--json",
                            str(tmp_path / "v.json"))
    assert p.returncode == errors.VIOLATION, p.stdout + p.stderr
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["rejected"] == [str(bad)] and verdict["failed_line"] == 21 and not verdict["valid"]


def test_replay_writes_a_failover_trace_and_emits_a_test_that_passes(tmp_path):
    """`ackorder replay --failover --seed S --bug B --trace F --emit-test T`: the trace is what
    trace-check rejects, and the emitted pytest (with the bug: the violation and a rejected trace;
    without: none) passes against today's reference."""
    bug = "BugShrinkBeforeCommit"
    from reference.tests.failover_seeds import failing_seed

    seed = failing_seed(bug)
    trace, test = tmp_path / "t.ndjson", tmp_path / "test_emitted.py"
    p = ackorder_in_process("replay", "--failover", "--seed", str(seed), "--steps", "400", "--bug", bug,
                            "--trace", str(trace), "--emit-test", str(test))
    assert p.returncode == errors.VIOLATION, p.stdout + p.stderr
    assert ackorder_in_process("trace-check", str(trace)).returncode == errors.VIOLATION
    namespace: dict = {}
    exec(compile(test.read_text(), str(test), "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert len(tests) == 2
    for f in tests:
        f()
    clean = ackorder_in_process("replay", "--failover", "--seed", str(seed), "--steps", "400",
                                "--emit-test", str(tmp_path / "x.py"))
    assert_usage_error(clean, "--emit-test", ran_first=True)


@pytest.mark.parametrize("forge", [
    lambda s: s["role"].__setitem__(0, 'MASTER" \\/ TRUE \\/ "'),       # TLA+ text in a string
    lambda s: s.__setitem__("ack", [2**40, 0, 0]),                      # past TLC's integers
    lambda s: s.__setitem__("blog", "<<>>"),                            # a value of another type
    lambda s: s.pop("aux_ctrs"),                                        # a variable missing
    lambda s: s["up"].__setitem__(0, 1),                                # 1 for True (equal in Python)
    lambda s: s.__setitem__("syncStateSet", s["syncStateSet"] * 2),     # a set with duplicates (TLC: equal)
])
def test_a_state_no_spec_state_has_is_rejected_by_tlc_and_the_twin_at_its_step(tmp_path, forge):
    run, lines = _trace(3)
    step = json.loads(lines[12])
    forge(step["state"])
    lines[12] = json.dumps(step) + "\n"
    path = tmp_path / "forged.ndjson"
    path.write_text("".join(lines))
    p = ackorder_in_process("trace-check", str(path), "--json", str(tmp_path / "v.json"))
    assert p.returncode == errors.VIOLATION, p.stdout + p.stderr
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["failed_line"] == 13 and verdict["disagreements"] == [], verdict


def test_the_process_files_of_a_run_are_merged_and_checked(tmp_path):
    """trace-check of a real run's process files (spec/failover/procmerge.py): merged, checked by TLC
    and the twin, written with --merged; a history with a PUT_OK before the slave's ack is exit 1 at
    that step; a malformed process file is exit 2 naming file:line; process files mixed with a
    failover trace are refused."""
    from spec.tests.test_failover_procmerge import _alter, _controller, _expanded, _file

    def files(answer_before_ack: bool) -> list[str]:
        b1, b2 = _expanded()
        b1 += [(20, "Put", {"req": 1}), (23 if answer_before_ack else 25, "Respond", {"req": 1}),
               (24, "ReplicaAck", {"slave": "b2", "claim": 1})]
        b2 += [(21, "Transfer", {"records": 1})]
        out = []
        for name, lines in (("controller", _controller(_alter(16))), ("b1", _file("b1", *b1)),
                            ("b2", _file("b2", *b2)), ("b3", _file("b3"))):
            path = tmp_path / ("bad-" if answer_before_ack else "") / f"{name}.ndjson"
            path.parent.mkdir(exist_ok=True)
            path.write_text("".join(lines))
            out.append(str(path))
        return out
    good, merged = files(False), tmp_path / "merged.ndjson"
    p = ackorder_in_process("trace-check", *good, "--merged", str(merged))
    assert p.returncode == errors.OK and "valid" in p.stdout, p.stdout + p.stderr
    assert [json.loads(line)["action"] for line in merged.read_text().splitlines()[1:]][-3:] == \
        ["Transfer(b2)", "ReplicaAck(b2)", "Respond(1)"]
    bad = files(True)
    p = ackorder_in_process("trace-check", "--twin", *bad)
    assert p.returncode == errors.VIOLATION and "Respond(1)" in p.stdout, p.stdout + p.stderr
    with open(bad[1], "a") as f:
        f.write('{"t_ns": 30, "step": "Put"}\n')
    assert_usage_error(ackorder_in_process("trace-check", "--twin", *bad), "b1.ndjson:9: Put has the fields req")
    other = tmp_path / "green.ndjson"
    other.write_text("".join(_trace(3)[1]))
    assert_usage_error(ackorder_in_process("trace-check", *good, str(other)), "check them apart")
