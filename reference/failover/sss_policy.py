"""The SyncStateSet policy of a controller-mode master, sans-IO.

RocketMQ keeps it in the broker's HA service (AutoSwitchHAService
``maybeShrinkSyncStateSet`` / ``maybeExpandInSyncStateSet``, run from
ReplicasManager.checkSyncStateSetAndDoReport); so does this project: one
definition, driven by the failover simulator (reference/failover/group.py,
through ``ReplicasManager.check_sync_state_set``) and by the running node
(reference/real/node.py, on its master's loop thread), so a defect seeded
here is a defect in both and the refinement check of the simulator sees it.

* Shrink (the spec's ShrinkSyncStateSet guard, and haMaxTimeSlaveNotCatchup
  on top): a member other than the master that has no connection, or whose
  ack is behind the master's log end, and that has not caught up for
  ``max_not_catchup_ms``.  "Caught up" is RocketMQ's
  updateConnectionLastCaughtUpTime: the ack reached where the master's log
  ended at the previous check (``lastMasterMaxOffset``), so a member that
  keeps pace under load is never dropped while a connected but slow one is.
* Expand (ExpandSyncStateSet): a connected slave whose ack is the master's
  log end, at least confirmOffset and inside the current epoch.
* One proposal at a time; a proposal unanswered for ``alter_timeout_ms`` is
  sent again (ALTER_TIMED_OUT), never given up locally: a lost reply is not a
  refusal, and dropping a proposed member from the ack view while the
  controller may still commit it would let a PUT_OK skip a member that can
  be elected.

Time is the caller's ``now_ms`` (virtual in the simulator, monotonic in the
node).  Offsets are in the log's unit.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS_DEFAULT = 15_000     # MessageStoreConfig.haMaxTimeSlaveNotCatchup
ALTER_TIMEOUT_MS_DEFAULT = 10_000                    # an AlterSyncStateSet answer is given up after this
MAX_TRACKED_MEMBERS = 128                            # members and connected slaves: 2 x roles.MAX_SLAVES


def may_shrink(me: str, sss: frozenset[str], remote_sss: frozenset[str], acks: Mapping[str, int],
               log_end_offset: int, slave: str) -> bool:
    """ShrinkSyncStateSet(m, s)'s guard: no proposal in flight; ``slave`` is another member
    with no connection (no entry in ``acks``) or an ack behind the log end."""
    if remote_sss or slave not in sss or slave == me:
        return False
    return slave not in acks or acks[slave] < log_end_offset


def may_expand(me: str, sss: frozenset[str], remote_sss: frozenset[str], acks: Mapping[str, int],
               log_end_offset: int, confirm_offset: int, epoch_start_offset: int, slave: str) -> bool:
    """ExpandSyncStateSet(m, s)'s guard: no proposal in flight; ``slave`` is a connected
    non-member whose ack is the log end, at least confirmOffset and this epoch's start."""
    if remote_sss or slave in sss or slave == me or slave not in acks:
        return False
    ack = acks[slave]
    return ack == log_end_offset and ack >= confirm_offset and ack >= epoch_start_offset


@attrs.frozen
class Proposal:
    """An AlterSyncStateSet to send: ``action`` is the spec's action, ``member`` the broker
    it drops or adds, ``sss`` the proposed set."""
    action: str
    member: str
    sss: frozenset[str]


ALTER_TIMED_OUT = "AlterTimedOut"


class SyncStateSetPolicy:
    """When a master proposes a new SyncStateSet (see the module doc)."""

    def __init__(self, me: str, *, max_not_catchup_ms: int = HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS_DEFAULT,
                 alter_timeout_ms: int = ALTER_TIMEOUT_MS_DEFAULT) -> None:
        assert max_not_catchup_ms > 0 and alter_timeout_ms > 0, (max_not_catchup_ms, alter_timeout_ms)
        self.me = me
        self.max_not_catchup_ms = max_not_catchup_ms
        self.alter_timeout_ms = alter_timeout_ms
        self.caught_up_ms: dict[str, int] = {}     # connectionCaughtUpTimeTable
        self.target_offset: dict[str, int] = {}    # lastMasterMaxOffset, per slave
        self.alter_sent_ms: int | None = None

    def reset(self) -> None:
        """A new epoch as master: every member's clock starts at the next check."""
        self.caught_up_ms.clear()
        self.target_offset.clear()
        self.alter_sent_ms = None

    def _observe(self, now_ms: int, sss: frozenset[str], acks: Mapping[str, int], log_end_offset: int) -> None:
        for slave, ack in acks.items():
            if ack >= min(self.target_offset.get(slave, log_end_offset), log_end_offset):
                self.caught_up_ms[slave] = now_ms
            self.target_offset[slave] = log_end_offset
        for member in sss - {self.me}:
            self.caught_up_ms.setdefault(member, now_ms)      # a member first seen: its clock starts now
        for name in [n for n in self.caught_up_ms if n not in sss and n not in acks]:
            del self.caught_up_ms[name]
            self.target_offset.pop(name, None)
        assert len(self.caught_up_ms) <= MAX_TRACKED_MEMBERS, len(self.caught_up_ms)

    def decide(self, now_ms: int, *, sss: frozenset[str], remote_sss: frozenset[str], acks: Mapping[str, int],
               log_end_offset: int, confirm_offset: int, epoch_start_offset: int) -> Proposal | str | None:
        """At the master's periodic check: a Proposal, ALTER_TIMED_OUT (send the proposal in
        flight again), or None.  At most one member changes per proposal, as in the spec."""
        assert self.me in sss, (self.me, sss)
        self._observe(now_ms, sss, acks, log_end_offset)
        if remote_sss:
            if self.alter_sent_ms is None:
                self.alter_sent_ms = now_ms
            if now_ms - self.alter_sent_ms < self.alter_timeout_ms:
                return None
            self.alter_sent_ms = now_ms
            return ALTER_TIMED_OUT
        self.alter_sent_ms = None
        for slave in sorted(sss - {self.me}):
            if (may_shrink(self.me, sss, remote_sss, acks, log_end_offset, slave)
                    and now_ms - self.caught_up_ms[slave] >= self.max_not_catchup_ms):
                return self._sent(now_ms, Proposal("ShrinkSyncStateSet", slave, sss - {slave}))
        for slave in sorted(acks):
            if may_expand(self.me, sss, remote_sss, acks, log_end_offset, confirm_offset, epoch_start_offset, slave):
                return self._sent(now_ms, Proposal("ExpandSyncStateSet", slave, sss | {slave}))
        return None

    def _sent(self, now_ms: int, proposal: Proposal) -> Proposal:
        assert self.me in proposal.sss and proposal.member != self.me, proposal
        assert (proposal.member in proposal.sss) == (proposal.action == "ExpandSyncStateSet"), proposal
        self.alter_sent_ms = now_ms
        return proposal
