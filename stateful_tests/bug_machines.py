"""A refinement machine per bug switch: the machine with that switch on, the
configuration the bug needs pinned, and the rules the bug cannot need left out
(Hypothesis has no rule weights; fewer rules make the search denser).  Used by
the bug-catching test, `ackorder stateful --bug` and `ackorder replay --program`."""

from __future__ import annotations

import attrs
from hypothesis import Phase, settings

from reference.config import StoreConfig
from reference.sim.params import BUG_SETTINGS
from stateful_tests.machines import Pins, RefinementMachine

STORE_FIELDS = {f.name for f in attrs.fields(StoreConfig)}

# The rules a bug cannot need: leaving them out makes the search denser (the
# machines have no rule weights).  The full machine runs in test_machines.py.
SLAVE_RULES = ("connect", "disconnect", "deliver", "replicate", "replica_crash", "heartbeat")
CRASH_RULES = ("master_process_crash", "master_machine_crash", "master_restart")
# Impostors get past the two broken handshakes (a different failure than the one the bug is
# about), and a short write leaves a partial record that the broken recovery keeps.
HA_INPUT_RULES = ("forge_ack", "impostor", "mangle", "flood", "greetless", "epoch_queries")
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
    "BugAckCheckedAgainstWrote": CRASH_RULES + ("impostor", "mangle", "flood", "greetless", "epoch_queries",
                                                "fail_a_write"),
}


def bug_hunt(base: settings | None = None) -> settings:
    """The profile's settings (loaded when this is called) without the target phase:
    hill-climbing toward long queues is for finding new behaviour; here it only delays
    the search.  The budget is a ceiling (a hunt stops at its first failure): derandomized,
    which examples come first shifts with incidental code changes (one import line added to
    spec/actions.py moved BugAckCheckedAgainstWrote's first catch from within 500 examples to
    beyond them: 12 s instead of 6 s here), so the ceiling leaves room for that."""
    return settings(base or settings(), max_examples=2000, phases=[Phase.explicit, Phase.generate, Phase.shrink])


def bug_catch(base: settings | None = None) -> settings:
    """bug_hunt for a test that needs the bug found and its property named, not a minimal
    example: the same derandomized search (the same examples, in the same order) without the
    shrink phase, which was most of a catch's time (BugSlaveConfirmFromMaxOffset's 88 s).
    The failing example is still run once more at the end, so its trace and its property are
    those of the example found.  `ackorder stateful --bug` keeps bug_hunt: a user wants the
    minimal program to read and replay.  No reuse phase either: under a profile with an example
    database (dev, thorough) a failure saved by an earlier run would be replayed first, and the
    test would pass even if the search no longer found the bug."""
    return settings(bug_hunt(base), phases=[Phase.explicit, Phase.generate])


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


