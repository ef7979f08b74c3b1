"""The master broker's store, as a sans-IO state machine.

Events are method calls (``put``, ``tick``, ``fsync_done``, ``fsync_failed``,
``replica_handshake``, ``replica_ack``, ``replica_disconnected``); effects
pile up in ``effects`` for the runtime to perform (reference/effects.py).
Time is an argument, never read from a clock.

The services are RocketMQ's, each a small piece of state inside:

* GroupCommitService (SYNC_FLUSH): ``requests_write`` / ``requests_read``
  swapped per round; one fsync releases every request it covers; a second
  pass when a message rolled into the next segment.
* CommitRealTimeService (transient store pool): copies the write buffer to
  the page cache, by interval and "least pages", woken by puts.
* FlushRealTimeService (ASYNC_FLUSH): periodic flush with wake-up.
* GroupTransferService: every waiting request sits in one queue ordered by
  nextOffset (seed 000's skip list; puts arrive in offset order, so a deque);
  a request completes when nextOffset <= min(flush frontier, replica
  coverage), so one sweep releases every covered request at once.
* FlushDiskWatcher and the slave deadline: a deadline that passes while its
  leg is pending answers with thenCombine's precedence over the legs still
  pending then (a replica failure overrides a flush failure).

``spec_steps`` is ghost state: the spec actions (tla/AckOrder.tla names)
each event performed, for the refinement check in reference/refinement.py.
"""

from __future__ import annotations

from collections import deque

import attrs

from reference.commitlog import CommitLog
from reference.config import StoreConfig
from reference.decisions import INF, covered_count, deadline_status, replica_coverage
from reference.effects import CloseReplica, Fsync, Respond, SendData
from reference.status import PutStatus



@attrs.define(slots=True, eq=False)
class Request:
    req_id: int
    key: int
    next_offset: int
    put_ms: int
    status: PutStatus | None = None
    flush_done_when_answered: bool = False


@attrs.define(slots=True, eq=False)
class Connection:
    """A slave's HA connection: what it acknowledged, where the stream is."""
    ack: int
    next_transfer: int
    ack_records: int = 0      # complete records the slave said it holds (for the spec mapping)


class MasterCore:
    def __init__(self, config: StoreConfig, replicas: tuple[str, ...], now_ms: int,
                 log: CommitLog | None = None) -> None:
        self.cfg = config
        self.replicas = tuple(replicas)
        self.sync_state_set = frozenset(replicas)
        self.log = log or CommitLog(config.mapped_file_size_commit_log, config.transient_store_pool_enable)
        self.writable = True
        self.effects: list = []
        self.spec_steps: list[tuple] = []
        self.requests: dict[int, Request] = {}
        self.waiting: deque[Request] = deque()          # ordered by next_offset
        # GroupCommitService
        self.requests_write: list[Request] = []
        self.requests_read: list[Request] = []
        self.fsync_in_flight: int | None = None
        self.released_upto = self.log.flushed          # group commit released waiters up to here
        self._flush_wakeup = False
        self._last_flush_round_ms = now_ms
        self._last_thorough_flush_ms = now_ms
        # CommitRealTimeService
        self._commit_wakeup = False
        self._last_commit_round_ms = now_ms
        self._last_commit_done_ms = now_ms
        # deadlines, in the order they fall due
        self.flush_deadlines: deque[tuple[int, Request]] = deque()
        self.repl_deadlines: deque[tuple[int, Request]] = deque()
        # HA
        self.conns: dict[str, Connection] = {}
        self.push2SlaveMaxOffset = 0
        self.push2_records = 0    # the same maximum, in records the slaves reported

    # ------------------------------------------------------------------ helpers

    def _emit(self, effect) -> None:
        self.effects.append(effect)

    def take_effects(self) -> list:
        out, self.effects = self.effects, []
        return out

    def _answer(self, req: Request, status: PutStatus, step: str) -> None:
        if req.status is not None and not (self.cfg.bug("BugDoubleResponse") and step == "Timeout"):
            return
        if req.status is None:
            req.flush_done_when_answered = not self.cfg.sync_flush or req.next_offset <= self.released_upto
        req.status = status
        self._emit(Respond(req.req_id, int(status), req.next_offset))
        self.spec_steps.append((step, req.req_id) if step == "Respond" else (step, req.req_id, status.name))

    def flush_frontier(self) -> float:
        """Waiting requests with nextOffset at or below this have their flush leg done."""
        if not self.cfg.sync_flush:
            return INF
        if self.cfg.bug("BugAckOnWrote"):
            return self.log.wrote
        if self.cfg.bug("BugAckOnCommitted"):
            return self.log.committed
        return self.released_upto

    def _policy(self) -> str:
        if self.cfg.bug("BugAnyReplicaForAllInSync") and self.cfg.ack_policy == "ALL_IN_SYNC":
            return "ANY_REPLICA_MAX"
        return self.cfg.ack_policy

    def replica_coverage(self) -> float:
        """Waiting requests with nextOffset at or below this have their replica leg done."""
        if not self.cfg.sync_master:
            return INF
        sss = [self.conns[name].ack for name in sorted(self.sync_state_set) if name in self.conns]
        return replica_coverage(self._policy(), self.cfg.in_sync_replicas, self.push2SlaveMaxOffset,
                                [c.ack for c in self.conns.values()], sss, len(self.sync_state_set))

    def _complete_covered(self) -> None:
        threshold = min(self.flush_frontier(), self.replica_coverage())
        # Answered requests (a deadline or a crash came first) leave the queue in the same sweep.
        released = covered_count((-1 if r.status is not None else r.next_offset for r in self.waiting), threshold)
        for _ in range(released):
            req = self.waiting.popleft()
            if req.status is None:
                self._answer(req, PutStatus.PUT_OK, "Respond")

    # ------------------------------------------------------------------ put path

    def put(self, req_id: int, key: int, body: bytes, now_ms: int) -> None:
        """SendMessageProcessor -> CommitLog.asyncPutMessage (under the put lock)."""
        cfg = self.cfg
        assert req_id not in self.requests, f"duplicate request id {req_id}"
        if not body or len(body) > cfg.max_message_size or not self.log.fits(len(body)):
            self._emit(Respond(req_id, int(PutStatus.MESSAGE_ILLEGAL), 0))
            return
        if (cfg.sync_master and self._policy() == "AT_LEAST_K"
                and 1 + len(self.conns) < cfg.in_sync_replicas):
            self._emit(Respond(req_id, int(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH), 0))
            return
        if not self.writable:
            req = Request(req_id, key, 0, now_ms)
            self.requests[req_id] = req
            req.status = PutStatus.SERVICE_NOT_AVAILABLE
            self._emit(Respond(req_id, int(PutStatus.SERVICE_NOT_AVAILABLE), 0))
            self.spec_steps.append(("Put", req_id))
            return
        _, next_offset = self.log.append(key, body, self.effects)
        req = Request(req_id, key, next_offset, now_ms)
        self.requests[req_id] = req
        self.spec_steps.append(("Put", req_id))
        if not (cfg.sync_flush or cfg.sync_master):
            self._answer(req, PutStatus.PUT_OK, "Respond")
            self._after_append()
            return
        self.waiting.append(req)
        if cfg.sync_flush:
            self.requests_write.append(req)
            self._flush_wakeup = True
            if not cfg.bug("BugNoFlushDiskWatcher"):
                self.flush_deadlines.append((now_ms + cfg.sync_flush_timeout_ms, req))
        if cfg.sync_master and (cfg.ack_mode == "DECOUPLED" or not cfg.sync_flush):
            self._register_replica_leg(req, now_ms)
        self._after_append()
        self._complete_covered()

    def _after_append(self) -> None:
        if self.cfg.transient_store_pool_enable and self.cfg.wake_commit_when_put_message:
            self._commit_wakeup = True
        if not self.cfg.sync_flush and self.cfg.wake_flush_when_put_message:
            self._flush_wakeup = True

    def _register_replica_leg(self, req: Request, now_ms: int) -> None:
        """CommitLog.handleHA: the request joins GroupTransferService."""
        self.repl_deadlines.append((now_ms + self.cfg.slave_timeout_ms, req))
        cfg = self.cfg
        if cfg.commit_on_replica_wait and cfg.transient_store_pool_enable and req.next_offset > self.log.committed:
            self._commit_all(now_ms)   # the fix for seed 001: slaves can only read committed data
        if req.next_offset <= self.replica_coverage():
            return  # fast path: the sweep completes it (seed 000)
        if self._policy() == "ANY_REPLICA_MAX":  # 4.x isSlaveOK
            behind = req.next_offset - self.push2SlaveMaxOffset
            if not self.conns or behind > self.cfg.ha_max_gap_not_in_sync:
                self._fail(req, PutStatus.SLAVE_NOT_AVAILABLE)

    def _fail(self, req: Request, status: PutStatus) -> None:
        """An error answer from a deadline or a fail-fast check (BugTimeoutAsOK: PUT_OK)."""
        self._answer(req, PutStatus.PUT_OK if self.cfg.bug("BugTimeoutAsOK") else status, "Timeout")

    # ------------------------------------------------------------------ services

    def tick(self, now_ms: int) -> None:
        """Run every service that is due at ``now_ms``."""
        self._commit_service(now_ms)
        self._flush_service(now_ms)
        self._deadlines(now_ms)
        self._transfer()
        self._complete_covered()

    def _commit_service(self, now_ms: int) -> None:
        cfg, log = self.cfg, self.log
        if not cfg.transient_store_pool_enable or log.committed >= log.wrote:
            return
        if not self._commit_wakeup and now_ms - self._last_commit_round_ms < cfg.commit_interval_commit_log_ms:
            return
        self._commit_wakeup = False
        self._last_commit_round_ms = now_ms
        thorough = now_ms - self._last_commit_done_ms >= cfg.commit_commit_log_thorough_interval_ms
        least = 0 if thorough else cfg.commit_commit_log_least_pages * cfg.os_page_size
        segment_full = log.wrote >= log.segment_end(log.committed)
        if log.wrote - log.committed < max(least, 1) and not segment_full:
            return
        self._commit_all(now_ms)

    def _commit_all(self, now_ms: int) -> None:
        """MappedFile.commit of everything written: the write buffer to the page cache."""
        log = self.log
        assert self.cfg.transient_store_pool_enable and log.committed < log.wrote
        for _ in range((log.wrote - log.committed) // log.segment_size + 2):   # one segment per MappedFile.commit
            if log.committed >= log.wrote:
                break
            log.commit(self.effects)
            self.spec_steps.append(("Commit", log.records_upto(log.committed)))
        assert log.committed == log.wrote, (log.committed, log.wrote)
        self._last_commit_done_ms = now_ms
        self._flush_wakeup = True

    def _flush_needed(self) -> bool:
        """Some message record in the page cache is not fsync'd yet.  (A segment
        whose only unflushed bytes are padding waits for the record after it.)"""
        log = self.log
        return log.records_upto(log.committed) > log.records_upto(log.flushed)

    def _issue_fsync(self) -> None:
        target = self.log.flush_target()
        if self.cfg.flush_one_message_per_fsync:     # the benchmark's baseline: no batching
            target = min(target, self.log.index.ends[self.log.records_upto(self.log.flushed)])
        assert target > self.log.flushed and self.fsync_in_flight is None
        self.fsync_in_flight = target
        self._emit(Fsync(self.log.segment_start(self.log.flushed), target))

    def _flush_service(self, now_ms: int) -> None:
        cfg, log = self.cfg, self.log
        if self.fsync_in_flight is not None or not self.writable:
            return
        if cfg.sync_flush:  # GroupCommitService.run: waitForRunning(10 ms), then swap and doCommit
            if not self._flush_wakeup and now_ms - self._last_flush_round_ms < cfg.group_commit_interval_ms:
                return
            self._flush_wakeup = False
            self._last_flush_round_ms = now_ms
            self.requests_read.extend(self.requests_write)   # onWaitEnd: swap requests
            self.requests_write.clear()
            self._release_read(now_ms)                      # doCommit: some are flushed already
            if self.requests_read and self._flush_needed():
                self._issue_fsync()
            return
        # FlushRealTimeService
        if not self._flush_wakeup and now_ms - self._last_flush_round_ms < cfg.flush_interval_commit_log_ms:
            return
        self._flush_wakeup = False
        self._last_flush_round_ms = now_ms
        thorough = now_ms - self._last_thorough_flush_ms >= cfg.flush_commit_log_thorough_interval_ms
        least = 0 if thorough else cfg.flush_commit_log_least_pages * cfg.os_page_size
        dirty = log.committed - log.flushed
        if self._flush_needed() and (dirty >= least or log.committed >= log.segment_end(log.flushed)):
            if thorough:
                self._last_thorough_flush_ms = now_ms
            self._issue_fsync()

    def fsync_done(self, start: int, upto: int, now_ms: int) -> None:
        """The runtime finished the fsync issued for ``upto``."""
        assert self.fsync_in_flight == upto, (self.fsync_in_flight, upto)
        self.fsync_in_flight = None
        self._flushed(upto, now_ms)

    def _release_bound(self, upto: int, advanced: bool) -> int:
        """Group commit releases waiters up to the flushed offset (the buggy
        variant: up to everything committed, whenever a record was flushed)."""
        if self.cfg.bug("BugFlushOneFileReleasesAll") and advanced:
            return self.log.committed
        return upto

    def _flushed(self, upto: int, now_ms: int, step: str = "Flush") -> None:
        """flushedWhere moved to ``upto``: release the waiters it covers."""
        before = self.log.records_upto(self.log.flushed)
        self.log.flushed = max(self.log.flushed, upto)
        after = self.log.records_upto(self.log.flushed)
        if step == "Flush" or after > before:   # a buggy failure that hid only padding is no spec step
            self.spec_steps.append((step, after))
        self.released_upto = max(self.released_upto, self._release_bound(upto, after > before))
        if self.cfg.sync_flush:
            self._release_read(now_ms)
            if self.requests_read and self._flush_needed():
                self._issue_fsync()    # "flush up to twice": the message rolled into the next segment
        self._complete_covered()

    def _release_read(self, now_ms: int) -> None:
        """Complete the flush futures of the round's requests that are flushed."""
        released = [r for r in self.requests_read if r.next_offset <= self.released_upto]
        if not released:
            return
        self.requests_read = [r for r in self.requests_read if r.next_offset > self.released_upto]
        if self.cfg.sync_master and self.cfg.ack_mode == "BLOCKING":
            for req in released:   # 4.x: handleHA only after handleDiskFlush returned
                if req.status is None:
                    self._register_replica_leg(req, now_ms)

    def fsync_failed(self, start: int, upto: int, now_ms: int) -> None:
        """fsync raised (EIO, ENOSPC): never PUT_OK on it (RocketMQ #9713)."""
        assert self.fsync_in_flight == upto, (self.fsync_in_flight, upto)
        self.fsync_in_flight = None
        if self.cfg.bug("BugFlushIgnoresFsyncError"):
            self._flushed(upto, now_ms, step="FlushFail")   # B1: flushedPosition advanced anyway
            return
        self.writable = False         # RunningFlags.makeNotWriteable
        self.spec_steps.append(("FlushFail", None))

    def storage_failed(self) -> None:
        """A page-cache write failed (ENOSPC...): stop accepting writes, like a failed fsync."""
        self.writable = False

    def _deadlines(self, now_ms: int) -> None:
        cfg = self.cfg
        while self.flush_deadlines and self.flush_deadlines[0][0] <= now_ms:
            _, req = self.flush_deadlines.popleft()
            if req.status is None and req.next_offset > self.flush_frontier():
                pending_replica = req.next_offset > self.replica_coverage()
                self._fail(req, deadline_status(pending_replica, bool(self.conns)))
            elif req.status is PutStatus.PUT_OK and cfg.bug("BugDoubleResponse"):
                pending_replica = req.next_offset > self.replica_coverage()
                self._answer(req, deadline_status(pending_replica, bool(self.conns)),
                             "Timeout")
        while self.repl_deadlines and self.repl_deadlines[0][0] <= now_ms:
            _, req = self.repl_deadlines.popleft()
            if req.status is None and req.next_offset > self.replica_coverage():
                self._fail(req, deadline_status(True, bool(self.conns)))

    def next_wakeup_ms(self, now_ms: int) -> int:
        """When ``tick`` next has something to do (the runtime may tick earlier)."""
        cfg, log = self.cfg, self.log
        due = [now_ms + 1000]
        if cfg.transient_store_pool_enable and log.committed < log.wrote:
            due.append(now_ms if self._commit_wakeup else self._last_commit_round_ms + cfg.commit_interval_commit_log_ms)
        if self.fsync_in_flight is None and self.writable and log.committed > log.flushed:
            interval = cfg.group_commit_interval_ms if cfg.sync_flush else cfg.flush_interval_commit_log_ms
            due.append(now_ms if self._flush_wakeup else self._last_flush_round_ms + interval)
        if self.flush_deadlines:
            due.append(self.flush_deadlines[0][0])
        if self.repl_deadlines:
            due.append(self.repl_deadlines[0][0])
        return max(now_ms, min(due))

    # ------------------------------------------------------------------ HA

    def _transfer_limit(self) -> int:
        return self.log.wrote if self.cfg.bug("BugTransferBeyondCommitted") else self.log.committed

    def _transfer(self) -> None:
        """HAConnection.WriteSocketService: stream committed data, batch by batch."""
        limit = self._transfer_limit()
        cfg, log = self.cfg, self.log
        for name, conn in self.conns.items():
            while conn.next_transfer < limit and conn.next_transfer - conn.ack < cfg.ha_send_window_bytes:
                start = conn.next_transfer
                end = min(limit, log.segment_end(start), start + cfg.ha_transfer_batch_size)
                self._emit(SendData(name, start, log.data(start, end)))
                conn.next_transfer = end

    def _handshake_refusal(self, offset: int, chain: bytes, records: int) -> str | None:
        if self.cfg.bug("BugAcceptAckBeyondLog"):
            return None
        if self.cfg.bug("BugHandshakeOffsetOnly"):   # position only, no content check (4.9.x, B22)
            committed = self.log.records_upto(self.log.committed)
            return None if records <= committed else f"slave holds {records} records, master {committed}"
        if offset > self.log.committed:
            return f"slave offset {offset} is beyond the master's log ({self.log.committed})"
        if self.log.index.chain.get(offset) != chain:
            return f"slave log up to {offset} differs from the master's (another master incarnation)"
        return None

    def replica_handshake(self, name: str, offset: int, chain: bytes, now_ms: int, records: int = 0) -> None:
        """A slave connected and reported its max offset and the chain hash there."""
        if name not in self.replicas:
            self._emit(CloseReplica(name, f"unknown slave {name!r}"))
            return
        if name in self.conns:
            self._emit(CloseReplica(name, f"slave {name} is already connected"))
            return
        if (reason := self._handshake_refusal(offset, chain, records)) is not None:
            self._emit(CloseReplica(name, reason))
            return
        self.conns[name] = Connection(ack=offset, next_transfer=offset, ack_records=records)
        self.push2SlaveMaxOffset = max(self.push2SlaveMaxOffset, offset)
        self.push2_records = max(self.push2_records, records)
        self.spec_steps.append(("ReplicaConnect", name))
        self._transfer()
        self._complete_covered()

    def replica_ack(self, name: str, offset: int, now_ms: int, records: int = 0) -> None:
        """HAConnection.ReadSocketService: a slave reported the offset it holds
        (and how many records that is).  A report beyond the master's log
        closes the connection (PR #3016; bug B3 without the check)."""
        conn = self.conns.get(name)
        if conn is None:
            return  # a report that crossed a closing connection
        log = self.log
        beyond = records > log.records_upto(log.committed) or offset > log.wrote
        if beyond and not self.cfg.bug("BugAcceptAckBeyondLog"):
            del self.conns[name]
            self.spec_steps.append(("ReplicaAck", name, records))
            self._emit(CloseReplica(name, f"ack {offset} ({records} records) beyond the master's log "
                                          f"({log.committed})"))
            return
        if offset <= conn.ack:
            return
        conn.ack, conn.ack_records = offset, records
        self.push2SlaveMaxOffset = max(self.push2SlaveMaxOffset, offset)
        self.push2_records = max(self.push2_records, records)
        self.spec_steps.append(("ReplicaAck", name, records))
        self._transfer()
        self._complete_covered()

    def replica_disconnected(self, name: str) -> None:
        """The connection is gone (network, slave crash, or our CloseReplica)."""
        self.conns.pop(name, None)
