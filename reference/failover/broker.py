"""BrokerCore: one broker under controller-driven failover, sans-IO.

It couples the role and epoch state (reference/failover/roles.py ``ReplicasManager``: E5, the
epoch cache, the SyncStateSet policy, confirmOffset) with the byte-level machine its role runs —
a ``MasterCore`` while master, a ``FollowerCore`` while slave — the way h11 couples a client and
a server machine inside one connection.  Every rule that joins the two lives here, so the
byte-level Hypothesis machine (reference/tests/test_follower_machine.py) checks the same joins
the running node (reference/real/node.py) performs:

* what a follower learned on its HA connection (its log end at a record boundary, its epochs,
  confirmOffset) becomes the role state when it stops (``detach``);
* ChangeToMaster takes its new epoch's start from the master core's log end, and the core's
  transfer labels, confirmOffset and SyncStateSet view from the manager in the same step, so
  no put is taken between them (``change_to_master``);
* a SyncStateSet decision sees the master core's acks and log end first, and its ack view goes
  back to the core in the same step (``_step``), so no PUT_OK slips past a new member (#5663);
* what a heartbeat reports (``heartbeat_report``).

A caller that runs the master core on another thread (the node) calls the ``master_*`` methods
on that thread.  Events in, effects out: the effects are ReplicasManager's (broker_effects.py).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from reference.commitlog import held_log
from reference.failover.epochfile import EpochFileCache
from reference.failover.follower import FollowerCore
from reference.failover.roles import MASTER, SLAVE, HaConnection, ReplicasManager, sss_view
from reference.failover.sss_policy import SyncStateSetPolicy
from reference.failover.truncation import cuts_are_durable
from reference.master import MAX_REPLICAS, MasterCore
from reference.record import LogScan
from reference.replica import ReplicaCore


@attrs.frozen
class HeldLog:
    """The log a stopped machine left, for the next: ``scan``, its checkpoints and last segment
    from memory (commitlog.held_log).  The runtime zeroes what lies beyond its end on disk and
    makes it durable before the next role serves (reference/real/disk.py ``take_held``) — unless
    ``zero_beyond`` is off: BugTruncateNotDurable's cuts stay in memory, the hand-over's too.
    (The core decides it, as it decides every switch: the runtime reads none.)"""
    scan: LogScan
    zero_beyond: bool = True


@attrs.frozen
class HeartbeatReport:
    """BrokerHeartbeat's fields: the last epoch, the max offset held (complete records), and
    confirmOffset (never past that offset)."""
    epoch: int
    max_offset: int
    confirm_offset: int


class BrokerCore:
    def __init__(self, me: str, *, epoch_cache: EpochFileCache, log_end_offset: int, bugs: frozenset[str],
                 policy: SyncStateSetPolicy, checkpoint_confirm_offset: int, recovered: LogScan | None = None) -> None:
        """A broker as its process starts: its log recovered once (``log_end_offset``; the scan
        itself, ``recovered``, for the first machine), its epoch file loaded and confirmOffset from
        its checkpoint (clamped into the log); no role yet."""
        assert recovered is None or recovered.end_offset == log_end_offset, (recovered, log_end_offset)
        # what the next machine starts from without recovering the files again (None: it must)
        self.held: HeldLog | None = None if recovered is None else HeldLog(recovered)
        self.rm = ReplicasManager.recover(me, epoch_cache=epoch_cache, log_end_offset=log_end_offset,
                                          checkpoint_confirm_offset=checkpoint_confirm_offset, bugs=bugs,
                                          policy=policy)
        self.master: MasterCore | None = None
        self.follower: FollowerCore | None = None
        self.peers: tuple[str, ...] = ()       # the other brokers of the group (the controller's metadata)

    @classmethod
    def initial(cls, me: str, initial_master: str, *, bugs: frozenset[str], policy: SyncStateSetPolicy) -> BrokerCore:
        """Init of a new group: the master of epoch 1 with SyncStateSet {itself}, or a slave
        following it; both logs empty (the failover simulator's first state, the spec's Init)."""
        broker = cls(me, epoch_cache=EpochFileCache(), log_end_offset=0, bugs=bugs, policy=policy,
                     checkpoint_confirm_offset=0)
        broker.rm = ReplicasManager.initial(me, initial_master, bugs=bugs, policy=policy)
        return broker

    def resume_master(self) -> None:
        """The master core attached to a broker whose role state is already MASTER (Init):
        its epochs, confirmOffset and views from the manager, before the first put."""
        core = self.master
        assert core is not None and self.rm.role == MASTER, (self.rm.role, core)
        core.begin_epoch(self.rm.epoch_cache.entries, self.rm.confirm_offset, self.rm.bugs)
        self._push(core)

    @property
    def me(self) -> str:
        return self.rm.broker_id

    @property
    def bugs(self) -> frozenset[str]:
        return self.rm.bugs

    # ------------------------------------------------------------------ the byte-level machine of a role

    def attach_master(self, core: MasterCore) -> None:
        """The master core the role will run, over the log as recovered: the role state's log
        end is its log end, and confirmOffset is clamped to it."""
        assert self.master is None and self.follower is None, "one machine at a time"
        self.master, self.held = core, None
        self.rm.log_end_offset = core.log.wrote
        self.rm.confirm_offset = min(self.rm.confirm_offset, self.rm.log_end_offset)

    def attach_follower(self, replica: ReplicaCore) -> FollowerCore:
        """A slave's machine over its recovered log, starting from the role state's epochs and
        confirmOffset; its handshake (and any cut) happens on the HA connection."""
        assert self.master is None and self.follower is None, "one machine at a time"
        assert self.rm.role == SLAVE, self.rm.role
        self.held = None
        self.follower = FollowerCore(replica, self.rm.epoch_cache, self.rm.confirm_offset, bugs=self.rm.bugs)
        return self.follower

    def detach(self) -> None:
        """The role's machine stopped (a role change, or the process stopping).  A follower's
        log end, epochs (labels for what it holds, no further) and confirmOffset are the
        role state from now on; a master's acks are gone with its connections."""
        rm = self.rm
        if self.follower is not None:
            follower, replica = self.follower, self.follower.replica
            rm.log_end_offset = follower.log_end_offset
            rm.epoch_cache = follower.cache.truncate_beyond(rm.log_end_offset)
            rm.confirm_offset = min(follower.confirm_offset, rm.log_end_offset)
            # in the middle of a cut its index no longer says what the files hold: the next recovers them
            self.held = None if follower.index_stale else self._held(
                held_log(replica.index, replica.segments, replica.parsed_end))
        elif self.master is not None:
            # its acks went with its connections; the log it leaves is its last whole record in the
            # page cache (a write buffer past it, a write that failed, are not the log); its waiting
            # requests are answered (effects the caller performs, or drops with the runtime)
            core = self.master
            core.stop_serving()
            end = core.log_end_offset()
            rm.log_end_offset = end
            rm.epoch_cache = rm.epoch_cache.truncate_beyond(end)
            # confirmOffset moved on the core's acks since the manager last looked (_sync); None:
            # its epoch never began (a ChangeToMaster that failed before begin_epoch)
            confirm = core.confirm if core.confirm is not None else rm.confirm_offset
            rm.confirm_offset = min(confirm, end)
            rm.connections = {}
            self.held = self._held(held_log(core.log.index, core.log.segments, end))
        self.master = self.follower = None

    def _held(self, scan: LogScan) -> HeldLog:
        return HeldLog(scan, zero_beyond=cuts_are_durable(self.rm.bugs))

    def take_held(self) -> HeldLog | None:
        """The log the next machine starts from, once (None: recover it from the files)."""
        held, self.held = self.held, None
        return held

    def peers_problem(self, peers: tuple[str, ...]) -> str | None:
        """Why the controller's brokers cannot be this broker's peers, or None: a master only ever
        adds slaves (MasterCore.change_sync_state_set), so brokers that come and go must not add
        up past MAX_REPLICAS over its life — network input is refused here, never asserted."""
        known = self.master.replicas if self.master is not None else ()
        if len(dict.fromkeys(known + self.peers + tuple(peers))) > MAX_REPLICAS:
            return f"{len(dict.fromkeys(known + self.peers + tuple(peers)))} brokers over this master's life; " \
                   f"at most {MAX_REPLICAS}"
        return None

    def stops_serving_for(self, master: str) -> bool:
        """Whether the metadata naming ``master`` ends the machine this broker runs: a master
        demoted, or a slave whose master changed.  The caller stops it, then ``detach``."""
        following = self.rm.master_id == master     # a master's is itself: named again, it goes on
        return not following and (self.master is not None or self.follower is not None)

    # ------------------------------------------------------------------ role changes (E5 in the manager)

    def role_named(self, master: str | None, master_epoch: int) -> str | None:
        return self.rm.role_named(master, master_epoch)

    def change_to_master(self, master_epoch: int, sss: frozenset[str], sss_epoch: int) -> tuple:
        """ChangeToMaster, in one step: the new epoch starts at the master core's log end
        (a re-elected master's written end, which may be ahead of the committed end for a
        moment), and its labels, confirmOffset and views reach the core before the next put.
        The effects (the epoch file) are performed before the core serves again."""
        core = self.master
        assert core is not None, "ChangeToMaster needs the master core attached"
        self._sync(core)
        self.rm.log_end_offset = max(self.rm.log_end_offset, core.log.wrote)
        effects = self.rm.change_to_master(master_epoch, sss, sss_epoch)
        core.begin_epoch(self.rm.epoch_cache.entries, self.rm.confirm_offset, self.rm.bugs)
        self._push(core)
        return effects

    def change_to_slave(self, master: str, master_epoch: int) -> tuple:
        """ChangeToSlave (the caller stopped a machine ``stops_serving_for`` ended)."""
        assert self.master is None, "a demoted master's core is stopped before ChangeToSlave"
        return self.rm.change_to_slave(master, master_epoch)

    # ------------------------------------------------------------------ the SyncStateSet, on the master's thread

    def master_sync_state_set(self, master_id: str | None, master_epoch: int, sss: frozenset[str],
                              sss_epoch: int) -> bool:
        """ChangeSyncStateSet: the controller's SyncStateSet (the periodic sync)."""
        return self._step(lambda: self.rm.change_sync_state_set(master_id, master_epoch, sss, sss_epoch))

    def master_check_sync_state_set(self, now_ms: int) -> tuple:
        """checkSyncStateSetAndDoReport over the master core's own acks: the proposals to send."""
        return self._step(lambda: self.rm.check_sync_state_set(now_ms))

    def master_alter_answered(self, accepted: bool, master_id: str | None, master_epoch: int, sss: frozenset[str],
                              sss_epoch: int) -> None:
        self._step(lambda: self.rm.alter_answered(accepted, master_id, master_epoch, sss, sss_epoch))

    def _step(self, decide: Callable[[], object]) -> object:
        core = self.master
        assert core is not None and self.rm.role == MASTER, (self.rm.role, core)
        self._sync(core)
        out = decide()
        self._push(core)
        return out

    def _sync(self, core: MasterCore) -> None:
        """The master core's connections (their acks), log end and confirmOffset are what the
        manager decides on."""
        rm = self.rm
        rm.log_end_offset = max(rm.log_end_offset, core.log_end_offset())
        # (a slave's promotion attaches a new core: no connections yet)
        rm.connections = {name: HaConnection(hc.ack_offset) for name, hc in core.conns.items()}
        if core.confirm is not None:
            rm.confirm_offset = min(core.confirm, rm.log_end_offset)

    def _push(self, core: MasterCore) -> None:
        """After a decision: the members its PUT_OKs wait for (the committed SyncStateSet and a
        proposal in flight) and the sets its computeConfirmOffset runs over."""
        rm = self.rm
        core.change_sync_state_set(tuple(dict.fromkeys(core.replicas + self.peers)), rm.ack_members())
        core.set_confirm_view(rm.sss - {self.me}, sss_view(rm.sss, rm.remote_sss) - {self.me}, rm.confirm_offset)

    # ------------------------------------------------------------------ what the broker reports

    def heartbeat_report(self) -> HeartbeatReport:
        """On the thread that changes the cores (the node's loop)."""
        rm, follower, master = self.rm, self.follower, self.master
        if follower is not None:
            cache, end, confirm = follower.cache, follower.log_end_offset, follower.confirm_offset
        elif master is not None and master.confirm is not None:       # its epoch begun: the role is MASTER
            cache, end, confirm = rm.epoch_cache, rm.log_end_offset, master.readable_end()
        else:
            cache, end, confirm = rm.epoch_cache, rm.log_end_offset, rm.confirm_offset
        return HeartbeatReport(cache.last_epoch(), end, min(confirm, end))
