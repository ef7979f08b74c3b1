"""A slave under controller-driven failover, sans-IO: AutoSwitchHAClient over bytes.

It couples two machines inside one connection, the way h11 couples a
connection's two halves: ``ReplicaCore`` (reference/replica.py: the bytes,
appended at the log end, every record verified, the offset reported) and
``SlaveHandshake`` (reference/failover/truncation.py: the epochs, the
consistent point, the crash-safe cut, each transfer header's label and
confirmOffset).  Everything travels on the HA connection itself, as
AutoSwitchHAClient's HANDSHAKE and TRANSFER states do:

    connect          -> SendEpochQuery                       (HANDSHAKE)
    epoch_reply      -> the cut: TruncateLog -> FsyncLog -> WriteEpochFile -> RescanLog,
    rescanned(scan)  -> SendHandshake (offset and chain hash) (TRANSFER)
    on_data          -> the bytes appended, the header's label into the epoch cache
                        (WriteEpochFile when its epoch is new), confirmOffset, SendAck

Nothing is decided twice: the consistent point and the cut are
SlaveHandshake's, the bytes and the report ReplicaCore's.  What the master
sends is network input: a reply or a header this slave cannot use drops
the link (CloseMaster), and a new connection starts with a new handshake.
"""

from __future__ import annotations

from reference import effects as fx
from reference.failover import broker_effects as bfx
from reference.failover.epochfile import MAX_EPOCH_ENTRIES, EpochEntry, EpochFileCache
from reference.failover.truncation import (HANDSHAKE, HANDSHAKE_FAILED, READY, TRANSFER, SlaveHandshake,
                                           consistent_point)
from reference.record import LogScan
from reference.replica import ReplicaCore

RESCANNING = "RESCANNING"      # the cut is on disk; the log is being indexed again before the HANDSHAKE


class FollowerCore:
    """One following slave: its bytes (``replica``) and its epochs (``client``)."""

    def __init__(self, replica: ReplicaCore, cache: EpochFileCache, confirm_offset: int, *,
                 bugs: frozenset[str] = frozenset()) -> None:
        end = replica.parsed_end
        self.replica = replica
        self.bugs = bugs
        # TruncateBeyond: entries past the recovered log's end are gone with the bytes they named
        self.client = SlaveHandshake(cache.truncate_beyond(end), end, min(confirm_offset, end), bugs=bugs)
        self.rescanning = False
        # the cut is on disk but the index is not yet rebuilt (RescanLog unanswered): a link that
        # drops meanwhile clears ``rescanning``, not this — the index does not say what the files hold
        self.index_stale = False
        self.effects: list = []

    # --- what the node reads (heartbeats, a promotion) -----------------------------------------

    @property
    def cache(self) -> EpochFileCache:
        return self.client.cache

    @property
    def confirm_offset(self) -> int:
        return self.client.confirm_offset

    @property
    def log_end_offset(self) -> int:
        """The end of the complete records held (what a restart's recovery keeps)."""
        return self.replica.parsed_end

    @property
    def received_end(self) -> int:
        return self.replica.received_end

    @property
    def state(self) -> str:
        return RESCANNING if self.rescanning else self.client.state

    def take_effects(self) -> list:
        out = self.effects + self.replica.take_effects()
        self.effects = []
        return out

    # --- events --------------------------------------------------------------------------------

    def connect(self) -> None:
        """A new connection to the master: ask for its epochs before anything else."""
        assert self.client.state == READY and not self.rescanning, self.client.state
        # What this slave holds is its complete records; a partial one beyond is cut by the handshake.
        end = self.replica.parsed_end
        self.client.log_end_offset = end
        self.client.confirm_offset = min(self.client.confirm_offset, end)
        self.client.cache = self.client.cache.truncate_beyond(end)
        self.client.start()
        self.effects.append(fx.SendEpochQuery())

    def epoch_reply(self, entries: tuple[tuple[int, int], ...], master_end_offset: int,
                    master_confirm_offset: int) -> None:
        """The master's entries, its log end and confirmOffset: the consistent point, and the cut."""
        if self.client.state != HANDSHAKE or self.rescanning:
            self._drop(f"an EPOCH_REPLY in state {self.state}")
            return
        if len(entries) > MAX_EPOCH_ENTRIES or not EpochFileCache(entries[:MAX_EPOCH_ENTRIES]).ordered:
            self._drop(f"the master's {len(entries)} epoch entries are not in order (or past {MAX_EPOCH_ENTRIES})")
            return
        before = self.client.log_end_offset
        master = tuple(EpochEntry(*e) for e in entries)
        # The master's entries must cover where this slave's stream would start (the consistent point,
        # or 0 when there is none): a reply that does not (no entries, a first epoch starting past the
        # point) is refused here, never by the handshake's assertions.
        point = consistent_point(self.client.cache, before, EpochFileCache(master), master_end_offset)
        start = 0 if point == HANDSHAKE_FAILED else point
        if EpochFileCache(master).covering_entry(start) is None:
            self._drop(f"the master's epoch entries {master[:3]}{'...' if len(master) > 3 else ''} do not cover "
                       f"offset {start}, where this slave's stream would start")
            return
        effects = self.client.handshake_reply(master, master_end_offset, master_confirm_offset)
        if any(isinstance(e, bfx.HandshakeFailed) for e in effects):
            # Bytes with no epoch in common (an epoch file lost): this log cannot be placed against
            # the master's, which holds everything ever acknowledged (every master comes from a
            # SyncStateSet that held it all).  Beyond the spec, a liveness choice: cut it all,
            # durably, and follow from 0 rather than be refused forever.
            self.effects.extend(effects + (bfx.TruncateLog(0), bfx.FsyncLog(0), bfx.WriteEpochFile(())))
            self.client = SlaveHandshake(EpochFileCache(), 0, 0, bugs=self.bugs)
            self.client.start()
            effects = self.client.handshake_reply(master, master_end_offset, master_confirm_offset)
            assert self.client.state == TRANSFER, effects
        cut = self.client.log_end_offset < before
        self.effects.extend(e for e in effects if not isinstance(e, bfx.ReportOffset))
        if cut:
            self.rescanning = self.index_stale = True
            self.effects.append(fx.RescanLog(self.client.log_end_offset))
        else:
            self.replica.connect()      # the handshake: our offset and chain hash there

    def rescanned(self, scan: LogScan) -> None:
        """The log, indexed again from its files up to the cut (RescanLog answered): the HANDSHAKE
        follows on the same connection, unless it dropped meanwhile (the next one starts with its
        own epoch query)."""
        assert self.index_stale, "a RescanLog answered that was not asked for"
        linked = self.rescanning
        self.rescanning = self.index_stale = False
        if scan.end_offset > self.client.log_end_offset:
            # The cut fell inside the padding at a segment's end: the point is no record boundary of
            # this log, so its bytes below the point are not the master's (only a cut in memory,
            # BugTruncateNotDurable, found again after a crash, leaves such a log).  Refused: the
            # master would refuse its HANDSHAKE too.
            self._drop(f"the cut at {self.client.log_end_offset} falls inside a record of this log "
                       f"(it scans to {scan.end_offset}): its bytes there are not the master's")
            return
        replica = ReplicaCore.recovered(self.replica.name, self.replica.segment_size, scan)
        replica.spec_steps = self.replica.spec_steps
        self.replica = replica
        self.client.log_end_offset = scan.end_offset
        self.client.confirm_offset = min(self.client.confirm_offset, scan.end_offset)
        if linked:
            self.replica.connect()

    def on_data(self, offset: int, data: bytes, epoch: int, epoch_start: int, confirm_offset: int) -> None:
        """A TRANSFER batch: the bytes at our end, then its header (label, confirmOffset)."""
        if self.client.state != TRANSFER or not self.replica.connected:
            self._drop(f"a DATA frame in state {self.state}")
            return
        if not data or epoch_start > offset or epoch < self.client.cache.last_epoch() \
                or (epoch > self.client.cache.last_epoch() and len(self.client.cache) >= MAX_EPOCH_ENTRIES):
            self._drop(f"DATA at {offset} labelled epoch {epoch} from {epoch_start}: not a label this "
                       f"slave's epochs {self.client.cache.entries[-3:]} can take")
            return
        start = self.replica.received_end
        self.replica.on_data(offset, data)
        if not self.replica.connected:      # ReplicaCore dropped the link (wrong offset, bad record)
            if self.replica.parsed_end > start:
                # the whole records before the bad one stay in the log: they take the batch's label,
                # or a promotion before the next handshake would keep them under the previous epoch
                self.effects.extend(e for e in self.client.transfer(offset, self.replica.parsed_end - start,
                                                                     EpochEntry(epoch, epoch_start), confirm_offset)
                                    if not isinstance(e, bfx.ReportOffset))
                # the two machines agree on where the log ends: its whole records
                assert self.client.log_end_offset == self.replica.parsed_end, (self.client.log_end_offset,
                                                                                self.replica.parsed_end)
            self.client.disconnected()
            return
        assert self.replica.received_end == start + len(data) and offset == self.client.log_end_offset
        # The label goes into the epoch file before the bytes are reported: a slave that crashes
        # after acknowledging them finds their epoch named (an entry may start at the log end).
        head = [e for e in self.client.transfer(offset, len(data), EpochEntry(epoch, epoch_start), confirm_offset)
                if not isinstance(e, bfx.ReportOffset)]     # the report is ReplicaCore's SendAck
        self.effects.extend(head + self.replica.take_effects())

    def heartbeat(self) -> None:
        """HAClient's idle report: only on a connection whose HANDSHAKE went out (TRANSFER),
        which is exactly when the replica is connected."""
        assert self.replica.connected == (self.state == TRANSFER), (self.state, self.replica.connected)
        self.replica.heartbeat()

    def on_bad_input(self, reason: str) -> None:
        self._drop(reason)

    def disconnected(self) -> None:
        self.replica.disconnected()
        self.client.disconnected()
        self.rescanning = False

    def _drop(self, reason: str) -> None:
        self.replica.on_bad_input(reason)        # CloseMaster: a new connection, a new handshake
        self.client.disconnected()
        self.rescanning = False                  # a cut's RescanLog may still be answered (index_stale)
