"""Exploring the failover twin on a cfg of tla/MCAckOrderFailover.tla, with
TLC's semantics (spec/explore.py's search): the same constants, the same
invariants and action properties in cfg order, SYMMETRY FollowerSymmetry
as orbit counting, and the liveness properties by the lasso search of
spec/liveness.py under AckOrderFailover!FairnessOver."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import attrs

from spec.cfgfile import CfgError, CfgFile, ModelValue, active_bugs, constant_reader, model_value_names
from spec.config import ConfigError
from spec.explore import ExploreResult, search
from spec.failover.actions import FAIR_ACTIONS, initial_state, successors
from spec.failover.config import FailoverBounds, FailoverConfig
from spec.failover.properties import ACTION_PROPERTIES, INVARIANTS, LIVENESS_PROPERTIES, stable_master
from spec.failover.state import BROKER_SET_VALUED, BROKER_VALUED, PER_BROKER, WAITING, FRequest, FState
from spec.gcpause import no_full_collections

_BOUND_CONSTANTS = {
    "MaxPuts": "max_puts", "MaxBrokerCrashes": "max_broker_crashes", "MaxPowerLosses": "max_power_losses",
    "MaxCutOffs": "max_cut_offs", "MaxDisconnects": "max_disconnects", "MaxSssProposals": "max_sss_proposals",
    "MaxElections": "max_elections",
}
_CONSTANTS = {"Brokers", "InitialMaster", "NoBroker", "ActiveBug"} | set(_BOUND_CONSTANTS)
SYMMETRIES = ("FollowerSymmetry",)


def is_failover_cfg(cfg: CfgFile) -> bool:
    """A cfg of MCAckOrderFailover (it names Brokers, not Replicas)."""
    return "Brokers" in cfg.constants and "Controllers" not in cfg.constants


def failover_model_from_cfg(cfg: CfgFile) -> tuple[FailoverConfig, FailoverBounds]:
    """The FailoverConfig and FailoverBounds a cfg of MCAckOrderFailover.tla describes."""
    value = constant_reader(cfg, _CONSTANTS)
    brokers = model_value_names(cfg, "Brokers")
    for name in ("InitialMaster", "NoBroker"):
        if not isinstance(value(name), ModelValue):
            raise CfgError(f"{cfg.path}:{cfg.constants[name][1]}: {name} must be a model value")
    try:
        config = FailoverConfig(brokers=brokers, initial_master=value("InitialMaster").name,
                                no_broker=value("NoBroker").name, bugs=active_bugs(cfg))
        bounds = FailoverBounds(**{field: value(const) for const, field in _BOUND_CONSTANTS.items()})
    except (ConfigError, TypeError) as err:
        raise CfgError(f"{cfg.path}: {err}") from err
    return config, bounds


def permute(cfg: FailoverConfig, s: FState, perm: dict[str, str]) -> FState:
    """The state with brokers renamed by ``perm`` (a permutation of cfg.brokers)."""
    def name(b: str) -> str:
        return perm.get(b, b)

    order = [cfg.index(name(b)) for b in cfg.brokers]   # where broker k's values go
    changes = {}
    for field in PER_BROKER:
        old = getattr(s, field)
        new = [None] * len(old)
        for k, v in enumerate(old):
            if field in BROKER_VALUED:
                v = name(v)
            elif field in BROKER_SET_VALUED:
                v = frozenset(name(x) for x in v)
            new[order[k]] = v
        changes[field] = tuple(new)
    return attrs.evolve(
        s, masterId=name(s.masterId), syncStateSet=frozenset(name(b) for b in s.syncStateSet),
        reqs=tuple(FRequest(r.off, r.status, r.epoch, name(r.master)) for r in s.reqs), **changes)


def symmetry_key(cfg: FailoverConfig, symmetry: str | None):
    """Identity of a state for the search: the state, or its orbit under
    FollowerSymmetry (permutations of the brokers other than the initial master)."""
    if symmetry is None:
        return lambda s: s
    if symmetry not in SYMMETRIES:
        raise ConfigError(f"SYMMETRY {symmetry}: the twin knows {', '.join(SYMMETRIES)}")
    followers = [b for b in cfg.brokers if b != cfg.initial_master]
    perms = [dict(zip(followers, p)) for p in itertools.permutations(followers)]
    perms = [p for p in perms if any(k != v for k, v in p.items())]

    def orbit(s: FState) -> Hashable:
        return frozenset([s, *(permute(cfg, s, p) for p in perms)])

    return orbit


def explore_failover_cfg(cfgfile: CfgFile, **kwargs) -> ExploreResult:
    """Explore the failover model a TLC cfg describes, checking what the cfg checks."""
    from spec.liveness import _fair_lasso

    cfg, bounds = failover_model_from_cfg(cfgfile)
    if cfgfile.view is not None:
        raise ConfigError(f"{cfgfile.path}: the failover module has no VIEW")
    unknown = [p for p in cfgfile.invariants if p not in INVARIANTS]
    unknown += [p for p in cfgfile.properties if p not in ACTION_PROPERTIES and p not in LIVENESS_PROPERTIES]
    if unknown:
        raise ConfigError(f"{cfgfile.path}: unknown properties {', '.join(unknown)}")
    liveness = tuple(p for p in cfgfile.properties if p in LIVENESS_PROPERTIES)
    if liveness and cfgfile.symmetry is not None:
        raise ConfigError(f"{cfgfile.path}: liveness with SYMMETRY is not supported (TLC would be unsound)")
    checks = [(n, lambda s, f=INVARIANTS[n]: f(cfg, s)) for n in cfgfile.invariants]
    action_checks = [(n, lambda s, t, f=ACTION_PROPERTIES[n]: f(cfg, s, t))
                     for n in cfgfile.properties if n in ACTION_PROPERTIES]
    result = search(initial_state(cfg), lambda s: successors(cfg, bounds, s), symmetry_key(cfg, cfgfile.symmetry),
                    checks, action_checks, keep_graph=bool(liveness), **kwargs)
    with no_full_collections():     # the lasso searches walk the graph the search kept
        for prop in liveness:
            if result.violation is not None:
                break
            violation = LIVENESS_CHECKS[prop](cfg, bounds, result.graph, _fair_lasso)
            if violation is not None:
                result = attrs.evolve(result, violation=violation)
    return attrs.evolve(result, graph=None)


def _master_eventually_stable(cfg, bounds, graph, lasso):
    everything = set(range(len(graph.states)))
    bad = {k for k, s in enumerate(graph.states) if not stable_master(cfg, s)}
    return lasso("MasterEventuallyStable", graph, everything, bad, FAIR_ACTIONS) if bad else None


def _every_request_answered(cfg, bounds, graph, lasso):
    for i in range(1, bounds.max_puts + 1):
        waiting = {k for k, s in enumerate(graph.states) if len(s.reqs) >= i and s.reqs[i - 1].status == WAITING}
        if waiting and (v := lasso("EveryRequestAnswered", graph, waiting, waiting, FAIR_ACTIONS)) is not None:
            return v
    return None


LIVENESS_CHECKS = {"MasterEventuallyStable": _master_eventually_stable,
                   "EveryRequestAnswered": _every_request_answered}
