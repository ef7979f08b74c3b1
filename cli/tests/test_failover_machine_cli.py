"""The failover Hypothesis machine from the command line: `ackorder stateful --machine failover`
writes its failover traces (`trace-check` reads them), a failing program replays with `ackorder
replay --program`, and `--emit-test` turns it into a standalone pytest."""

from __future__ import annotations

import subprocess
import sys

from cli import errors
from cli.tests.test_exit_codes import ackorder, ackorder_in_process

# Found by `ackorder stateful --machine failover --bug BugNoAllAck --examples 200` (2026-11-28, the
# byte-level group).
PROGRAM = """state = FailoverMachine_BugNoAllAck()
state.start()
state.abstraction_is_current()
state.broker_power_loss(b='b1', keep=0, lose_epoch_write=False)
state.abstraction_is_current()
state.elect_master()
state.abstraction_is_current()
state.schedule(n=21, seed=0)
state.teardown()
"""

def test_the_failover_machine_writes_a_trace_that_trace_check_accepts(tmp_path):
    trace = tmp_path / "machine.ndjson"
    p = ackorder("stateful", "--machine", "failover", "--examples", "3", "--trace", str(trace), timeout=300)
    assert p.returncode == errors.OK, p.stdout + p.stderr
    check = ackorder_in_process("trace-check", str(trace))
    assert check.returncode == errors.OK and "checked by TLC and the twin" in check.stdout, check.stdout + check.stderr


def test_a_failing_failover_program_replays_its_trace_leaves_the_spec_and_becomes_a_test(tmp_path):
    program, trace, emitted = tmp_path / "p.py", tmp_path / "t.ndjson", tmp_path / "test_emitted.py"
    program.write_text(PROGRAM)
    p = ackorder_in_process("replay", "--program", str(program), "--trace", str(trace))
    assert p.returncode == errors.VIOLATION and "reproduced: AckedSurvivesFailover" in p.stdout, p.stdout + p.stderr
    check = ackorder_in_process("trace-check", str(trace))
    assert check.returncode == errors.VIOLATION and "Respond(1)" in check.stdout, check.stdout
    p = ackorder_in_process("replay", "--program", str(program), "--emit-test", str(emitted))
    assert p.returncode == errors.VIOLATION and emitted.exists(), p.stdout + p.stderr
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                          str(emitted)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr


def test_the_same_program_without_the_switch_holds(tmp_path):
    program = tmp_path / "p.py"
    program.write_text(PROGRAM.replace("FailoverMachine_BugNoAllAck", "FailoverMachine"))
    p = ackorder_in_process("replay", "--program", str(program))
    assert p.returncode == errors.OK, p.stdout + p.stderr


def test_failover_machine_flags_that_do_not_apply_are_exit_2(tmp_path):
    for argv, needle in ((("--machine", "failover", "--coverage"), "--coverage"),
                         (("--machine", "failover", "--bug", "BugAckOnWrote"), "unknown bug switch"),
                         (("--machine", "spec", "--bug", "BugNoAllAck"), "--machine failover"),
                         (("--bug", "no_all_ack_bug"), "--machine failover")):
        p = ackorder("stateful", *argv, timeout=120)
        assert p.returncode == errors.USAGE and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, \
            (argv, p.stdout, p.stderr)
