"""The actions of tla/AckOrderControllers.tla, one function per action and
the same names (snake_case); each returns the successor states.
``successors`` is MCAckOrderControllers!MCNext: same disjuncts, same order,
TLA+ action labels."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from spec.controllers.config import ControllersBounds, ControllersConfig
from spec.controllers.state import CCounters, CState, Snap


def no_snap(cfg: ControllersConfig) -> Snap:
    return Snap(cfg.no_broker, 0, frozenset(), 0, 0)


def initial_state(cfg: ControllersConfig) -> CState:
    nb, nc = len(cfg.brokers), len(cfg.controllers)
    return CState(
        masterId=cfg.initial_master, masterEpoch=1, syncStateSet=frozenset({cfg.initial_master}), sssEpoch=1, rev=1,
        owner=cfg.no_controller, token=0, up=(True,) * nb, snap=(no_snap(cfg),) * nc, held=(0,) * nc,
        heard=((False,) * nb,) * nc, inv_elected=frozenset({(1, cfg.initial_master)}), inv_silent=(False,) * nb,
        aux_ctrs=CCounters())


def _set(t: tuple, i: int, v) -> tuple:
    return t[:i] + (v,) + t[i + 1:]


def take_shard(cfg: ControllersConfig, s: CState, c: str) -> list[CState]:
    if s.owner != cfg.no_controller:
        return []
    ci = cfg.controllers.index(c)
    grace = not cfg.bug("BugNoTakeoverGrace")
    return [attrs.evolve(s, owner=c, token=s.token + 1, held=_set(s.held, ci, s.token + 1),
                         heard=_set(s.heard, ci, (grace,) * len(cfg.brokers)),
                         inv_silent=tuple(not u for u in s.up), aux_ctrs=s.aux_ctrs.bump("take"))]


def lease_expires(cfg: ControllersConfig, s: CState) -> list[CState]:
    if s.owner == cfg.no_controller:
        return []
    return [attrs.evolve(s, owner=cfg.no_controller, aux_ctrs=s.aux_ctrs.bump("expire"))]


def heartbeat(cfg: ControllersConfig, s: CState, b: str) -> list[CState]:
    bi = cfg.brokers.index(b)
    if not s.up[bi] or s.owner == cfg.no_controller:
        return []
    oi = cfg.controllers.index(s.owner)
    if s.heard[oi][bi]:
        return []
    return [attrs.evolve(s, heard=_set(s.heard, oi, _set(s.heard[oi], bi, True)),
                         inv_silent=_set(s.inv_silent, bi, False))]


def expire(cfg: ControllersConfig, s: CState, c: str, b: str) -> list[CState]:
    ci, bi = cfg.controllers.index(c), cfg.brokers.index(b)
    if not s.heard[ci][bi] or (s.up[bi] and s.owner == c):
        return []
    return [attrs.evolve(s, heard=_set(s.heard, ci, _set(s.heard[ci], bi, False)))]


def broker_crash(cfg: ControllersConfig, s: CState, b: str) -> list[CState]:
    bi = cfg.brokers.index(b)
    if not s.up[bi]:
        return []
    return [attrs.evolve(s, up=_set(s.up, bi, False), inv_silent=_set(s.inv_silent, bi, True),
                         aux_ctrs=s.aux_ctrs.bump("crash"))]


def broker_restart(cfg: ControllersConfig, s: CState, b: str) -> list[CState]:
    bi = cfg.brokers.index(b)
    if s.up[bi]:
        return []
    return [attrs.evolve(s, up=_set(s.up, bi, True))]


def read(cfg: ControllersConfig, s: CState, c: str) -> list[CState]:
    ci = cfg.controllers.index(c)
    return [attrs.evolve(s, snap=_set(s.snap, ci, Snap(s.masterId, s.masterEpoch, s.syncStateSet, s.sssEpoch,
                                                       s.rev)))]


def fenced(cfg: ControllersConfig, s: CState, c: str) -> bool:
    """The commit's compares: the shard token c holds, the revision c read."""
    ci = cfg.controllers.index(c)
    token_ok = cfg.bug("BugCommitWithoutCompare") or cfg.bug("BugActAfterLeaseExpired") or \
        (s.owner == c and s.token == s.held[ci])
    rev_ok = cfg.bug("BugCommitWithoutCompare") or cfg.bug("BugOwnerSkipsMetadataCompare") or s.rev == s.snap[ci].rev
    return token_ok and rev_ok


def decides(cfg: ControllersConfig, s: CState, c: str) -> bool:
    ci = cfg.controllers.index(c)
    return s.snap[ci].rev > 0 and s.held[ci] > 0


def elect_master(cfg: ControllersConfig, s: CState, c: str) -> list[CState]:
    ci = cfg.controllers.index(c)
    snap, heard = s.snap[ci], s.heard[ci]
    if not decides(cfg, s, c):
        return []
    if snap.master != cfg.no_broker and heard[cfg.brokers.index(snap.master)]:
        return []
    if not fenced(cfg, s, c):
        return []
    cands = sorted(b for b in snap.sss if heard[cfg.brokers.index(b)])
    common = dict(rev=s.rev + 1, masterEpoch=snap.epoch + 1, aux_ctrs=s.aux_ctrs.bump("election"))
    if cands:
        return [attrs.evolve(s, masterId=n, syncStateSet=frozenset({n}), sssEpoch=snap.sssEpoch + 1,
                             inv_elected=s.inv_elected | {(snap.epoch + 1, n)}, **common) for n in cands]
    if snap.master == cfg.no_broker:
        return []
    return [attrs.evolve(s, masterId=cfg.no_broker, syncStateSet=snap.sss, sssEpoch=snap.sssEpoch, **common)]


def alter_sync_state_set(cfg: ControllersConfig, s: CState, c: str, b: str) -> list[CState]:
    ci = cfg.controllers.index(c)
    snap, heard = s.snap[ci], s.heard[ci]
    if not decides(cfg, s, c) or snap.master == cfg.no_broker or b == snap.master:
        return []
    new = snap.sss - {b} if b in snap.sss else snap.sss | {b}
    if not all(heard[cfg.brokers.index(x)] for x in new) or not fenced(cfg, s, c):
        return []
    return [attrs.evolve(s, syncStateSet=new, sssEpoch=snap.sssEpoch + 1, rev=s.rev + 1,
                         aux_ctrs=s.aux_ctrs.bump("alter"))]


def successors(cfg: ControllersConfig, bounds: ControllersBounds, s: CState) -> Iterator[tuple[str, CState]]:
    n = s.aux_ctrs
    for c in cfg.controllers:
        if n.take < bounds.max_takes:
            for t in take_shard(cfg, s, c):
                yield f"TakeShard({c})", t
        for t in read(cfg, s, c):
            yield f"Read({c})", t
        if n.election < bounds.max_elections:
            for t in elect_master(cfg, s, c):
                yield f"ElectMaster({c})", t
        for b in cfg.brokers:
            for t in expire(cfg, s, c, b):
                yield f"Expire({c},{b})", t
            if n.alter < bounds.max_alters:
                for t in alter_sync_state_set(cfg, s, c, b):
                    yield f"AlterSyncStateSet({c},{b})", t
    if n.expire < bounds.max_expiries:
        for t in lease_expires(cfg, s):
            yield "LeaseExpires", t
    for b in cfg.brokers:
        for t in heartbeat(cfg, s, b):
            yield f"Heartbeat({b})", t
        if n.crash < bounds.max_crashes:
            for t in broker_crash(cfg, s, b):
                yield f"BrokerCrash({b})", t
        for t in broker_restart(cfg, s, b):
            yield f"BrokerRestart({b})", t
