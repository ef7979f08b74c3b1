"""PutMessageStatus: the answers a producer can get, with RocketMQ's names."""

from __future__ import annotations

import enum


class PutStatus(enum.IntEnum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    MESSAGE_ILLEGAL = 5
    OS_PAGE_CACHE_BUSY = 6         # flow control (SYSTEM_BUSY): send queue full or waited too long; pool deficient
    IN_SYNC_REPLICAS_NOT_ENOUGH = 7
    UNKNOWN_ERROR = 8

    @property
    def stored(self) -> bool:
        """RocketMQ's sendOK: the message is on the master (though maybe not safe)."""
        return self in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT,
                        PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE)


# Rejected before the append: the spec never sees these requests.
REJECTED_BEFORE_STORE = frozenset({
    PutStatus.MESSAGE_ILLEGAL, PutStatus.OS_PAGE_CACHE_BUSY, PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH,
})
