"""What the broker side of failover asks its runtime to do.

Performed in order by the one event loop that owns the core (reference/real)
or by the simulator (reference/sim).  The order is the protocol: a handshake
truncation is ``TruncateLog`` → ``FsyncLog`` → ``WriteEpochFile`` →
``ReportOffset`` (B14: the cut is durable before anything depends on it).
"""

from __future__ import annotations

import attrs

from reference.failover.epochfile import EpochEntry


@attrs.frozen
class TruncateLog:
    """Cut the commit log at ``offset``: the bytes from it are gone for good
    (zeroed or ftruncated on disk, so recovery cannot find them again).
    ``on_disk=False`` is RocketMQ's in-memory-only truncateDirtyFiles
    (BugTruncateNotDurable): the stale records stay on disk."""
    offset: int
    on_disk: bool = True


@attrs.frozen
class FsyncLog:
    """fsync the commit log so the cut (and what precedes ``upto``) survives power loss."""
    upto: int


@attrs.frozen
class WriteEpochFile:
    """Persist the epoch checkpoint (reference/real/epochfile.write_epoch_file).
    ``durable=False`` is RocketMQ's MixAll.string2File without fsync
    (BugEpochFileNotDurable, decided by the core that emits it)."""
    entries: tuple[EpochEntry, ...]
    durable: bool = True


@attrs.frozen
class ReportOffset:
    """Slave -> master: the offset the slave holds (its ack / the handshake's report)."""
    offset: int


@attrs.frozen
class StartHaClient:
    """Slave: (re)start the AutoSwitchHAClient towards ``master_id`` (a new handshake)."""
    master_id: str


@attrs.frozen
class StopHaClient:
    """A slave being promoted stops following."""


@attrs.frozen
class CloseConnections:
    """A demoted master destroys its HA connections (its slaves reconnect and handshake)."""
    slave_ids: tuple[str, ...]


@attrs.frozen
class ProposeSyncStateSet:
    """Master -> controller: AlterSyncStateSet to ``sss`` (``action`` drops or adds ``member``,
    reference/failover/sss_policy.py).  Acks already count over the union (#5663)."""
    action: str
    member: str
    sss: frozenset[str]


@attrs.frozen
class HandshakeFailed:
    """No common epoch with the master: nothing is truncated; retry later (RocketMQ: every 2 s)."""
    reason: str
