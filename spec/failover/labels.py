"""The failover spec's action labels (``ReplicaConnect(b2)``, ``Respond(3)``, ``ElectMaster``) and
the twin's successors under one: one dispatch for the refinement check of the simulator
(reference/failover/refine.py) and the trace check (spec/failover/tracecheck.py)."""

from __future__ import annotations

import re

from spec.failover import actions
from spec.failover.config import FailoverConfig
from spec.failover.state import FState

LABEL = re.compile(r"^(\w+)(?:\(([^)]*)\))?$")
# label name -> the twin's action
ACTIONS = {
    "Put": actions.put, "ChangeToMaster": actions.change_to_master, "ChangeToSlave": actions.change_to_slave,
    "ChangeSyncStateSet": actions.change_sync_state_set, "ReplicaConnect": actions.replica_connect,
    "Transfer": actions.transfer, "ReplicaAck": actions.replica_ack, "ReplicaDisconnect": actions.replica_disconnect,
    "ShrinkSyncStateSet": actions.shrink_sync_state_set, "ExpandSyncStateSet": actions.expand_sync_state_set,
    "AlterSyncStateSet": actions.alter_sync_state_set, "BrokerCrash": actions.broker_crash,
    "BrokerPowerLoss": actions.broker_power_loss, "BrokerRestart": actions.broker_restart,
    "CutFromController": actions.cut_from_controller, "ReconnectToController": actions.reconnect_to_controller,
    "Respond": actions.respond, "Timeout": actions.timeout, "ElectMaster": actions.elect_master,
}
# how many brokers each action names (Respond and Timeout name a request instead)
BROKER_ARGS = {"ElectMaster": 0, "ShrinkSyncStateSet": 2, "ExpandSyncStateSet": 2, "Respond": 0, "Timeout": 0}
REQUEST_ACTIONS = ("Respond", "Timeout")


class LabelError(ValueError):
    """Not a label of this configuration's actions (an unknown action, arity or broker)."""


def parse_label(cfg: FailoverConfig, label: str) -> tuple[str, list]:
    """(action, arguments) of ``label``; LabelError when it names no action of ``cfg``."""
    m = LABEL.match(label)
    if m is None or m.group(1) not in ACTIONS:
        raise LabelError(f"not a failover action label: {label!r}")
    name = m.group(1)
    args = [a.strip() for a in m.group(2).split(",")] if m.group(2) else []
    if name in REQUEST_ACTIONS:
        if len(args) != 1 or not args[0].isascii() or not args[0].isdigit() or len(args[0]) > 9:
            raise LabelError(f"{label!r}: {name} names one request by its number")
        return name, [int(args[0])]
    if len(args) != BROKER_ARGS.get(name, 1) or not all(a in cfg.brokers for a in args):
        raise LabelError(f"{label!r}: {name} names {BROKER_ARGS.get(name, 1)} of the brokers {', '.join(cfg.brokers)}")
    return name, args


def allowed(cfg: FailoverConfig, pre: FState, label: str) -> list[FState]:
    """The twin's successors of ``pre`` under the action ``label`` names (none for a request
    number the state does not hold)."""
    name, args = parse_label(cfg, label)
    if name in REQUEST_ACTIONS and not 1 <= args[0] <= len(pre.reqs):
        return []
    return ACTIONS[name](cfg, pre, *args)
