"""The properties of tla/AckOrderFailoverProperties.tla, same names, same meaning.

``INVARIANTS`` maps each state invariant to ``(cfg, state) -> bool``;
``ACTION_PROPERTIES`` each action property to ``(cfg, state, next) -> bool``;
the liveness properties are checked by spec/failover/explore.py with the
generic lasso search of spec/liveness.py.
"""

from __future__ import annotations

from collections.abc import Callable

from spec.failover.config import FailoverConfig
from spec.failover.functions import alive, epoch_at, holds, sss_view
from spec.failover.state import MASTER, PUT_OK, SLAVE, STATUSES, WAITING, FState


def later_master(cfg: FailoverConfig, s: FState, k: int, e: int) -> bool:
    """LaterMaster(b, e): the controller's master of epoch e or later, or a broker acting as one."""
    b = cfg.brokers[k]
    return (s.masterId == b and s.masterEpoch >= e) or (s.up[k] and s.role[k] == MASTER and s.bEpoch[k] >= e)


def _acked(s: FState):
    return [(i, r) for i, r in enumerate(s.reqs, start=1) if r.status == PUT_OK]


def type_ok(cfg: FailoverConfig, s: FState) -> bool:
    n = len(cfg.brokers)
    names = frozenset(cfg.brokers)
    nat = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    return (
        s.masterId in names | {cfg.no_broker} and nat(s.masterEpoch) and nat(s.sssEpoch)
        and s.syncStateSet <= names
        and all(len(getattr(s, f)) == n for f in ("reachable", "up", "role", "bMasterId", "bEpoch", "bSSS",
                                                   "bSssEpoch", "bRemoteSSS", "alterPending", "blog", "epochCache",
                                                   "confirm", "staleTail", "connected", "ack", "cursorEpoch"))
        and all(r in (MASTER, SLAVE) for r in s.role)
        and all(m in names | {cfg.no_broker} for m in s.bMasterId)
        and all(x <= names for x in s.bSSS + s.bRemoteSSS)
        and all(nat(x) for x in s.bEpoch + s.bSssEpoch + s.confirm + s.ack + s.cursorEpoch)
        and all(nat(x) for log in s.blog + s.staleTail for x in log)
        and all(nat(e) and nat(o) for c in s.epochCache for e, o in c)
        and all(nat(r.off) and r.status in STATUSES | {WAITING} and nat(r.epoch) and r.master in names
                for r in s.reqs)
        and all(nat(x) for x in s.inv_pcLost)
    )


def acked_survives_failover(cfg: FailoverConfig, s: FState) -> bool:
    for i, r in _acked(s):
        if i in s.inv_pcLost:
            continue
        for k in range(len(cfg.brokers)):
            if later_master(cfg, s, k, r.epoch) and not holds(s, s.blog[k], i):
                return False
    return True


def one_master_per_epoch(cfg: FailoverConfig, s: FState) -> bool:
    masters = [k for k in range(len(cfg.brokers)) if s.up[k] and s.role[k] == MASTER]
    epochs = [s.bEpoch[k] for k in masters]
    if len(set(epochs)) != len(epochs):
        return False
    writer: dict[int, str] = {}
    return all(writer.setdefault(r.epoch, r.master) == r.master for r in s.reqs)


def cache_ordered(c) -> bool:
    return all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(c, c[1:]))


def epochs_monotone(cfg: FailoverConfig, s: FState) -> bool:
    for k in range(len(cfg.brokers)):
        c = s.epochCache[k]
        if not cache_ordered(c) or s.bEpoch[k] > s.masterEpoch or any(e > s.masterEpoch for e, _ in c):
            return False
        eps = [s.reqs[x - 1].epoch for x in s.blog[k]]
        if any(a > b for a, b in zip(eps, eps[1:])):
            return False
    return True


def epoch_cache_accurate(cfg: FailoverConfig, s: FState) -> bool:
    return all(epoch_at(s.epochCache[k], o) == s.reqs[x - 1].epoch
               for k in range(len(cfg.brokers)) if s.up[k] for o, x in enumerate(s.blog[k]))


def log_matching_across_epochs(cfg: FailoverConfig, s: FState) -> bool:
    live = [k for k in range(len(cfg.brokers)) if s.up[k]]
    lost = s.inv_pcLost
    for a in live:
        for b in live:
            la, lb = s.blog[a], s.blog[b]
            top = min(s.confirm[a], s.confirm[b], len(la), len(lb))
            if any(la[o] != lb[o] and la[o] not in lost and lb[o] not in lost for o in range(top)):
                return False
    return True


def visible_implies_replicated(cfg: FailoverConfig, s: FState) -> bool:
    for j in range(len(cfg.brokers)):
        if not (s.up[j] and s.role[j] == MASTER):
            continue
        log = s.blog[j]
        for member in sss_view(s, j):
            other = s.blog[cfg.index(member)]
            for o in range(min(s.confirm[j], len(log))):
                if log[o] not in s.inv_pcLost and not (o < len(other) and other[o] == log[o]):
                    return False
    return True


def sss_contains_master(cfg: FailoverConfig, s: FState) -> bool:
    if s.masterId != cfg.no_broker and s.masterId not in s.syncStateSet:
        return False
    for k, b in enumerate(cfg.brokers):
        if s.up[k] and s.role[k] == MASTER:
            if b not in s.bSSS[k] or (s.bRemoteSSS[k] and b not in s.bRemoteSSS[k]):
                return False
    return True


def confirm_within_log(cfg: FailoverConfig, s: FState) -> bool:
    return all(s.confirm[k] <= len(s.blog[k]) for k in range(len(cfg.brokers)) if s.up[k])


# --- debug (reachability) invariants: each MUST be violated by its cfg ---------------------

def debug_no_acked_failover(cfg: FailoverConfig, s: FState) -> bool:
    for i, r in _acked(s):
        for k, b in enumerate(cfg.brokers):
            if (b != r.master and s.up[k] and s.role[k] == MASTER and s.bEpoch[k] > r.epoch
                    and holds(s, s.blog[k], i)):
                return False
    return True


def debug_no_acked_loss_after_power_loss(cfg: FailoverConfig, s: FState) -> bool:
    return all(holds(s, s.blog[k], i) for i, r in _acked(s)
               for k in range(len(cfg.brokers)) if later_master(cfg, s, k, r.epoch))


def debug_no_handshake_truncation(cfg: FailoverConfig, s: FState, t: FState) -> bool:
    """~HandshakeTruncation: a connection that starts with records truncated off the slave's log."""
    return not any(not s.connected[k] and t.connected[k] and len(t.blog[k]) < len(s.blog[k])
                   for k in range(len(cfg.brokers)))


def stable_master(cfg: FailoverConfig, s: FState) -> bool:
    """StableMaster: a live broker is the controller's master and knows it."""
    if s.masterId == cfg.no_broker or not alive(cfg, s, s.masterId):
        return False
    k = cfg.index(s.masterId)
    return s.role[k] == MASTER and s.bEpoch[k] == s.masterEpoch


Invariant = Callable[[FailoverConfig, FState], bool]

INVARIANTS: dict[str, Invariant] = {
    "TypeOK": type_ok,
    "AckedSurvivesFailover": acked_survives_failover,
    "OneMasterPerEpoch": one_master_per_epoch,
    "EpochsMonotone": epochs_monotone,
    "LogMatchingAcrossEpochs": log_matching_across_epochs,
    "EpochCacheAccurate": epoch_cache_accurate,
    "VisibleImpliesReplicated": visible_implies_replicated,
    "SSSContainsMaster": sss_contains_master,
    "ConfirmWithinLog": confirm_within_log,
    "Debug_NoAckedFailover": debug_no_acked_failover,
    "Debug_NoAckedLossAfterPowerLoss": debug_no_acked_loss_after_power_loss,
}

ACTION_PROPERTIES: dict[str, Callable[[FailoverConfig, FState, FState], bool]] = {
    "Debug_NoHandshakeTruncation": debug_no_handshake_truncation,
}

LIVENESS_PROPERTIES = ("MasterEventuallyStable", "EveryRequestAnswered")

# The safety properties every green failover cfg checks, in cfg order.
SAFETY = (
    "TypeOK", "AckedSurvivesFailover", "OneMasterPerEpoch", "EpochsMonotone", "LogMatchingAcrossEpochs",
    "EpochCacheAccurate", "VisibleImpliesReplicated", "SSSContainsMaster", "ConfirmWithinLog",
)
