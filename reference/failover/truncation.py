"""The AutoSwitch handshake and what a slave does with the records it is sent.

The slave sends its epoch entries and max offset; the master answers with
its own (RocketMQ: AutoSwitchHAClient HANDSHAKE / AutoSwitchHAConnection).
Both sides compute the truncation point with the same function,
``consistent_point`` (EpochFileCache.findConsistentPoint): the master to
know where the slave's stream starts, the slave to know where to cut.

The slave's cut is crash-safe (B14, #10666): ``SlaveHandshake`` emits
``TruncateLog`` (on disk) → ``FsyncLog`` → ``WriteEpochFile`` →
``ReportOffset``, the order of the spec's ReplicaConnect, in which a cut
log and its epoch file never disagree after a crash.  BugTruncateNotDurable
is RocketMQ's in-memory truncateDirtyFiles: ``TruncateLog(on_disk=False)``
and no fsync, so recovery finds the cut records again.

Everything here is pure: values in, values and effects out.
"""

from __future__ import annotations

import attrs

from reference.failover import broker_effects as fx
from reference.failover.bugs import check_bugs
from reference.failover.epochfile import EpochEntry, EpochFileCache, epoch_file_durable

HANDSHAKE_FAILED = -1


def consistent_point(local: EpochFileCache, local_end_offset: int,
                     master: EpochFileCache, master_end_offset: int) -> int:
    """ConsistentPoint(s, m): the largest offset the two logs agree on, or -1 when the
    handshake fails (the slave has data but no epoch in common with the master).

    The newest local entry the master also has, with the same start, is the last common
    epoch; the point is where the shorter of the two runs of that epoch ends.  An empty
    cache over an empty log starts from 0.

    pre: local_end_offset >= 0 and master_end_offset >= 0
    post: __return__ == -1 or 0 <= __return__ <= local_end_offset
    """
    assert local_end_offset >= 0 and master_end_offset >= 0, (local_end_offset, master_end_offset)
    if not local.entries:
        return 0 if local_end_offset == 0 else HANDSHAKE_FAILED
    for k in range(len(local.entries) - 1, -1, -1):
        j = master.index_of(local.entries[k])
        if j is None:
            continue
        local_end = min(local.entry_end(k, local_end_offset), local_end_offset)
        point = min(local_end, master.entry_end(j, master_end_offset))
        assert 0 <= point <= local_end_offset, point
        return point
    return HANDSHAKE_FAILED


def handshake_header(master: EpochFileCache, point: int) -> EpochEntry:
    """The epoch label of the first TRANSFER header after the handshake: the master's entry
    covering ``point`` (a master's cache covers every offset of its log)."""
    entry = master.covering_entry(point)
    assert entry is not None, f"the master's epoch cache {master.entries} does not cover offset {point}"
    return entry


def truncated_cache(local: EpochFileCache, point: int, header: EpochEntry, *,
                    bugs: frozenset[str] = frozenset()) -> EpochFileCache:
    """The slave's epoch cache after the handshake: entries from ``point`` on dropped, then
    the first header's epoch appended (a no-op when the slave already has it)."""
    return local.truncate_suffix_by_offset(point).append_entry(header, bugs=bugs)


def receive_transfer(local: EpochFileCache, local_end_offset: int, label: EpochEntry, header_confirm_offset: int,
                     *, bugs: frozenset[str] = frozenset()) -> tuple[EpochFileCache, int]:
    """Slave side of Transfer: the batch's epoch label goes into the cache when its epoch is
    new, and confirmOffset becomes min(the header's, the slave's max offset before the
    append) (ASCli L557-567).  Returns (cache, confirm_offset)."""
    cache = local if label.epoch == local.last_epoch() else local.append_entry(label, bugs=bugs)
    return cache, min(header_confirm_offset, local_end_offset)


@attrs.frozen
class HandshakeOutcome:
    """What the handshake decided: the point, the new cache and confirmOffset, and the
    effects in the order the runtime must perform them."""
    point: int
    cache: EpochFileCache
    confirm_offset: int
    effects: tuple


def cuts_are_durable(bugs: frozenset[str]) -> bool:
    """Whether a cut of the log reaches the disk (B14, BugTruncateNotDurable: only the in-memory
    positions move) — the handshake's cut here, and the hand-over's at a role change
    (BrokerCore's ``HeldLog.zero_beyond``): one reading of the switch."""
    return "BugTruncateNotDurable" not in bugs


def slave_handshake(local: EpochFileCache, local_end_offset: int, master: EpochFileCache, master_end_offset: int,
                    header_confirm_offset: int, *, bugs: frozenset[str] = frozenset()) -> HandshakeOutcome | None:
    """The slave's side of ReplicaConnect (doTruncate): None when the handshake fails."""
    point = consistent_point(local, local_end_offset, master, master_end_offset)
    if point == HANDSHAKE_FAILED:
        return None
    cache = truncated_cache(local, point, handshake_header(master, point), bugs=bugs)
    if point == local_end_offset:
        cut: tuple = ()                                     # nothing to cut
    elif not cuts_are_durable(bugs):
        cut = (fx.TruncateLog(point, on_disk=False),)      # truncateDirtyFiles: memory only
    else:
        cut = (fx.TruncateLog(point), fx.FsyncLog(point))
    return HandshakeOutcome(point, cache, min(header_confirm_offset, point),
                            cut + (fx.WriteEpochFile(cache.entries, epoch_file_durable(bugs)), fx.ReportOffset(point)))


READY, HANDSHAKE, TRANSFER = "READY", "HANDSHAKE", "TRANSFER"


class TransferError(ValueError):
    """A TRANSFER batch the slave cannot take; the message says where it was and why."""


class SlaveHandshake:
    """The slave's AutoSwitchHAClient as a sans-IO state machine: READY → HANDSHAKE →
    TRANSFER, back to READY on a failed handshake or a dropped link.

    It owns the slave's view of its log end, epoch cache and confirmOffset while it
    follows; the runtime performs the effects in order and reports nothing back (a
    failure to perform one is a disk error that stops the broker)."""

    def __init__(self, cache: EpochFileCache, log_end_offset: int, confirm_offset: int, *,
                 bugs: frozenset[str] = frozenset()) -> None:
        assert log_end_offset >= 0 and confirm_offset >= 0
        self.bugs = check_bugs(bugs)
        self.state = READY
        self.cache = cache
        self.log_end_offset = log_end_offset
        self.confirm_offset = confirm_offset

    def start(self) -> tuple:
        """Connect: the runtime sends the handshake (our entries and max offset)."""
        assert self.state == READY, self.state
        self.state = HANDSHAKE
        return ()

    def handshake_reply(self, master_entries: tuple[EpochEntry, ...], master_end_offset: int,
                        master_confirm_offset: int) -> tuple:
        """ReplicaConnect: the master's entries, max offset and the confirmOffset of its
        first header.  Effects: the crash-safe cut, the epoch file, the first report."""
        assert self.state == HANDSHAKE, self.state
        master = EpochFileCache(master_entries)
        out = slave_handshake(self.cache, self.log_end_offset, master, master_end_offset, master_confirm_offset,
                              bugs=self.bugs)
        if out is None:
            self.state = READY
            return (fx.HandshakeFailed(f"no epoch in common: local {self.cache.entries} at "
                                       f"{self.log_end_offset}, master {master.entries} at {master_end_offset}"),)
        self.state = TRANSFER
        self.cache, self.log_end_offset, self.confirm_offset = out.cache, out.point, out.confirm_offset
        return out.effects

    def transfer(self, offset: int, length: int, label: EpochEntry, header_confirm_offset: int) -> tuple:
        """Transfer (slave side): a batch at our end; the runtime appends it, then reports.
        A batch anywhere else, or before the handshake, is bad input from the network:
        TransferError (the runtime drops the link; a new handshake follows)."""
        if self.state != TRANSFER or offset != self.log_end_offset or length <= 0:
            raise TransferError(f"batch [{offset}, {offset + length}) refused in state {self.state}: "
                                f"the slave's log ends at {self.log_end_offset}")
        before = self.cache
        self.cache, self.confirm_offset = receive_transfer(self.cache, self.log_end_offset, EpochEntry(*label),
                                                           header_confirm_offset, bugs=self.bugs)
        self.log_end_offset += length
        written = () if self.cache == before else (fx.WriteEpochFile(self.cache.entries,
                                                                      epoch_file_durable(self.bugs)),)
        return written + (fx.ReportOffset(self.log_end_offset),)

    def disconnected(self) -> None:
        """ReplicaDisconnect: the next connection starts with a new handshake."""
        self.state = READY
