"""The first seed of the failover campaign's schedule (reference/failover/drive.py ``simulate``, seeds
from 0) that each bug switch fails, measured 2026-11-28 on the byte-level group: tests that need a
failing run of a switch start there instead of searching (each is still asserted to fail; a change to
the schedule or the cores that moves one fails those tests, which say to measure again with
`python -m reference.tests.failover_seeds`)."""

from __future__ import annotations

FIRST_FAILING_SEED = {
    "BugNoAllAck": 1, "BugCommittedSssOnly": 24, "BugConfirmOverConnected": 1, "BugTransferCursorNotReset": 18,
    "BugTruncateNotDurable": 4, "BugUncleanElection": 3, "BugConfirmNotClamped": 1, "BugEpochFileNotDurable": 2,
    "BugElectKeepsEpoch": 0, "BugEpochAppendUnchecked": 0, "BugAlterWithoutFencing": 18,
    "BugSlaveConfirmFromMaxOffset": 38, "BugElectOnlyOnMasterDeath": 0, "BugShrinkBeforeCommit": 15,
}


def failing_seed(bug: str) -> int:
    """The table's seed for ``bug``, checked: it fails, and no seed before it does (AssertionError
    naming the fix when the table is stale)."""
    from reference.failover.drive import simulate

    seed = FIRST_FAILING_SEED[bug]
    assert simulate(seed, bugs=(bug,)).violation, \
        f"{bug}: seed {seed} no longer fails; measure again: python -m reference.tests.failover_seeds"
    return seed


if __name__ == "__main__":       # measure the table again
    from reference.failover.drive import simulate
    from spec.failover.config import FAILOVER_BUG_NAMES

    print({bug: next(s for s in range(2_000) if simulate(s, bugs=(bug,)).violation) for bug in FAILOVER_BUG_NAMES})
