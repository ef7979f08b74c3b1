"""Seeded wrong versions of the contract-checked functions.  Each docstring
names the real function whose contract it must meet; test_contracts.py
writes a copy of this module with those docstrings replaced by the real
contracts (so they are never written twice) and CrossHair must report every
function with a counterexample."""

from __future__ import annotations

import struct

from reference.decisions import INF, covered_count, deadline_status, replica_coverage  # noqa: F401 (INF: contracts)
from reference.frames import decode_frames
from reference.record import HEADER_SIZE, MESSAGE_MAGIC, Record, SegmentScan, scan_segment
from reference.status import PutStatus


def replica_coverage_wrong(policy: str, in_sync_replicas: int, push2_slave_max_offset: int,
                           connected_acks: list[int], sync_state_set_acks: list[int],
                           sync_state_set_size: int) -> float:
    """CONTRACT OF replica_coverage"""
    if policy == "AT_LEAST_K" and connected_acks:
        return max(connected_acks)              # any one slave's ack, whatever inSyncReplicas says
    return replica_coverage(policy, in_sync_replicas, push2_slave_max_offset, connected_acks,
                            sync_state_set_acks, sync_state_set_size)


def covered_count_wrong(next_offsets: list[int], threshold: float) -> int:
    """CONTRACT OF covered_count"""
    return covered_count(next_offsets, threshold - 1)              # "<" where "<=" is meant


def deadline_status_wrong(replica_pending: bool, slaves_connected: bool) -> PutStatus:
    """CONTRACT OF deadline_status"""
    if replica_pending:
        return PutStatus.FLUSH_SLAVE_TIMEOUT                       # forgets SLAVE_NOT_AVAILABLE
    return deadline_status(replica_pending, slaves_connected)


def decode_frames_wrong(data: bytes, max_frame_bytes: int) -> tuple[list, int]:
    """CONTRACT OF decode_frames"""
    frames, _ = decode_frames(data, max_frame_bytes)
    return frames, len(data)             # drops a partial frame instead of waiting for its bytes


def scan_segment_wrong(buf: bytes, base: int, keep_torn: bool = False) -> SegmentScan:
    """CONTRACT OF scan_segment"""
    if len(buf) >= 8:                                               # trusts the length field
        total, magic = struct.unpack_from(">II", buf, 0)
        if magic == MESSAGE_MAGIC and total >= HEADER_SIZE:
            return SegmentScan((Record(base, total, 0, 0),), base + total, False, None)
    return scan_segment(buf, base, keep_torn)

