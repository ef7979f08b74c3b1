"""What ControllerCore asks its runtime to do (the controller's twin of
reference/effects.py): persist a metadata record, answer a request."""

from __future__ import annotations

import attrs

NO_MASTER = 0          # masterId of a group with no master (the spec's NoBroker); broker ids are >= 1


@attrs.frozen
class MetadataRecord:
    """One metadata change of one broker group (the controller's replicated
    event in RocketMQ: ElectMasterEvent, AlterSyncStateSetEvent, a broker's
    registration), as the whole new state of the group: recovery keeps the
    last record of each group."""
    group: str
    brokers: tuple[int, ...]          # registered broker ids, sorted (BrokerReplicaInfo)
    master_id: int                    # NO_MASTER when the group has none
    master_epoch: int
    sync_state_set: tuple[int, ...]   # sorted
    sss_epoch: int


@attrs.frozen
class ReplicaInfo:
    """What GetReplicaInfo answers (RocketMQ's GetReplicaInfoResponseHeader + SyncStateSet)."""
    group: str
    master_id: int
    master_epoch: int
    sync_state_set: tuple[int, ...]
    sss_epoch: int
    alive: tuple[int, ...] = ()       # registered brokers alive by heartbeat when asked


@attrs.frozen
class PersistMetadata:
    """Append ``record`` to the metadata store; answer with ``metadata_durable(token)``
    once it (and every record before it) is durable, or ``metadata_failed``.
    Tokens grow by one per record."""
    token: int
    record: MetadataRecord


@attrs.frozen
class Reply:
    """The answer to request ``req_id``: ``code`` is "SUCCESS" or the RocketMQ
    ResponseCode name of a refusal, ``reason`` one line saying why."""
    req_id: int
    code: str
    reason: str = ""
    info: ReplicaInfo | None = None

    @property
    def ok(self) -> bool:
        return self.code == SUCCESS


SUCCESS = "SUCCESS"
# Refusals, with RocketMQ's ResponseCode names (ReplicasInfoManager, ControllerManager).
CONTROLLER_INVALID_MASTER = "CONTROLLER_INVALID_MASTER"
CONTROLLER_FENCED_MASTER_EPOCH = "CONTROLLER_FENCED_MASTER_EPOCH"
CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH"
CONTROLLER_INVALID_REPLICAS = "CONTROLLER_INVALID_REPLICAS"
CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED"
CONTROLLER_MASTER_STILL_EXIST = "CONTROLLER_MASTER_STILL_EXIST"
CONTROLLER_MASTER_NOT_AVAILABLE = "CONTROLLER_MASTER_NOT_AVAILABLE"
CONTROLLER_BROKER_METADATA_NOT_EXIST = "CONTROLLER_BROKER_METADATA_NOT_EXIST"
CONTROLLER_ELECT_MASTER_FAILED = "CONTROLLER_ELECT_MASTER_FAILED"
# ResponseCode.CONTROLLER_NOT_LEADER: this controller does not decide for the group (several
# controllers: its shard has no live owner yet, or was lost mid-request); ask again.
CONTROLLER_NOT_LEADER = "CONTROLLER_NOT_LEADER"
# Not RocketMQ codes: the bounds of this controller, and a store that failed.
CONTROLLER_LIMIT_REACHED = "CONTROLLER_LIMIT_REACHED"
CONTROLLER_BUSY = "CONTROLLER_BUSY"
CONTROLLER_METADATA_NOT_DURABLE = "CONTROLLER_METADATA_NOT_DURABLE"
