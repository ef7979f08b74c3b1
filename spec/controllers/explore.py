"""Exploring the controllers twin on a cfg of tla/MCAckOrderControllers.tla with
TLC's semantics (spec/explore.py's breadth-first search): the same constants,
the invariants and action properties the cfg names, in cfg order."""

from __future__ import annotations

from spec.cfgfile import CfgError, CfgFile, ModelValue, active_bugs, constant_reader, model_value_names
from spec.config import ConfigError
from spec.controllers.actions import initial_state, successors
from spec.controllers.config import ControllersBounds, ControllersConfig
from spec.controllers.properties import ACTION_PROPERTIES, INVARIANTS
from spec.explore import ExploreResult, search

_BOUND_CONSTANTS = {"MaxTakes": "max_takes", "MaxExpiries": "max_expiries", "MaxCrashes": "max_crashes",
                    "MaxElections": "max_elections", "MaxAlters": "max_alters"}
_CONSTANTS = {"Brokers", "Controllers", "InitialMaster", "NoBroker", "NoController", "ActiveBug"} | \
    set(_BOUND_CONSTANTS)


def is_controllers_cfg(cfg: CfgFile) -> bool:
    """A cfg of MCAckOrderControllers (it names Controllers)."""
    return "Controllers" in cfg.constants


def controllers_model_from_cfg(cfg: CfgFile) -> tuple[ControllersConfig, ControllersBounds]:
    value = constant_reader(cfg, _CONSTANTS)
    for name in ("InitialMaster", "NoBroker", "NoController"):
        if not isinstance(value(name), ModelValue):
            raise CfgError(f"{cfg.path}:{cfg.constants[name][1]}: {name} must be a model value")
    try:
        config = ControllersConfig(brokers=model_value_names(cfg, "Brokers"),
                                   controllers=model_value_names(cfg, "Controllers"),
                                   initial_master=value("InitialMaster").name, no_broker=value("NoBroker").name,
                                   no_controller=value("NoController").name, bugs=active_bugs(cfg))
        bounds = ControllersBounds(**{field: value(const) for const, field in _BOUND_CONSTANTS.items()})
    except (ConfigError, TypeError) as err:
        raise CfgError(f"{cfg.path}: {err}") from err
    return config, bounds


def explore_controllers_cfg(cfgfile: CfgFile, **kwargs) -> ExploreResult:
    cfg, bounds = controllers_model_from_cfg(cfgfile)
    if cfgfile.view is not None or cfgfile.symmetry is not None:
        raise ConfigError(f"{cfgfile.path}: the controllers module has no VIEW or SYMMETRY")
    unknown = [p for p in cfgfile.invariants if p not in INVARIANTS]
    unknown += [p for p in cfgfile.properties if p not in ACTION_PROPERTIES]
    if unknown:
        raise ConfigError(f"{cfgfile.path}: unknown properties {', '.join(unknown)}")
    checks = [(n, lambda s, f=INVARIANTS[n]: f(cfg, s)) for n in cfgfile.invariants]
    action_checks = [(n, lambda s, t, f=ACTION_PROPERTIES[n]: f(cfg, s, t)) for n in cfgfile.properties]
    return search(initial_state(cfg), lambda s: successors(cfg, bounds, s), lambda s: s, checks, action_checks,
                  **kwargs)
