"""Admission of producer requests, as a sans-IO state machine: the send queue,
the SendMessageProcessor pool and BrokerFastFailure.

RocketMQ hands every SEND_MESSAGE request to a thread pool of
``send_message_thread_pool_nums`` threads fed by a bounded queue
(sendThreadPoolQueue); BrokerFastFailure's cleaner runs every 10 ms and
answers every request that waited in that queue longer than
``wait_time_in_send_queue_ms`` with a busy status (TIMEOUT_CLEAN_QUEUE), and a
full queue rejects at once.  How long a processor slot is held is the whole
difference between the two ack designs (seed 000):

* BLOCKING (before 4.7): the processor thread waits for the put's answer, so
  a slot is held until the Respond;
* DECOUPLED: the processor returns once the message is appended and the
  flush and transfer services complete the request later, so a slot is held
  only for the append.

The runtime calls ``arrive`` for every PUT frame, ``next_runnable`` for each
request a free slot may start (it then calls MasterCore.put and
``appended``, and asks again), ``answered`` for every final Respond of the core, and
``clean`` on its 10 ms timer; busy answers come out of ``take_effects`` as
Respond effects like the core's.  Rejected here, a request never reaches the
core (the spec never sees it: reference.status.REJECTED_BEFORE_STORE).
"""

from __future__ import annotations

from collections import deque

import attrs

from reference.config import StoreConfig
from reference.effects import Respond
from reference.status import PutStatus

CLEAN_INTERVAL_MS = 10             # BrokerFastFailure's cleaner period


@attrs.define(slots=True)
class Queued:
    req_id: int
    key: int
    body: bytes
    arrived_ms: int


class Admission:
    def __init__(self, cfg: StoreConfig, capacity: int | None = None) -> None:
        capacity = cfg.send_thread_pool_queue_capacity if capacity is None else capacity
        assert capacity > 0
        self.blocking = cfg.ack_mode == "BLOCKING"
        self.slots = cfg.send_message_thread_pool_nums
        self.wait_ms = cfg.wait_time_in_send_queue_ms
        self.capacity = capacity
        self.queue: deque[Queued] = deque()
        self.holding: set[int] = set()      # requests holding a processor slot
        self.effects: list[Respond] = []

    def take_effects(self) -> list[Respond]:
        out, self.effects = self.effects, []
        return out

    def _busy(self, req_id: int) -> None:
        self.effects.append(Respond(req_id, int(PutStatus.OS_PAGE_CACHE_BUSY), 0))

    def arrive(self, req_id: int, key: int, body: bytes, now_ms: int) -> None:
        """A PUT frame was read: it joins the send queue (or is rejected: queue full)."""
        if len(self.queue) >= self.capacity:
            self._busy(req_id)                  # RejectedExecutionException: [OVERLOAD]
            return
        assert not self.queue or self.queue[-1].arrived_ms <= now_ms, "time went backwards"
        self.queue.append(Queued(req_id, key, body, now_ms))

    def next_runnable(self) -> Queued | None:
        """The next request a free processor starts (None: no request, or no free processor);
        it holds its slot until ``appended`` (DECOUPLED) or ``answered`` (BLOCKING)."""
        if not self.queue or len(self.holding) >= self.slots:
            return None
        q = self.queue.popleft()
        self.holding.add(q.req_id)
        return q

    def appended(self, req_id: int) -> None:
        """MasterCore.put returned for this request: a DECOUPLED processor is free again."""
        if not self.blocking:
            self.holding.discard(req_id)

    def answered(self, req_id: int) -> None:
        """The core's final answer for this request: a BLOCKING processor is free again."""
        self.holding.discard(req_id)

    def clean(self, now_ms: int) -> None:
        """BrokerFastFailure.cleanExpiredRequest: busy answers for requests that waited too long."""
        while self.queue and now_ms - self.queue[0].arrived_ms > self.wait_ms:
            self._busy(self.queue.popleft().req_id)

    def next_clean_ms(self, now_ms: int) -> int | None:
        """When the cleaner next has something to look at (None: the queue is empty)."""
        return now_ms + CLEAN_INTERVAL_MS if self.queue else None
