"""Every bug switch is caught: with the switch on, the refinement machine
must find a failure naming the property the bug's TLC cfg names, under the
selected profile (``ci`` in `make test`).  A bug not caught fails the test.

Times to catch are written to .ackorder/hypothesis-bug-times.json."""

import json
import time

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from reference.refinement import PropertyViolation
from reference.sim.params import BUG_SETTINGS
from spec.config import BUG_NAMES
from stateful_tests.machines import Pins, RefinementMachine
from stateful_tests.profiles import STATE_DIR
from tla.manifest import load_manifest
from reference.config import StoreConfig

import attrs

EXPECTED = {m.title.split(":")[0]: {m.expected} for m in load_manifest() if m.kind == "bug"}
EXPECTED["BugAcceptAckBeyondLog"] = {"WatermarksOrdered", "LogMatching"}   # see reference/tests/test_sim.py
STORE_FIELDS = {f.name for f in attrs.fields(StoreConfig)}
TIMES = STATE_DIR.parent / "hypothesis-bug-times.json"

# The rules a bug cannot need: leaving them out makes the search denser (the
# machines have no rule weights).  The full machine runs in test_machines.py.
SLAVE_RULES = ("connect", "disconnect", "deliver", "replicate", "replica_crash", "heartbeat")
CRASH_RULES = ("master_process_crash", "master_machine_crash", "master_restart")
# Impostors get past the two broken handshakes (a different failure than the one the bug is
# about), and a short write leaves a partial record that the broken recovery keeps.
HA_INPUT_RULES = ("forge_ack", "impostor", "mangle")
RULES_OFF = {
    "BugAcceptAckBeyondLog": ("fsync_returns", "flush_round", "disconnect", "replica_crash",
                              "past_its_deadlines", "master_process_crash", "deliver", "fail_a_write",
                              *HA_INPUT_RULES),
    "BugHandshakeOffsetOnly": ("fsync_returns", "flush_round", "disconnect", "replica_crash",
                               "past_its_deadlines", "master_process_crash", "deliver", "fail_a_write",
                               *HA_INPUT_RULES),
    "BugFlushIgnoresFsyncError": SLAVE_RULES + ("past_its_deadlines", "master_process_crash", "tick",
                                                "master_restart", "connect", "fail_a_write", *HA_INPUT_RULES),
    "BugRecoveryKeepsTorn": SLAVE_RULES + ("fsync_returns", "flush_round", "past_its_deadlines",
                                           "master_process_crash", "fail_a_write", *HA_INPUT_RULES),
    "BugDoubleResponse": SLAVE_RULES + CRASH_RULES + HA_INPUT_RULES,
    "BugNoFlushDiskWatcher": SLAVE_RULES + CRASH_RULES + HA_INPUT_RULES,
    "BugFsyncCoversFailedWrite": SLAVE_RULES + CRASH_RULES + HA_INPUT_RULES,
    "BugFlushOneFileReleasesAll": SLAVE_RULES + CRASH_RULES + HA_INPUT_RULES + ("fail_a_write",),
    "BugFlushTimeoutHidesSlaveTimeout": CRASH_RULES + HA_INPUT_RULES + ("fail_a_write",),
    # A forged ACK in the write buffer is the whole bug: crashes, impostors and mangled frames
    # only dilute the search (it was found or not depending on how pytest was invoked).
    "BugAckCheckedAgainstWrote": CRASH_RULES + ("impostor", "mangle", "fail_a_write"),
}


# The profile's settings without the target phase: hill-climbing toward long
# queues is for finding new behaviour, and here it only delays the search.
BUG_HUNT = settings(settings(), max_examples=500, phases=[Phase.explicit, Phase.generate, Phase.shrink])


# Pins beyond the simulator's: with no slave rules, only ASYNC_MASTER can answer PUT_OK.
MACHINE_PINS = {"BugFlushIgnoresFsyncError": {"broker_role": "ASYNC_MASTER"}}


def machine_for(bug: str) -> type[RefinementMachine]:
    pins = {**BUG_SETTINGS.get(bug, {}), **MACHINE_PINS.get(bug, {})}
    store = {k: v for k, v in pins.items() if k in STORE_FIELDS}
    store["bugs"] = frozenset({bug})
    off = {name: None for name in RULES_OFF.get(bug, ())}   # a non-rule attribute hides the rule
    machine = type(f"RefinementMachine_{bug}", (RefinementMachine,), off)
    machine.pins = Pins(store=store, replicas=pins.get("replicas"))
    machine.fsync_failures_in_ten = max(1, round(10 * pins.get("fsync_failure_probability", 0.1)))
    return machine


@pytest.mark.parametrize("bug", BUG_NAMES)
def test_bug_is_caught(bug):
    start = time.perf_counter()
    with pytest.raises(PropertyViolation) as caught:
        run_state_machine_as_test(machine_for(bug), settings=BUG_HUNT)
    seconds = time.perf_counter() - start
    assert caught.value.prop in EXPECTED[bug], f"{bug}: caught {caught.value.prop}, expected {EXPECTED[bug]}"
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    times[bug] = {"property": caught.value.prop, "seconds": round(seconds, 2)}
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    TIMES.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")
