"""The properties of tla/AckOrderControllers.tla, same names: invariants
(state predicates) and action properties ([][A]_v, on a transition)."""

from __future__ import annotations

from spec.controllers.config import ControllersConfig
from spec.controllers.state import CState


def type_ok(cfg: ControllersConfig, s: CState) -> bool:
    return (s.masterId in (*cfg.brokers, cfg.no_broker) and s.syncStateSet <= set(cfg.brokers)
            and s.owner in (*cfg.controllers, cfg.no_controller) and min(s.masterEpoch, s.sssEpoch, s.rev, s.token) >= 0
            and all(h >= 0 for h in s.held))


def one_master_per_epoch(cfg: ControllersConfig, s: CState) -> bool:
    masters: dict[int, str] = {}
    return all(masters.setdefault(e, m) == m for e, m in s.inv_elected)


def _register(s: CState) -> tuple:
    return s.masterId, s.masterEpoch, s.syncStateSet, s.sssEpoch


def elect_step(cfg: ControllersConfig, s: CState, t: CState) -> bool:
    return t.masterEpoch == s.masterEpoch + 1 and (
        (t.masterId == cfg.no_broker and t.syncStateSet == s.syncStateSet and t.sssEpoch == s.sssEpoch)
        or (t.masterId in s.syncStateSet and t.syncStateSet == {t.masterId} and t.sssEpoch == s.sssEpoch + 1))


def alter_step(cfg: ControllersConfig, s: CState, t: CState) -> bool:
    return (t.masterId == s.masterId and t.masterEpoch == s.masterEpoch and s.masterId != cfg.no_broker
            and t.sssEpoch == s.sssEpoch + 1 and s.masterId in t.syncStateSet)


def store_refines_failover(cfg: ControllersConfig, s: CState, t: CState) -> bool:
    return _register(s) == _register(t) or elect_step(cfg, s, t) or alter_step(cfg, s, t)


def elect_only_a_silent_master(cfg: ControllersConfig, s: CState, t: CState) -> bool:
    if not (t.masterEpoch > s.masterEpoch and s.masterId != cfg.no_broker):
        return True
    return s.inv_silent[cfg.brokers.index(s.masterId)]


INVARIANTS = {
    "TypeOK": type_ok,
    "OneMasterPerEpoch": one_master_per_epoch,
}
ACTION_PROPERTIES = {
    "StoreRefinesFailover": store_refines_failover,
    "ElectOnlyASilentMaster": elect_only_a_silent_master,
}
LIVENESS_PROPERTIES: dict = {}
SAFETY = tuple(INVARIANTS)
