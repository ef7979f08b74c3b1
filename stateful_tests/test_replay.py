"""`ackorder replay`: printed programs replay, pasted regressions stay fixed,
and malformed programs are refused with the line named."""

import subprocess
import textwrap

import pytest
from pathlib import Path

from cli.tests import zygote
from reference.refinement import PropertyViolation
from stateful_tests.replay import ProgramError, replay_program

SETUP = ("state.setup(cfg=StoreConfig(flush_disk_type='{flush}', broker_role='ASYNC_MASTER', "
         "transient_store_pool_enable=False, bugs=frozenset({bugs})), n=1, connected={connected})")


def program(machine: str, steps: str, flush="SYNC_FLUSH", bugs="set()", connected=False) -> str:
    head = f"state = {machine}()\n" + SETUP.format(flush=flush, bugs=bugs, connected=connected)
    return head + "\n" + textwrap.dedent(steps).strip() + "\nstate.teardown()\n"


# Found while writing the suite: after an fsync error that B1 ignores, a later
# successful fsync must not make the failed range durable (fsyncgate).  The
# simulator used to say it did and disagreed with the spec.
FSYNC_HOLE = """
    requests_0 = state.put(size=1)
    state.flush_round(draw=9)
    requests_1 = state.put(size=1)
    state.flush_round(draw=0)
    state.master_machine_crash(keep=0, torn=False, restart=True)
"""


def test_fsync_hole_regression_is_caught_as_the_bug():
    with pytest.raises(PropertyViolation) as caught:
        replay_program(program("RefinementMachine_BugFlushIgnoresFsyncError", FSYNC_HOLE,
                               bugs="{'BugFlushIgnoresFsyncError'}"))
    assert caught.value.prop == "AckedSurvivesCrash"


def test_fsync_hole_program_is_clean_on_the_correct_store():
    machine = replay_program(program("RefinementMachine", FSYNC_HOLE))
    assert not machine.cluster.failed


def test_a_rule_that_returns_several_values_binds_each_name():
    """puts_in_one_turn returns multiple(...): Hypothesis prints `a, b = state.puts_in_one_turn(...)`,
    and a later step may name either."""
    machine = replay_program(program("RefinementMachine", """
        requests_0, requests_1 = state.puts_in_one_turn(sizes=[1, 3])
        state.past_its_deadlines(req=requests_1)
    """, flush="ASYNC_FLUSH"))
    assert not machine.cluster.failed and machine.puts == 2
    with pytest.raises(ProgramError, match="line 3: state.puts_in_one_turn gave 2 values for 3 names"):
        replay_program(program("RefinementMachine", """
            a, b, c = state.puts_in_one_turn(sizes=[1, 3])
        """))


def test_pytest_markers_are_stripped():
    text = program("RefinementMachine_BugHandshakeOffsetOnly", """
        requests_0 = state.put(size=10)
        state.replicate()
        state.master_machine_crash(keep=0, torn=False, restart=True)
        requests_1 = state.put(size=12)
        state.connect(replica=0)
        state.replicate()
    """, flush="ASYNC_FLUSH", bugs="{'BugHandshakeOffsetOnly'}", connected=True)
    pasted = "E   Falsifying example:\n" + "\n".join("    | " + line for line in text.splitlines())
    with pytest.raises(PropertyViolation) as caught:
        replay_program(pasted)
    assert caught.value.prop == "LogMatching"


@pytest.mark.parametrize("line, problem", [
    ("state.put(size=__import__('os').getpid())", "only literals"),
    ("state.cluster()", "no rule 'cluster'"),
    ("state._drain_network()", "no rule '_drain_network'"),
    ("state.put(size=3, bytes=3)", "unexpected keyword argument 'bytes'"),
    ("state.put()", "missing a required argument: 'size'"),
    ("state.put(size=", "line 3"),
    ("import os", "expected a call on state"),
    # values no test case could hold (they raised TypeError or MemoryError inside the step, exit 1)
    ("state.put(size=1000000000000)", "size=1000000000000 is no value the rule draws (it draws an integer from 1 to 100)"),
    ("state.tick(advance_ms=None)", "advance_ms=None is no value the rule draws"),
    ("state.connect(replica='abc')", "replica='abc' is no value the rule draws"),
    ("state.connect(replica=True)", "replica=True is no value the rule draws"),
    ("state.fail_a_write(kind='EPERM', skip=0, fraction=0.5)", "it draws one of 'EIO', 'ENOSPC', 'short'"),
    ("state.fail_a_write(kind='EIO', skip=0, fraction=2.0)", "it draws a number from 0.0 to 0.99"),
])
def test_malformed_programs_name_the_line(line, problem):
    text = program("RefinementMachine", line).replace("state.teardown()\n", "")
    with pytest.raises(ProgramError) as err:
        replay_program(text)
    assert "line 3" in str(err.value) and problem in str(err.value)


def test_a_rule_before_the_initialize_rule_is_refused():
    with pytest.raises(ProgramError, match="line 2: state.put before state.setup"):
        replay_program("state = RefinementMachine()\nstate.put(size=3)\nstate.teardown()\n")


def test_unknown_machine_is_refused():
    with pytest.raises(ProgramError, match="unknown machine 'Nope'"):
        replay_program("state = Nope()\nstate.teardown()\n")


def run_cli(tmp_path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "program.txt"
    path.write_text(text)
    return zygote.run(["replay", "--program", str(path)], cwd=Path.cwd(), timeout=120)   # a process (cli/tests/zygote.py)


def test_cli_exit_codes(tmp_path):
    bug = run_cli(tmp_path, program("RefinementMachine_BugFlushIgnoresFsyncError", FSYNC_HOLE,
                                    bugs="{'BugFlushIgnoresFsyncError'}"))
    assert bug.returncode == 1 and "reproduced: AckedSurvivesCrash" in bug.stdout
    clean = run_cli(tmp_path, program("RefinementMachine", FSYNC_HOLE))
    assert clean.returncode == 0 and "without a violation" in clean.stdout
    bad = run_cli(tmp_path, "nothing to see\n")
    assert bad.returncode == 2 and "line found" in bad.stderr and "Traceback" not in bad.stderr
