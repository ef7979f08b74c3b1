"""The failover refinement machine (stateful_tests/failover_machine.py): the
correct reference refines the failover twin under the selected profile, and
every failover bug switch is caught, naming the property its TLC cfg names."""

import time

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from spec.failover.config import FAILOVER_BUG_NAMES
from stateful_tests.bug_machines import bug_catch
from stateful_tests.failover_machine import FailoverViolation, failover_machine_for
from stateful_tests.profiles import STATE_DIR
from stateful_tests.test_bugs_caught import record_time
from tla.manifest import expected_violations

TIMES = STATE_DIR.parent / "hypothesis-failover-bug-times.json"


def failover_hunt() -> settings:
    """bug_catch with longer programs: a failover bug needs a proposal, an alter, puts, a
    crash, an election and a role change before it shows."""
    return settings(bug_catch(), stateful_step_count=max(settings().stateful_step_count, 150), report_multiple_bugs=False)


def test_the_reference_refines_the_failover_spec():
    run_state_machine_as_test(failover_machine_for(None), settings=settings(stateful_step_count=80))


# Every failover switch, BugCommittedSssOnly and BugSlaveConfirmFromMaxOffset included: the schedule
# rule draws the campaigns' scenarios (reference/failover/drive.py), and the machine catches those
# two, the slowest, under ci without shrinking (bug_catch), in every worker alike
# (stateful_tests/constants_pool.py): 10 s and 5 s when written; BugCommittedSssOnly's hunt took
# 56-104 s on 2026-11-29 (it is `-m full`).
@pytest.mark.parametrize("bug", FAILOVER_BUG_NAMES)
def test_failover_bug_is_caught(bug):
    start = time.perf_counter()
    with pytest.raises(FailoverViolation) as caught:
        run_state_machine_as_test(failover_machine_for(bug), settings=failover_hunt())
    seconds = time.perf_counter() - start
    assert caught.value.prop != "Refinement", f"{bug}: the reference left the spec: {caught.value}"
    expected = expected_violations(bug)
    assert caught.value.prop in expected, f"{bug}: caught {caught.value.prop}, expected {sorted(expected)}"
    record_time(bug, {"property": caught.value.prop, "seconds": round(seconds, 2)}, TIMES)
