"""The failover refinement machine (stateful_tests/failover_machine.py): the
correct reference refines the failover twin under the selected profile, and
every failover bug switch is caught, naming the property its TLC cfg names."""

import time

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from spec.failover.config import FAILOVER_BUG_NAMES
from stateful_tests.bug_machines import bug_hunt
from stateful_tests.test_bugs_caught import record_time
from stateful_tests.failover_machine import FailoverViolation, failover_machine_for
from stateful_tests.profiles import STATE_DIR
from tla.manifest import expected_violations

TIMES = STATE_DIR.parent / "hypothesis-failover-bug-times.json"


def failover_hunt() -> settings:
    """bug_hunt with longer programs: a failover bug needs a proposal, an alter, puts, a
    crash, an election and a role change before it shows."""
    return settings(bug_hunt(), stateful_step_count=max(settings().stateful_step_count, 150), report_multiple_bugs=False)


def test_the_reference_refines_the_failover_spec():
    run_state_machine_as_test(failover_machine_for(None), settings=settings(stateful_step_count=80))


# Measured (2026-11-25, ci, on a machine loaded to 10 on 2 cores): the machine catches these
# two, naming the right property, only after 276 s (BugCommittedSssOnly) and 383 s
# (BugSlaveConfirmFromMaxOffset), too long for `make test`; the seeded failover campaigns'
# scenarios (reference/failover/drive.py) find them within 20 seeds in each of three seed
# ranges (docs/fuzz.md).  Shown as skipped with this reason in every run's summary, never silently.
NOT_YET_CAUGHT_BY_THE_MACHINE = {
    "BugCommittedSssOnly": "needs an SSS change in flight while a lagging member's ack is awaited; "
                           "caught under ci only after 276 s (too long for make test); failover campaigns "
                           "find it within 6 seeds in each of three seed ranges (docs/fuzz.md)",
    "BugSlaveConfirmFromMaxOffset": "needs a slave outside the SSS ahead of a lagging member at a master "
                                    "crash; caught under ci only after 383 s (too long for make test); "
                                    "failover campaigns (the lagging-member scenario) find it within 18 seeds "
                                    "in each of three seed ranges (docs/fuzz.md)",
}


@pytest.mark.parametrize("bug", [
    pytest.param(b, marks=pytest.mark.skip(reason=f"not yet caught by the failover machine: "
                                                  f"{NOT_YET_CAUGHT_BY_THE_MACHINE[b]}"))
    if b in NOT_YET_CAUGHT_BY_THE_MACHINE else b
    for b in FAILOVER_BUG_NAMES])
def test_failover_bug_is_caught(bug):
    start = time.perf_counter()
    with pytest.raises(FailoverViolation) as caught:
        run_state_machine_as_test(failover_machine_for(bug), settings=failover_hunt())
    seconds = time.perf_counter() - start
    assert caught.value.prop != "Refinement", f"{bug}: the reference left the spec: {caught.value}"
    expected = expected_violations(bug)
    assert caught.value.prop in expected, f"{bug}: caught {caught.value.prop}, expected {sorted(expected)}"
    record_time(bug, {"property": caught.value.prop, "seconds": round(seconds, 2)}, TIMES)
