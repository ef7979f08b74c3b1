"""The controllers machine (stateful_tests/controllers_machine.py): the sans-IO parts the
runtime of several controllers runs keep the spec's properties on every commit etcd applies,
with commits landing late and leases expiring unannounced; and each runtime bug switch a
machine can reach is caught, naming the property its TLC cfg names."""

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from stateful_tests.bug_machines import bug_catch
from stateful_tests.controllers_machine import ControllersViolation, controllers_machine_for
from tla.manifest import expected_violations


def test_the_runtimes_decisions_keep_the_controllers_properties():
    run_state_machine_as_test(controllers_machine_for(None), settings=settings(stateful_step_count=80))


def test_without_the_revision_compare_the_runtime_still_keeps_them():
    """BugOwnerSkipsMetadataCompare bites in the spec (a controller deciding twice from one read); the
    runtime never does that, so the machine finds nothing: the compare is defence in depth there."""
    run_state_machine_as_test(controllers_machine_for("BugOwnerSkipsMetadataCompare"),
                              settings=settings(stateful_step_count=80))


# BugOwnerSkipsMetadataCompare is left out: the runtime never decides twice from one read, so
# without the revision compare its commits are the same (docs/model.md says why).
@pytest.mark.parametrize("bug", ["BugCommitWithoutCompare", "BugNoTakeoverGrace", "BugActAfterLeaseExpired"])
def test_controllers_bug_is_caught(bug):
    with pytest.raises(ControllersViolation) as caught:
        run_state_machine_as_test(controllers_machine_for(bug),
                                  settings=settings(bug_catch(), stateful_step_count=80, report_multiple_bugs=False))
    assert caught.value.prop in expected_violations(bug), caught.value
