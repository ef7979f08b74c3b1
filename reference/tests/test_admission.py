"""The send queue and the processor slots (reference/admission.py), on a virtual clock:
BrokerFastFailure's cleaner answers a request that waited too long within one 10 ms
period (not when a processor finally takes it), BLOCKING holds a slot until the answer,
DECOUPLED only until the append."""

import attrs

from reference.admission import CLEAN_INTERVAL_MS, Admission
from reference.config import StoreConfig
from reference.status import PutStatus

BLOCKING = StoreConfig(ack_mode="BLOCKING", send_message_thread_pool_nums=2, wait_time_in_send_queue_ms=200)


def busy(a: Admission) -> list[int]:
    return [e.req_id for e in a.take_effects() if e.status == PutStatus.OS_PAGE_CACHE_BUSY]


def test_blocking_holds_a_slot_until_the_answer():
    a = Admission(BLOCKING)
    for rid in range(1, 6):
        a.arrive(rid, rid, b"x", now_ms=0)
    started = [a.next_runnable().req_id, a.next_runnable().req_id]
    assert started == [1, 2] and a.next_runnable() is None          # two slots, both held
    a.appended(1)
    assert a.next_runnable() is None                                 # the append frees nothing
    a.answered(1)
    assert a.next_runnable().req_id == 3


def test_decoupled_frees_the_slot_at_the_append():
    a = Admission(attrs.evolve(BLOCKING, ack_mode="DECOUPLED"))
    for rid in range(1, 6):
        a.arrive(rid, rid, b"x", now_ms=0)
    done = []
    while (q := a.next_runnable()) is not None:
        done.append(q.req_id)
        a.appended(q.req_id)
    assert done == [1, 2, 3, 4, 5]


def test_the_cleaner_answers_busy_within_one_period_of_the_limit():
    a = Admission(BLOCKING)
    a.arrive(1, 1, b"x", now_ms=0)
    a.arrive(2, 2, b"x", now_ms=0)
    assert a.next_runnable() and a.next_runnable()                  # both slots held (BLOCKING)
    a.arrive(3, 3, b"x", now_ms=5)
    a.arrive(4, 4, b"x", now_ms=150)
    t = 5
    while not (answered := busy(a)):
        t = a.next_clean_ms(t)
        a.clean(t)
    assert answered == [3] and 205 < t <= 205 + CLEAN_INTERVAL_MS   # within one cleaner period
    assert a.next_runnable() is None and len(a.queue) == 1          # 4 still waits for a slot


def test_a_full_queue_rejects_at_once():
    a = Admission(BLOCKING, capacity=2)
    for rid in range(1, 4):
        a.arrive(rid, rid, b"x", now_ms=0)
    assert busy(a) == [3] and len(a.queue) == 2


def test_a_request_refused_as_busy_is_answered_with_no_offset():
    """Found by `ackorder mutate` (issue 36): an OS_PAGE_CACHE_BUSY answer carrying offset 1 or -1
    passed everything.  A refused message was never appended: its answer names no offset (0)."""
    a = Admission(BLOCKING, capacity=3)
    for rid in range(1, 1 + a.capacity + 2):
        a.arrive(rid, rid, b"x", now_ms=0)
    refused = [e for e in a.take_effects() if e.status == PutStatus.OS_PAGE_CACHE_BUSY]
    assert len(refused) == 2 and all(e.next_offset == 0 for e in refused), refused


def test_the_queues_bounds_are_asserted_at_their_edges():
    """A capacity of one is a queue; none is not.  And time never goes backwards for an arrival,
    checked against the newest request queued, not the oldest."""
    import pytest

    one = Admission(BLOCKING, capacity=1)
    one.arrive(1, 1, b"x", now_ms=0)
    one.arrive(2, 2, b"x", now_ms=0)
    assert busy(one) == [2]
    for capacity in (0, -1):
        with pytest.raises(AssertionError):
            Admission(BLOCKING, capacity=capacity)
    a = Admission(BLOCKING)
    a.arrive(1, 1, b"x", now_ms=5)
    a.arrive(2, 2, b"x", now_ms=10)
    with pytest.raises(AssertionError, match="time went backwards"):
        a.arrive(3, 3, b"x", now_ms=7)


def test_the_cleaner_looks_every_10_ms_as_broker_fast_failures_does():
    """BrokerFastFailure schedules cleanExpiredRequest every 10 ms; with nothing queued it has nothing to look at."""
    a = Admission(BLOCKING)
    assert a.next_clean_ms(1_000) is None
    a.arrive(1, 1, b"x", now_ms=1_000)
    assert a.next_clean_ms(1_000) == 1_010
