"""The master's pure decisions, with contracts CrossHair checks (PEP 316
docstrings: ``pre:``/``post:``; run ``crosshair check --analysis_kind=PEP316
reference.decisions``).  MasterCore calls exactly these functions.

* ``replica_coverage``: up to which offset the ack policy covers waiting
  requests (GroupTransferService's rule).
* ``covered_count``: the ordered-request sweep: how many waiting requests at
  the head of the queue (ordered by nextOffset) one threshold releases.
* ``deadline_status``: the answer when a deadline passes, combined as
  thenCombine does (a replica failure overrides a flush failure).
"""

from __future__ import annotations

from reference.status import PutStatus

INF = float("inf")


def replica_coverage(policy: str, in_sync_replicas: int, push2_slave_max_offset: int,
                     connected_acks: list[int], sync_state_set_acks: list[int], sync_state_set_size: int) -> float:
    """The largest offset the policy covers (INF: nothing to wait for; 0: none, offsets start at 1).

    ``connected_acks``: the ack offset of every connected slave;
    ``sync_state_set_acks``: those of the connected SyncStateSet members (ALL_IN_SYNC).

    pre: policy in ("ANY_REPLICA_MAX", "AT_LEAST_K", "ALL_IN_SYNC")
    pre: all(a >= 0 for a in connected_acks) and all(a >= 0 for a in sync_state_set_acks)
    pre: len(sync_state_set_acks) <= sync_state_set_size
    post: policy != "ANY_REPLICA_MAX" or __return__ == push2_slave_max_offset
    post: policy != "AT_LEAST_K" or __return__ in (0, INF) or sum(1 for a in connected_acks if a >= __return__) >= in_sync_replicas - 1
    post: policy != "AT_LEAST_K" or __return__ == INF or sum(1 for a in connected_acks if a > __return__) < in_sync_replicas - 1
    post: policy != "ALL_IN_SYNC" or all(a >= __return__ for a in sync_state_set_acks)
    post: policy != "ALL_IN_SYNC" or len(sync_state_set_acks) == sync_state_set_size or __return__ == 0
    """
    if policy == "ANY_REPLICA_MAX":
        return push2_slave_max_offset
    if policy == "AT_LEAST_K":
        need = in_sync_replicas - 1
        if need <= 0:
            return INF
        acks = sorted(connected_acks, reverse=True)
        return acks[need - 1] if len(acks) >= need else 0
    if sync_state_set_size == 0:
        return INF
    if len(sync_state_set_acks) < sync_state_set_size:
        return 0                    # a SyncStateSet member is not connected: nothing is covered
    return min(sync_state_set_acks)


def covered_count(next_offsets: list[int], threshold: float) -> int:
    """How many requests at the head of the queue have nextOffset <= threshold
    (the queue is ordered by nextOffset, so one sweep stops at the first
    that is not covered; it reads no further, so MasterCore passes a lazy
    iterable over its queue; the contract is stated on a list).

    pre: threshold == threshold
    pre: all(a <= b for a, b in zip(next_offsets, next_offsets[1:]))
    post: all(x <= threshold for x in next_offsets[:__return__])
    post: __return__ == len(next_offsets) or next_offsets[__return__] > threshold
    """
    n = 0
    for offset in next_offsets:
        if offset > threshold:
            break
        n += 1
    return n


def deadline_status(replica_pending: bool, slaves_connected: bool) -> PutStatus:
    """A deadline passed with a leg still pending: the error answer.

    post: __return__ != PutStatus.PUT_OK
    post: replica_pending == (__return__ in (PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE))
    post: not (replica_pending and not slaves_connected) or __return__ == PutStatus.SLAVE_NOT_AVAILABLE
    post: not (replica_pending and slaves_connected) or __return__ == PutStatus.FLUSH_SLAVE_TIMEOUT
    """
    if replica_pending:
        return PutStatus.FLUSH_SLAVE_TIMEOUT if slaves_connected else PutStatus.SLAVE_NOT_AVAILABLE
    return PutStatus.FLUSH_DISK_TIMEOUT
