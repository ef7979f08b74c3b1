"""The actions of tla/AckOrderFailover.tla, one function per action, same names.

Each function takes the configuration and a state (and the action's
parameters: broker names or a request id) and returns the list of
successor states (empty when the action is not enabled).  The TLA+ module
has the full headers (WHO, the RocketMQ code).  ``successors`` is
MCAckOrderFailover!MCNext: the same disjuncts in the same order, with the
perturbations bounded by ``FailoverBounds``.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from spec.failover.config import FailoverBounds, FailoverConfig
from spec.failover.functions import (
    abort_at, ack_covered, alive, append_entry, confirm_with, connected_to, consistent_point, covering_index,
    header_confirm, last_epoch, last_start, sss_view, transfer_label, truncate_beyond, truncate_suffix_by_epoch,
    truncate_suffix_by_offset,
)
from spec.failover.state import (
    FLUSH_SLAVE_TIMEOUT, MASTER, PUT_OK, SLAVE, WAITING, FCounters, FRequest, FState,
)

evolve = attrs.evolve


def _set(t: tuple, k: int, v) -> tuple:
    return t[:k] + (v,) + t[k + 1:]


def _bump(s: FState, kind: str) -> FCounters:
    return evolve(s.aux_ctrs, **{kind: getattr(s.aux_ctrs, kind) + 1})


def _overwrite(t: tuple) -> tuple:
    """Overwrite(t): a write overwrites the first record a truncation left on disk."""
    return t[1:]


def initial_state(cfg: FailoverConfig) -> FState:
    n, im = len(cfg.brokers), cfg.initial_master
    first = tuple(b == im for b in cfg.brokers)
    return FState(
        masterId=im, masterEpoch=1, syncStateSet=frozenset({im}), sssEpoch=1,
        reachable=(True,) * n, up=(True,) * n,
        role=tuple(MASTER if f else SLAVE for f in first), bMasterId=(im,) * n, bEpoch=(1,) * n,
        bSSS=tuple(frozenset({im}) if f else frozenset() for f in first), bSssEpoch=tuple(1 if f else 0 for f in first),
        bRemoteSSS=(frozenset(),) * n, alterPending=(False,) * n,
        blog=((),) * n, epochCache=tuple(((1, 0),) if f else () for f in first), confirm=(0,) * n,
        staleTail=((),) * n, connected=(False,) * n, ack=(0,) * n, cursorEpoch=(0,) * n,
        reqs=(), inv_pcLost=frozenset(), aux_ctrs=FCounters(),
    )


# --- producer and GroupTransferService -----------------------------------------------

def put(cfg: FailoverConfig, s: FState, m: str) -> list[FState]:
    """Producer -> a broker that believes it is master: CommitLog.asyncPutMessage."""
    k = cfg.index(m)
    if not (s.up[k] and s.role[k] == MASTER):
        return []
    rid, off = len(s.reqs) + 1, len(s.blog[k]) + 1
    alone = not (sss_view(s, k) - {m})
    return [evolve(
        s, blog=_set(s.blog, k, s.blog[k] + (rid,)), staleTail=_set(s.staleTail, k, _overwrite(s.staleTail[k])),
        reqs=s.reqs + (FRequest(off, WAITING, s.bEpoch[k], m),),
        confirm=_set(s.confirm, k, off) if alone else s.confirm,
    )]


def can_respond(cfg: FailoverConfig, s: FState, i: int) -> bool:
    r = s.reqs[i - 1]
    k = cfg.index(r.master)
    return s.up[k] and s.role[k] == MASTER and s.bEpoch[k] == r.epoch and ack_covered(cfg, s, k, r.off)


def _status(s: FState, i: int, status: str) -> tuple[FRequest, ...]:
    return _set(s.reqs, i - 1, evolve(s.reqs[i - 1], status=status))


def respond(cfg: FailoverConfig, s: FState, i: int) -> list[FState]:
    """Master GroupTransferService: PUT_OK once the SSS view's acks cover the record."""
    if not (s.reqs[i - 1].status == WAITING and can_respond(cfg, s, i)):
        return []
    return [evolve(s, reqs=_status(s, i, PUT_OK))]


def timeout(cfg: FailoverConfig, s: FState, i: int) -> list[FState]:
    """Master GroupTransferService: the deadline passes with the replica leg pending."""
    if not (s.reqs[i - 1].status == WAITING and not can_respond(cfg, s, i)):
        return []
    return [evolve(s, reqs=_status(s, i, FLUSH_SLAVE_TIMEOUT))]


# --- HA: handshake, transfer, acks ---------------------------------------------------

def replica_connect(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """Slave's AutoSwitchHAClient: handshake, doTruncate, first header, first report (no common
    epoch: the whole log cut, durably, followed from 0)."""
    k = cfg.index(b)
    m = s.bMasterId[k]
    if not (s.up[k] and s.role[k] == SLAVE and m != cfg.no_broker and not s.connected[k]):
        return []
    j = cfg.index(m)
    if not (s.up[j] and s.role[j] == MASTER):
        return []
    point = consistent_point(cfg, s, k, j)
    p = max(point, 0)           # no common epoch: the whole log is cut, durably, and followed from 0
    disk = s.blog[k] + s.staleTail[k]
    ci = covering_index(s.epochCache[j], p)
    if ci == 0:
        return []               # the master's entries do not cover where the stream would start
    header = s.epochCache[j][ci - 1]
    connected = _set(s.connected, k, True)
    ack = _set(s.ack, k, p)
    confirm = _set(s.confirm, k, min(header_confirm(cfg, s, j), p))
    if b in s.bSSS[j]:
        confirm = _set(confirm, j, confirm_with(cfg, s, j, sss_view(s, j), connected, ack, s.confirm[j]))
    return [evolve(
        s, blog=_set(s.blog, k, s.blog[k][:p]),
        staleTail=_set(s.staleTail, k, disk[p:] if cfg.bug("BugTruncateNotDurable") and point >= 0 else ()),
        epochCache=_set(s.epochCache, k, append_entry(cfg, truncate_suffix_by_offset(s.epochCache[k], p), header)),
        connected=connected, ack=ack,
        cursorEpoch=_set(s.cursorEpoch, k, last_epoch(s.epochCache[j]) if cfg.bug("BugTransferCursorNotReset") else 0),
        confirm=confirm,
    )]


def _slave_and_master(cfg: FailoverConfig, s: FState, b: str) -> tuple[int, int] | None:
    """The slave's index and its master's, when the slave's connection can carry data."""
    k = cfg.index(b)
    if not (s.up[k] and s.connected[k]):
        return None
    j = cfg.index(s.bMasterId[k])
    if not (s.up[j] and s.role[j] == MASTER):
        return None
    return k, j


def transfer(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """Master HAConnection -> slave HAClient: the next record, with its epoch label."""
    pair = _slave_and_master(cfg, s, b)
    if pair is None:
        return []
    k, j = pair
    o = len(s.blog[k])
    if not o < len(s.blog[j]):
        return []
    label = transfer_label(cfg, s, j, k, o)
    cache = s.epochCache[k]
    return [evolve(
        s, blog=_set(s.blog, k, s.blog[k] + (s.blog[j][o],)), staleTail=_set(s.staleTail, k, _overwrite(s.staleTail[k])),
        epochCache=_set(s.epochCache, k, cache if label[0] == last_epoch(cache) else append_entry(cfg, cache, label)),
        confirm=_set(s.confirm, k, min(header_confirm(cfg, s, j), o)),
    )]


def replica_ack(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """Slave reports its max offset; the master records it and may recompute confirmOffset."""
    pair = _slave_and_master(cfg, s, b)
    if pair is None:
        return []
    k, j = pair
    if not s.ack[k] < len(s.blog[k]):
        return []
    ack = _set(s.ack, k, len(s.blog[k]))
    confirm = s.confirm
    if b in s.bSSS[j]:
        confirm = _set(confirm, j, confirm_with(cfg, s, j, sss_view(s, j), s.connected, ack, s.confirm[j]))
    return [evolve(s, ack=ack, confirm=confirm)]


def replica_disconnect(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """The network drops the slave's HA connection."""
    k = cfg.index(b)
    if not s.connected[k]:
        return []
    return [evolve(s, connected=_set(s.connected, k, False), ack=_set(s.ack, k, 0),
                   cursorEpoch=_set(s.cursorEpoch, k, 0), aux_ctrs=_bump(s, "disconnect"))]


# --- SyncStateSet changes ---------------------------------------------------------------

def _propose(s: FState, j: int, new_set: frozenset[str]) -> FState:
    return evolve(s, bRemoteSSS=_set(s.bRemoteSSS, j, new_set), alterPending=_set(s.alterPending, j, True),
                  aux_ctrs=_bump(s, "sssProposal"))


def _can_propose(s: FState, j: int) -> bool:
    return s.up[j] and s.role[j] == MASTER and not s.bRemoteSSS[j]


def shrink_sync_state_set(cfg: FailoverConfig, s: FState, m: str, b: str) -> list[FState]:
    """Master proposes dropping a member without a connection, or not caught up."""
    j, k = cfg.index(m), cfg.index(b)
    if not (_can_propose(s, j) and b in s.bSSS[j] and b != m):
        return []
    if connected_to(cfg, s, k, m) and s.ack[k] >= len(s.blog[j]):
        return []
    return [_propose(s, j, s.bSSS[j] - {b})]


def expand_sync_state_set(cfg: FailoverConfig, s: FState, m: str, b: str) -> list[FState]:
    """Master proposes adding a connected slave that caught up."""
    j, k = cfg.index(m), cfg.index(b)
    if not (_can_propose(s, j) and b not in s.bSSS[j] and connected_to(cfg, s, k, m)):
        return []
    a = s.ack[k]
    if not (a == len(s.blog[j]) and a >= s.confirm[j] and a >= last_start(s.epochCache[j])):
        return []
    return [_propose(s, j, s.bSSS[j] | {b})]


def alter_accepted(cfg: FailoverConfig, s: FState, m: str) -> bool:
    j = cfg.index(m)
    fenced = cfg.bug("BugAlterWithoutFencing") or (
        s.masterId == m and s.masterEpoch == s.bEpoch[j] and s.sssEpoch == s.bSssEpoch[j])
    return fenced and m in s.bRemoteSSS[j] and all(alive(cfg, s, b) for b in s.bRemoteSSS[j])


def alter_sync_state_set(cfg: FailoverConfig, s: FState, m: str) -> list[FState]:
    """Controller: compare-and-set on (master, masterEpoch, sssEpoch) and E3."""
    j = cfg.index(m)
    if not (s.alterPending[j] and s.up[j] and s.reachable[j]):
        return []
    pending = _set(s.alterPending, j, False)
    if alter_accepted(cfg, s, m):
        return [evolve(s, alterPending=pending, syncStateSet=s.bRemoteSSS[j], sssEpoch=s.sssEpoch + 1)]
    confirm = _set(s.confirm, j, len(s.blog[j])) if not (s.bSSS[j] - {m}) else s.confirm
    return [evolve(s, alterPending=pending, bRemoteSSS=_set(s.bRemoteSSS, j, frozenset()), confirm=confirm)]


def change_sync_state_set(cfg: FailoverConfig, s: FState, m: str) -> list[FState]:
    """Master learns the controller's SSS (the alter reply or the periodic sync)."""
    j = cfg.index(m)
    if not (s.up[j] and s.reachable[j] and s.role[j] == MASTER and s.masterId == m
            and s.masterEpoch == s.bEpoch[j] and s.sssEpoch > s.bSssEpoch[j]):
        return []
    return [evolve(
        s, bSSS=_set(s.bSSS, j, s.syncStateSet), bSssEpoch=_set(s.bSssEpoch, j, s.sssEpoch),
        bRemoteSSS=_set(s.bRemoteSSS, j, frozenset()), alterPending=_set(s.alterPending, j, False),
        confirm=_set(s.confirm, j, confirm_with(cfg, s, j, s.syncStateSet, s.connected, s.ack, s.confirm[j])),
    )]


# --- elections and role changes --------------------------------------------------------

def elect_master(cfg: FailoverConfig, s: FState) -> list[FState]:
    """Controller: elect a live SSS member when the master is not alive (E2, E4)."""
    if s.masterId != cfg.no_broker and alive(cfg, s, s.masterId):
        return []
    if cfg.bug("BugElectOnlyOnMasterDeath") and s.masterId == cfg.no_broker:
        return []
    pool = frozenset(cfg.brokers) if cfg.bug("BugUncleanElection") else s.syncStateSet
    cands = sorted(b for b in pool if alive(cfg, s, b))
    nxt = s.masterEpoch if cfg.bug("BugElectKeepsEpoch") else s.masterEpoch + 1
    ctrs = _bump(s, "election")
    if cands:
        return [evolve(s, masterId=c, masterEpoch=nxt, syncStateSet=frozenset({c}), sssEpoch=s.sssEpoch + 1,
                       aux_ctrs=ctrs) for c in cands]
    if s.masterId == cfg.no_broker:
        return []
    return [evolve(s, masterId=cfg.no_broker, masterEpoch=nxt, aux_ctrs=ctrs)]


def change_to_master(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """Broker's ReplicasManager: it is the new master (larger epoch only, E5)."""
    k = cfg.index(b)
    if not (s.up[k] and s.reachable[k] and s.masterId == b and s.masterEpoch > s.bEpoch[k]):
        return []
    was_master = s.role[k] == MASTER
    connected = s.connected if was_master else _set(s.connected, k, False)
    ack = s.ack if was_master else _set(s.ack, k, 0)
    cache = append_entry(cfg, truncate_suffix_by_epoch(s.epochCache[k], s.masterEpoch), (s.masterEpoch, len(s.blog[k])))
    return [evolve(
        s, role=_set(s.role, k, MASTER), bMasterId=_set(s.bMasterId, k, b), bEpoch=_set(s.bEpoch, k, s.masterEpoch),
        bSSS=_set(s.bSSS, k, s.syncStateSet), bSssEpoch=_set(s.bSssEpoch, k, s.sssEpoch),
        bRemoteSSS=_set(s.bRemoteSSS, k, frozenset()), alterPending=_set(s.alterPending, k, False),
        epochCache=_set(s.epochCache, k, cache), connected=connected, ack=ack,
        cursorEpoch=s.cursorEpoch if was_master else _set(s.cursorEpoch, k, 0),
        confirm=_set(s.confirm, k, confirm_with(cfg, s, k, s.syncStateSet, connected, ack, s.confirm[k])),
    )]


def _drop(cfg: FailoverConfig, s: FState, k: int) -> frozenset[int]:
    """A broker and, if it was master, the slaves connected through it."""
    b = cfg.brokers[k]
    return frozenset(j for j in range(len(cfg.brokers))
                     if j == k or (s.role[k] == MASTER and s.bMasterId[j] == b))


def _disconnect(s: FState, drop: frozenset[int]) -> dict:
    return dict(
        connected=tuple(False if j in drop else c for j, c in enumerate(s.connected)),
        ack=tuple(0 if j in drop else a for j, a in enumerate(s.ack)),
        cursorEpoch=tuple(0 if j in drop else c for j, c in enumerate(s.cursorEpoch)),
    )


def change_to_slave(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """Broker's ReplicasManager: another broker is master (larger epoch only, E5)."""
    k = cfg.index(b)
    if not (s.up[k] and s.reachable[k] and s.masterId not in (b, cfg.no_broker) and s.masterEpoch > s.bEpoch[k]):
        return []
    epoch = _set(s.bEpoch, k, s.masterEpoch)
    if s.role[k] == SLAVE and s.bMasterId[k] == s.masterId:
        return [evolve(s, bEpoch=epoch)]
    return [evolve(
        s, bEpoch=epoch, role=_set(s.role, k, SLAVE), bMasterId=_set(s.bMasterId, k, s.masterId),
        bSSS=_set(s.bSSS, k, frozenset()), bSssEpoch=_set(s.bSssEpoch, k, 0),
        bRemoteSSS=_set(s.bRemoteSSS, k, frozenset()), alterPending=_set(s.alterPending, k, False),
        **_disconnect(s, _drop(cfg, s, k)),
    )]


# --- failures and healing --------------------------------------------------------------

def _die(cfg: FailoverConfig, s: FState, k: int) -> dict:
    """Die(b): what a broker's process takes with it."""
    b = cfg.brokers[k]
    return dict(
        up=_set(s.up, k, False), role=_set(s.role, k, SLAVE), bMasterId=_set(s.bMasterId, k, cfg.no_broker),
        bEpoch=_set(s.bEpoch, k, 0), bSSS=_set(s.bSSS, k, frozenset()), bSssEpoch=_set(s.bSssEpoch, k, 0),
        bRemoteSSS=_set(s.bRemoteSSS, k, frozenset()), alterPending=_set(s.alterPending, k, False),
        reqs=abort_at(s, b), **_disconnect(s, _drop(cfg, s, k)),
    )


def broker_crash(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """The broker's process dies; its page cache survives."""
    k = cfg.index(b)
    if not s.up[k]:
        return []
    return [evolve(s, **_die(cfg, s, k), aux_ctrs=_bump(s, "brokerCrash"))]


def broker_power_loss(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """The broker's machine loses power: any prefix of its log survives."""
    k = cfg.index(b)
    if not s.up[k]:
        return []
    died = _die(cfg, s, k)
    log, cache = s.blog[k], s.epochCache[k]
    out = []
    for keep in range(len(log) + 1):
        for last_lost in (False, True):
            if last_lost and not (cfg.bug("BugEpochFileNotDurable") and cache):
                continue
            kept_cache = truncate_beyond(cache[:-1] if last_lost else cache, keep)
            out.append(evolve(
                s, **died, blog=_set(s.blog, k, log[:keep]), inv_pcLost=s.inv_pcLost | frozenset(log[keep:]),
                epochCache=_set(s.epochCache, k, kept_cache), staleTail=_set(s.staleTail, k, ()),
                aux_ctrs=_bump(s, "powerLoss"),
            ))
    return out


def broker_restart(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """The broker's process starts: recovery, the confirmOffset clamp, fenced until it learns its role."""
    k = cfg.index(b)
    if s.up[k] or s.masterId == b:
        return []
    recovered = s.blog[k] + s.staleTail[k] if cfg.bug("BugTruncateNotDurable") else s.blog[k]
    confirm = s.confirm[k] if cfg.bug("BugConfirmNotClamped") else min(s.confirm[k], len(recovered))
    return [evolve(s, up=_set(s.up, k, True), blog=_set(s.blog, k, recovered), staleTail=_set(s.staleTail, k, ()),
                   confirm=_set(s.confirm, k, confirm))]


def cut_from_controller(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """The network between the broker and the controller fails."""
    k = cfg.index(b)
    if not s.reachable[k]:
        return []
    return [evolve(s, reachable=_set(s.reachable, k, False), aux_ctrs=_bump(s, "cutOff"))]


def reconnect_to_controller(cfg: FailoverConfig, s: FState, b: str) -> list[FState]:
    """The network between the broker and the controller heals."""
    k = cfg.index(b)
    if s.reachable[k]:
        return []
    return [evolve(s, reachable=_set(s.reachable, k, True))]


# --- next-state relation -------------------------------------------------------------------

def successors(cfg: FailoverConfig, bounds: FailoverBounds, s: FState) -> Iterator[tuple[str, FState]]:
    """MCAckOrderFailover!MCNext: (action label, successor) pairs, TLA+ action names."""
    c = s.aux_ctrs
    if c.election < bounds.max_elections:
        for t in elect_master(cfg, s):
            yield "ElectMaster", t
    for m in cfg.brokers:
        for t in alter_sync_state_set(cfg, s, m):
            yield f"AlterSyncStateSet({m})", t
    for b in cfg.brokers:
        if len(s.reqs) < bounds.max_puts:
            for t in put(cfg, s, b):
                yield f"Put({b})", t
        for t in change_to_master(cfg, s, b):
            yield f"ChangeToMaster({b})", t
        for t in change_to_slave(cfg, s, b):
            yield f"ChangeToSlave({b})", t
        for t in change_sync_state_set(cfg, s, b):
            yield f"ChangeSyncStateSet({b})", t
        for t in replica_connect(cfg, s, b):
            yield f"ReplicaConnect({b})", t
        for t in transfer(cfg, s, b):
            yield f"Transfer({b})", t
        for t in replica_ack(cfg, s, b):
            yield f"ReplicaAck({b})", t
        if c.disconnect < bounds.max_disconnects:
            for t in replica_disconnect(cfg, s, b):
                yield f"ReplicaDisconnect({b})", t
        if c.sssProposal < bounds.max_sss_proposals:
            for o in cfg.brokers:
                for t in shrink_sync_state_set(cfg, s, b, o):
                    yield f"ShrinkSyncStateSet({b},{o})", t
                for t in expand_sync_state_set(cfg, s, b, o):
                    yield f"ExpandSyncStateSet({b},{o})", t
        if c.brokerCrash < bounds.max_broker_crashes:
            for t in broker_crash(cfg, s, b):
                yield f"BrokerCrash({b})", t
        if c.powerLoss < bounds.max_power_losses:
            for t in broker_power_loss(cfg, s, b):
                yield f"BrokerPowerLoss({b})", t
        for t in broker_restart(cfg, s, b):
            yield f"BrokerRestart({b})", t
        if c.cutOff < bounds.max_cut_offs:
            for t in cut_from_controller(cfg, s, b):
                yield f"CutFromController({b})", t
        for t in reconnect_to_controller(cfg, s, b):
            yield f"ReconnectToController({b})", t
    for i in range(1, len(s.reqs) + 1):
        for t in respond(cfg, s, i):
            yield f"Respond({i})", t
        for t in timeout(cfg, s, i):
            yield f"Timeout({i})", t


# Actions under weak fairness in AckOrderFailover!FairnessOver, by label prefix.
FAIR_ACTIONS = ("ElectMaster", "AlterSyncStateSet", "ChangeSyncStateSet", "ChangeToMaster", "ChangeToSlave",
                "ReplicaConnect", "Transfer", "ReplicaAck", "BrokerRestart", "ReconnectToController",
                "Respond", "Timeout")
