"""The broker's ReplicasManager — its role and epoch state — and the pure rules of AutoSwitch HA.

One ``ReplicasManager`` per broker holds what the broker learned from the
controller (role, masterId, masterEpoch, SyncStateSet and its epoch, an
AlterSyncStateSet proposal in flight), its epoch cache, its log end and
confirmOffset, and as master the acks of its slaves (``HaConnection``, synced
from its MasterCore by BrokerCore).  Events are method calls; each returns the
effects (reference/failover/broker_effects.py) the runtime performs in order.
The bytes — puts, transfers, acks, the slave's handshake — are the byte-level
cores' (MasterCore, FollowerCore), joined to this state by BrokerCore
(reference/failover/broker.py); the functions below are the rules those cores
call, one definition each.

The rules, from the spec:

* E5: change_to_master / change_to_slave only for a strictly larger epoch.
* A new master drops epoch entries of its epoch or later and appends
  (epoch, its max offset); the epoch file is written before it takes a put.
* The union rule (#5663): while an AlterSyncStateSet is in flight the master
  counts acks over the committed SSS and the proposed one together.
* confirmOffset = min(own max offset, the acks of the other SSS members), the
  old value while some member has no connection (#6662); clamped into the
  log at recovery (#6703); consumers never read above it.
* A transfer's label comes from the offset, not from a cursor fixed at
  connect (B13); MasterCore never lets a batch span an epoch (H2).

Offsets are in the log's unit (bytes in the reference store).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from reference.failover import broker_effects as fx
from reference.failover.bugs import check_bugs
from reference.failover import sss_policy
from reference.failover.epochfile import EpochEntry, EpochFileCache, epoch_file_durable

MASTER, SLAVE = "MASTER", "SLAVE"
MAX_SLAVES = 64             # bound on a master's HA connections and on a SyncStateSet


# --- pure rules (spec/failover/functions.py) ----------------------------------------------------

@attrs.define
class HaConnection:
    """A slave's last report (slaveAckOffset) as the master's policy and confirmOffset see it."""
    ack_offset: int


def sss_view(sss: frozenset[str], remote_sss: frozenset[str]) -> frozenset[str]:
    """SSSView(m): the committed SSS and, while an alter is in flight, the proposed one."""
    return sss | remote_sss


def ack_view(sss: frozenset[str], remote_sss: frozenset[str], *, bugs: frozenset[str] = frozenset()) -> frozenset[str]:
    """AckView(m): what acks are counted over (BugCommittedSssOnly: the committed SSS only, B11;
    BugShrinkBeforeCommit: the proposal only while one is in flight)."""
    if "BugCommittedSssOnly" in bugs:
        return sss
    if "BugShrinkBeforeCommit" in bugs and remote_sss:
        return remote_sss
    return sss_view(sss, remote_sss)


def ack_members(me: str, sss: frozenset[str], remote_sss: frozenset[str], *,
                bugs: frozenset[str] = frozenset()) -> frozenset[str]:
    """The brokers other than master ``me`` whose acks a PUT_OK waits for: AckView(m) less
    the master itself; none under BugNoAllAck (B10).  What a byte-level master
    (reference/master.py, ALL_IN_SYNC) is told to count over."""
    if "BugNoAllAck" in bugs:
        return frozenset()
    return ack_view(sss, remote_sss, bugs=bugs) - {me}


def confirm_with(me: str, view: frozenset[str], connections: Mapping[str, HaConnection], log_end_offset: int,
                 old_confirm_offset: int, *, bugs: frozenset[str] = frozenset()) -> int:
    """ConfirmWith(m, view, conn, acks, old): computeConfirmOffset.  Alone: the log end.
    A member without a connection keeps the old value (#6662); BugConfirmOverConnected
    (B12) takes the min over the connected members only."""
    others = view - {me}
    if not others:
        return log_end_offset
    live = [o for o in others if o in connections]
    if "BugConfirmOverConnected" in bugs:
        return min([log_end_offset] + [connections[o].ack_offset for o in live])
    if len(live) != len(others):
        return old_confirm_offset
    return min([log_end_offset] + [connections[o].ack_offset for o in others])


def header_confirm(log_end_offset: int, confirm_offset: int, *, bugs: frozenset[str] = frozenset()) -> int:
    """HeaderConfirm(m): the confirmOffset a TRANSFER header carries (BugSlaveConfirmFromMaxOffset:
    the master's max offset).  One definition: ReplicasManager and the byte-level MasterCore."""
    return log_end_offset if "BugSlaveConfirmFromMaxOffset" in bugs else confirm_offset


def cursor_epoch_at_connect(cache: EpochFileCache, *, bugs: frozenset[str] = frozenset()) -> int:
    """The epoch a new connection's cursor is fixed to: none (0) — each batch takes the
    epoch of its offset — unless BugTransferCursorNotReset (the master's last epoch)."""
    return cache.last_epoch() if "BugTransferCursorNotReset" in bugs else 0


def transfer_label(cache: EpochFileCache, offset: int, cursor_epoch: int, *,
                   bugs: frozenset[str] = frozenset()) -> EpochEntry:
    """TransferLabel(m, s, o): the master's entry covering ``offset``.  Under
    BugTransferCursorNotReset a connection whose cursor is older than that epoch ships
    its cursor's entry instead (CursorEntry: (cursor_epoch, 0) when it is gone)."""
    entry = cache.covering_entry(offset)
    assert entry is not None, f"the master's epoch cache {cache.entries} does not cover offset {offset}"
    if "BugTransferCursorNotReset" in bugs and cursor_epoch != 0 and entry.epoch > cursor_epoch:
        k = cache.find_epoch(cursor_epoch)
        return cache.entries[k] if k is not None else EpochEntry(cursor_epoch, 0)
    return entry


class RoleError(ValueError):
    """An event the broker cannot take in its role (the runtime answers it with an error)."""


# --- the ReplicasManager ------------------------------------------------------------------------

class ReplicasManager:
    """One broker's role and replication state (see the module doc)."""

    def __init__(self, broker_id: str, *, epoch_cache: EpochFileCache, log_end_offset: int, confirm_offset: int,
                 bugs: frozenset[str] = frozenset(), policy: sss_policy.SyncStateSetPolicy | None = None) -> None:
        assert log_end_offset >= 0 and confirm_offset >= 0
        self.broker_id = broker_id
        self.bugs = check_bugs(bugs)
        self.role = SLAVE
        self.master_id: str | None = None       # None: follows nobody (fenced)
        self.master_epoch = 0
        self.sss: frozenset[str] = frozenset()
        self.sss_epoch = 0
        self.remote_sss: frozenset[str] = frozenset()   # an AlterSyncStateSet proposal in flight
        self.epoch_cache = epoch_cache
        self.log_end_offset = log_end_offset
        self.confirm_offset = confirm_offset
        self.connections: dict[str, HaConnection] = {}  # master: one per slave in TRANSFER
        self.policy = policy or sss_policy.SyncStateSetPolicy(broker_id)   # as master: when to alter the SSS

    # --- construction: Init and BrokerRestart ------------------------------------------------

    @classmethod
    def initial(cls, broker_id: str, initial_master: str, *, bugs: frozenset[str] = frozenset(),
                policy: sss_policy.SyncStateSetPolicy | None = None) -> ReplicasManager:
        """Init: the master of epoch 1 with SSS {itself}, or a slave following it."""
        first = broker_id == initial_master
        rm = cls(broker_id, epoch_cache=EpochFileCache(((1, 0),) if first else ()), log_end_offset=0,
                 confirm_offset=0, bugs=bugs, policy=policy)
        rm.role, rm.master_id, rm.master_epoch = (MASTER if first else SLAVE), initial_master, 1
        if first:
            rm.sss, rm.sss_epoch = frozenset({broker_id}), 1
        rm.check_invariants()
        return rm

    @classmethod
    def recover(cls, broker_id: str, *, epoch_cache: EpochFileCache, log_end_offset: int,
                checkpoint_confirm_offset: int, bugs: frozenset[str] = frozenset(),
                policy: sss_policy.SyncStateSetPolicy | None = None) -> ReplicasManager:
        """BrokerRestart: after the log's recovery scan.  confirmOffset is the checkpoint's
        clamped into the recovered log (#6703; BugConfirmNotClamped keeps it); epoch
        entries starting past the log end are dropped (the spec drops them at the power
        loss, TruncateBeyond).  The broker is fenced — a slave of nobody in epoch 0 —
        until the controller's metadata names its role."""
        bugs = check_bugs(bugs)
        confirm = checkpoint_confirm_offset if "BugConfirmNotClamped" in bugs else min(checkpoint_confirm_offset,
                                                                                         log_end_offset)
        rm = cls(broker_id, epoch_cache=epoch_cache.truncate_beyond(log_end_offset), log_end_offset=log_end_offset,
                 confirm_offset=confirm, bugs=bugs, policy=policy)
        rm.check_invariants()
        return rm

    @property
    def fenced(self) -> bool:
        """After a restart, until change_to_master / change_to_slave (RunningFlags fenced)."""
        return self.master_id is None

    def _bug(self, name: str) -> bool:
        return name in self.bugs

    # --- role changes ------------------------------------------------------------------------

    def role_named(self, master_id: str | None, master_epoch: int) -> str | None:
        """What the controller's metadata (its master, masterEpoch) asks of this broker: MASTER,
        SLAVE, or None when it names no master, or no epoch larger than the one known here (E5,
        the guard change_to_master / change_to_slave keep as well)."""
        if not master_id or master_epoch <= self.master_epoch:
            return None
        return MASTER if master_id == self.broker_id else SLAVE

    def change_to_master(self, master_epoch: int, sss: frozenset[str], sss_epoch: int) -> tuple:
        """ChangeToMaster(b): metadata names this broker master in ``master_epoch``.  Refused
        (no effects) unless the epoch is larger than the one it knows (E5)."""
        if master_epoch <= self.master_epoch:
            return ()
        sss = frozenset(sss)
        assert len(sss) <= MAX_SLAVES, len(sss)
        was_master = self.role == MASTER
        assert was_master or not self.connections, self.connections
        effects: tuple = () if was_master or self.master_id is None else (fx.StopHaClient(),)
        self.role, self.master_id, self.master_epoch = MASTER, self.broker_id, master_epoch
        self.sss, self.sss_epoch, self.remote_sss = sss, sss_epoch, frozenset()
        self.policy.reset()
        self.epoch_cache = self.epoch_cache.truncate_suffix_by_epoch(master_epoch).append_entry(
            (master_epoch, self.log_end_offset), bugs=self.bugs)
        self.confirm_offset = self._confirm(sss)
        self.check_invariants()
        return effects + (fx.WriteEpochFile(self.epoch_cache.entries, epoch_file_durable(self.bugs)),)

    def change_to_slave(self, master_id: str, master_epoch: int) -> tuple:
        """ChangeToSlave(b): metadata names another broker master.  E5 as above.  Following
        that master already: only the epoch is recorded.  Else the HA client restarts (a
        new handshake, which truncates) and a demoted master closes its connections."""
        if master_epoch <= self.master_epoch:
            return ()
        if master_id == self.broker_id or not master_id:
            raise RoleError(f"{self.broker_id}: change_to_slave names {master_id!r} as master")
        self.master_epoch = master_epoch
        if self.role == SLAVE and self.master_id == master_id:
            return ()
        effects: tuple = ()
        if self.role == MASTER and self.connections:
            effects += (fx.CloseConnections(tuple(sorted(self.connections))),)
        self.connections = {}
        self.role, self.master_id = SLAVE, master_id
        self.sss, self.sss_epoch, self.remote_sss = frozenset(), 0, frozenset()
        self.check_invariants()
        return effects + (fx.StartHaClient(master_id),)

    # --- the SyncStateSet --------------------------------------------------------------------

    def change_sync_state_set(self, master_id: str | None, master_epoch: int, sss: frozenset[str],
                              sss_epoch: int) -> bool:
        """ChangeSyncStateSet(m): the controller's SSS (the alter reply or the periodic sync),
        taken only by a master in the controller's current epoch (``master_epoch``, the
        metadata's) and for a newer sssEpoch; the proposal is cleared and confirmOffset
        recomputed.  Returns whether it was taken."""
        if self.role != MASTER or master_id != self.broker_id or master_epoch != self.master_epoch \
                or sss_epoch <= self.sss_epoch:
            return False
        self.sss, self.sss_epoch, self.remote_sss = frozenset(sss), sss_epoch, frozenset()
        self.confirm_offset = self._confirm(self.sss)
        self.check_invariants()
        return True

    def ack_members(self) -> frozenset[str]:
        """The other brokers a PUT_OK of this master waits for now (roles.ack_members)."""
        return ack_members(self.broker_id, self.sss, self.remote_sss, bugs=self.bugs) if self.role == MASTER \
            else frozenset()

    def _acks(self) -> dict[str, int]:
        return {name: conn.ack_offset for name, conn in self.connections.items()}

    def may_shrink(self, slave_id: str) -> bool:
        """ShrinkSyncStateSet's guard (sss_policy.may_shrink over this master's connections)."""
        return self.role == MASTER and sss_policy.may_shrink(self.broker_id, self.sss, self.remote_sss, self._acks(),
                                                             self.log_end_offset, slave_id)

    def may_expand(self, slave_id: str) -> bool:
        """ExpandSyncStateSet's guard (sss_policy.may_expand over this master's connections)."""
        return self.role == MASTER and sss_policy.may_expand(
            self.broker_id, self.sss, self.remote_sss, self._acks(), self.log_end_offset, self.confirm_offset,
            self.epoch_cache.last_start(), slave_id)

    def check_sync_state_set(self, now_ms: int, acks: Mapping[str, int] | None = None,
                             log_end_offset: int | None = None, confirm_offset: int | None = None) -> tuple:
        """checkSyncStateSetAndDoReport: the policy (sss_policy.py) decides; a proposal joins
        the ack view at once (the union rule) and goes out as ProposeSyncStateSet; an
        unanswered one is given up.  ``acks``/``log_end_offset``/``confirm_offset`` default
        to this manager's own (the simulator); a byte-level master passes its own (the node),
        in the same step on its loop thread as its next ack check.  An unanswered proposal
        is sent again (action "Resend"), never dropped locally."""
        if self.role != MASTER:
            return ()
        if log_end_offset is not None:
            # the node's master: its committed end (a re-elected master took its written end, which
            # may be ahead for a moment, as its new epoch's start: never go back below it)
            self.log_end_offset = max(self.log_end_offset, log_end_offset)
        decision = self.policy.decide(
            now_ms, sss=self.sss, remote_sss=self.remote_sss, acks=self._acks() if acks is None else acks,
            log_end_offset=self.log_end_offset, confirm_offset=self.confirm_offset if confirm_offset is None
            else confirm_offset, epoch_start_offset=self.epoch_cache.last_start())
        if decision is None:
            return ()
        if decision == sss_policy.ALTER_TIMED_OUT:
            # Sent again, never given up here: a reply lost is not a refusal, and the controller
            # may still commit the first request; acks keep counting over the union until the
            # metadata's sssEpoch moves (ChangeSyncStateSet) or the controller refuses.
            return (fx.ProposeSyncStateSet("Resend", "", self.remote_sss),)
        self.propose_sync_state_set(decision.sss)
        return (fx.ProposeSyncStateSet(decision.action, decision.member, decision.sss),)

    def propose_sync_state_set(self, new_sss: frozenset[str]) -> frozenset[str]:
        """Shrink/ExpandSyncStateSet: the proposal goes out; from now on acks count over the
        union of the committed and the proposed set (#5663).  Returns the proposal."""
        new_sss = frozenset(new_sss)
        if self.role != MASTER or self.remote_sss:
            raise RoleError(f"{self.broker_id}: cannot propose a SyncStateSet (role {self.role}, "
                            f"in flight {sorted(self.remote_sss)})")
        assert self.broker_id in new_sss and len(new_sss) <= MAX_SLAVES, new_sss
        self.remote_sss = new_sss
        return new_sss

    def alter_answered(self, accepted: bool, master_id: str | None, master_epoch: int, sss: frozenset[str],
                       sss_epoch: int) -> None:
        """The controller's answer to our AlterSyncStateSet, with its metadata as of then.
        The metadata is learned first (ChangeSyncStateSet): a refusal of a proposal sent
        again, because the first one was committed meanwhile, then finds nothing to drop;
        only a proposal the controller holds no trace of is dropped from the ack view."""
        self.change_sync_state_set(master_id, master_epoch, sss, sss_epoch)
        if not accepted and self.remote_sss:
            self.alter_refused()

    def alter_refused(self) -> None:
        """AlterSyncStateSet refused by the controller: the proposal is dropped (alone again:
        confirmOffset is the log end)."""
        self.remote_sss = frozenset()
        if not (self.sss - {self.broker_id}):
            self.confirm_offset = self.log_end_offset

    # --- puts, acks, responses, reads --------------------------------------------------------

    def header_confirm(self) -> int:
        """HeaderConfirm(m): the confirmOffset a TRANSFER header carries
        (BugSlaveConfirmFromMaxOffset: the max offset)."""
        return header_confirm(self.log_end_offset, self.confirm_offset, bugs=self.bugs)

    def _confirm(self, view: frozenset[str]) -> int:
        return confirm_with(self.broker_id, view, self.connections, self.log_end_offset, self.confirm_offset,
                            bugs=self.bugs)

    # --- invariants --------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Asserted after every event that changes state."""
        assert self.role in (MASTER, SLAVE), self.role
        assert len(self.connections) <= MAX_SLAVES
        if not self._bug("BugEpochAppendUnchecked"):
            assert self.epoch_cache.ordered, self.epoch_cache.entries
        if not self._bug("BugConfirmNotClamped"):
            assert self.confirm_offset <= self.log_end_offset, (self.confirm_offset, self.log_end_offset)
        if self.role == MASTER:
            assert self.master_id == self.broker_id
            if not self._bug("BugEpochAppendUnchecked"):
                assert self.epoch_cache.last_epoch() == self.master_epoch, (self.epoch_cache.entries,
                                                                             self.master_epoch)
        else:
            assert not self.connections and not self.sss and not self.remote_sss
