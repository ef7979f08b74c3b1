"""The failover bug switches the broker side implements.

Same names as the Bug* constants of tla/AckOrderFailoverTypes.tla (and
spec/failover/config.py FAILOVER_BUG_NAMES).  The others (BugUncleanElection,
BugElectKeepsEpoch, BugAlterWithoutFencing, BugElectOnlyOnMasterDeath) are the
controller's: a broker accepts them in its switch set and ignores them, so one
set can configure a whole simulated group.
"""

from __future__ import annotations

from spec.config import ConfigError
from spec.failover.config import FAILOVER_BUG_NAMES

BROKER_BUG_NAMES = (
    "BugNoAllAck",                  # roles.ack_covered: no wait for the SSS (B10)
    "BugCommittedSssOnly",          # roles.ack_view: acks over the committed SSS only (B11)
    "BugConfirmOverConnected",      # roles.confirm_with: min over the connected members only (B12)
    "BugTransferCursorNotReset",    # roles.TransferCursor: the epoch fixed at connect (B13)
    "BugTruncateNotDurable",        # truncation.SlaveHandshake: the cut only in memory (B14)
    "BugConfirmNotClamped",         # roles.ReplicasManager.recover: checkpoint kept (B19)
    "BugEpochFileNotDurable",       # real/epochfile.write_epoch_file: no fsync (B21)
    "BugEpochAppendUnchecked",      # epochfile.EpochFileCache.append_entry: no order check (E1)
    "BugSlaveConfirmFromMaxOffset",  # roles.ReplicasManager.header_confirm: ships the max offset
    "BugShrinkBeforeCommit",        # roles.ack_view: acks over the proposal only while altering
)
assert set(BROKER_BUG_NAMES) <= set(FAILOVER_BUG_NAMES)


def check_bugs(bugs: frozenset[str] | set[str] | tuple[str, ...]) -> frozenset[str]:
    """The switch set as a frozenset; ConfigError naming any unknown switch."""
    bugs = frozenset(bugs)
    if unknown := sorted(bugs - set(FAILOVER_BUG_NAMES)):
        raise ConfigError(f"unknown failover bug switch {', '.join(unknown)}; known: {', '.join(FAILOVER_BUG_NAMES)}")
    return bugs
