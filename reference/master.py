"""The master broker's store, as a sans-IO state machine.

Events are method calls (``put``, ``tick``, ``write_done``, ``write_failed``,
``fsync_done``, ``fsync_failed``, ``replica_handshake``, ``replica_ack``,
``replica_bad_input``, ``replica_disconnected``); effects pile up in
``effects`` for the runtime to perform in order (reference/effects.py).  Time
is an argument, never read from a clock.

The services are RocketMQ's, each a small piece of state inside:

* The append (CommitLog.asyncPutMessage): a put lands in memory and is handed
  to the page cache (WriteData); only the runtime's ``write_done`` makes it
  committed, so a write that fails (EIO, ENOSPC, a short count) is never
  flushed, shipped or acknowledged: its producer gets UNKNOWN_ERROR, later
  requests of the same batch SERVICE_NOT_AVAILABLE, and the store turns
  read-only (RunningFlags.makeNotWriteable).
* GroupCommitService (SYNC_FLUSH): ``requests_write`` / ``requests_read``
  swapped per round; one fsync releases every request it covers; a second
  pass when a message rolled into the next segment.
* CommitRealTimeService (transient store pool): copies the write buffer to
  the page cache, by interval and "least pages", woken by puts; a failed
  commit is retried from the committed position.
* FlushRealTimeService (ASYNC_FLUSH): periodic flush with wake-up.
* GroupTransferService: every waiting request sits in one queue ordered by
  nextOffset (seed 000's skip list; puts arrive in offset order, so a deque);
  a request completes when nextOffset <= min(flush frontier, replica
  coverage), so one sweep releases every covered request at once.
* FlushDiskWatcher and the slave deadline: a deadline that passes while its
  leg is pending answers with thenCombine's precedence over the legs still
  pending then (a replica failure overrides a flush failure).
* The HA service: connections are named by the runtime's connection id, so a
  refused second connection under a slave's name never touches the first;
  every report is checked against what the transfer may ship (committed
  data) and against the master's own record count at that offset.

Memory is bounded (it never grows with the log): answered requests are
forgotten, and the log keeps in memory only the segments from the one
holding the oldest of the flushed offset and the in-sync slaves' acks
(``_retain``).  What a slave needs below that (data to ship, or the index
to check its handshake or ack against) is read back from the segment file:
the core emits ReadSegment, parks that connection's events (in order) until
``segment_read`` brings the segment, and keeps a few such segments cached.

``spec_steps`` and ``request_log`` are ghost state for observers (the
simulator's refinement check); a runtime that has none sets them to
``DISCARD`` and None.

``spec_steps`` is ghost state: the spec actions (tla/AckOrder.tla names)
each event performed, for the refinement check in reference/refinement.py.
"""

from __future__ import annotations

from collections import OrderedDict, deque

import attrs

from reference.commitlog import CommitLog, LogIndex
from reference.config import StoreConfig
from reference.decisions import INF, covered_count, deadline_status, replica_coverage
from reference.effects import CloseReplica, Fsync, ReadSegment, Respond, SendData, SendEpochs, WriteData
from reference.failover.epochfile import EpochFileCache
from reference.status import PutStatus

MAX_WRITES_IN_FLIGHT = 1 << 16     # WriteData effects awaiting write_done / write_failed
RETAINED_SEGMENTS_BEHIND = 2       # segments kept behind committed's for slow in-sync slaves


class DiscardSteps(list):
    """A ``spec_steps`` that records nothing (a runtime with no refinement check)."""

    def append(self, item) -> None:
        pass


DISCARD = DiscardSteps()


@attrs.define(slots=True, eq=False)
class Request:
    req_id: int
    key: int
    next_offset: int
    put_ms: int
    status: PutStatus | None = None
    flush_done_when_answered: bool = False
    flush_deadline_pending: bool = False   # in flush_deadlines (BugDoubleResponse may answer again)


@attrs.define(slots=True, eq=False)
class HaConnection:
    """A slave's accepted HA connection: what it acknowledged, where the stream is."""
    conn: int                  # the runtime's connection id
    ack_offset: int
    next_transfer: int
    ack_records: int           # complete records the slave said it holds (for the spec mapping)
    # Housekeeping: since when the slave owes an ack: its last ack of something new, or the moment
    # data went in flight to it while it had acknowledged everything sent (an idle slave's
    # heartbeats repeat its last report and move nothing, so they cannot be the clock).
    ack_owed_since_ms: int
    cursor_epoch: int          # failover: 0, or the epoch its labels are fixed to (roles.cursor_epoch_at_connect)


@attrs.define(slots=True)
class WriteInFlight:
    """A WriteData handed to the runtime, awaiting its result."""
    offset: int
    end: int
    stale: bool = False        # issued after a write that failed: its bytes follow a hole


MAX_REPLICAS = 64           # slaves a master ever takes (change_sync_state_set only adds them)


class MasterCore:
    def __init__(self, config: StoreConfig, replicas: tuple[str, ...], now_ms: int,
                 log: CommitLog | None = None) -> None:
        self.cfg = config
        self.replicas = tuple(replicas)
        self.sync_state_set = frozenset(replicas)
        self._sss_sorted: tuple = (None, ())
        self.log = log or CommitLog(config.mapped_file_size_commit_log, config.transient_store_pool_enable)
        self.writable = True
        self.effects: list = []
        self.spec_steps: list[tuple] = []
        self.requests: dict[int, Request] = {}          # the unanswered ones
        self.request_log: dict[int, Request] | None = None   # ghost: every request, for observers
        self.unconfirmed: deque[Request] = deque()      # appended, page-cache write not yet confirmed
        self.writes: deque[WriteInFlight] = deque()
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
        self.conns: dict[str, HaConnection] = {}        # slave name -> its accepted connection
        self.ungreeted: dict[int, int] = {}             # connection id -> when it opened (no HANDSHAKE yet)
        self.connecting: dict[str, int] = {}            # slave name -> a connection whose handshake waits
        self.push2SlaveMaxOffset = 0
        self.push2_records = 0
        self.acked_upto = 0       # the largest nextOffset answered PUT_OK (a member joins the SSS above it)
        # failover (begin_epoch): computeConfirmOffset's value, over the SyncStateSet the node pushes
        # (roles.confirm_with, the spec's ConfirmWith); None outside failover: the largest PUT_OK
        self.confirm: int | None = None
        self.confirm_committed: frozenset[str] = frozenset()   # the controller's SSS, less this master
        self.confirm_view: frozenset[str] = frozenset()        # SSSView: that and a proposal in flight
        self.failover_bugs: frozenset[str] = frozenset()
        self.epochs = EpochFileCache()                  # failover: the epoch entries (none: epoch 0 from 0)
        self.epoch_queried: set[int] = set()            # connections that asked for them (once each)
        # segments read back for slaves that lag: start -> (index, bytes), least recently used first
        self._old: OrderedDict[int, tuple[LogIndex, bytes]] = OrderedDict()
        self._old_capacity = max(2, len(self.replicas) + 1)
        self._reads: set[int] = set()                   # ReadSegment effects awaiting their answer
        self._parked: dict[int, deque[tuple]] = {}      # connection -> its HA events waiting for a read
        # the configuration is frozen: its switches, read once
        self._ack_on_wrote = config.bug("BugAckOnWrote")
        self._ack_on_committed = config.bug("BugAckOnCommitted")
        self._policy_name = ("ANY_REPLICA_MAX" if config.bug("BugAnyReplicaForAllInSync")
                             and config.ack_policy == "ALL_IN_SYNC" else config.ack_policy)
        self._sweep_deferred = False     # inside writes_done: one sweep at the end
        # Read on every event: the frozen configuration's derived flags, looked up once.
        self._sync_flush, self._sync_master = config.sync_flush, config.sync_master
        self._pool, self._bugs = config.transient_store_pool_enable, config.bugs

    # ------------------------------------------------------------------ helpers

    def _emit(self, effect) -> None:
        self.effects.append(effect)

    def _emit_writes(self, effects: list) -> None:
        for e in effects:
            if isinstance(e, WriteData):
                # An invariant, not a bound on input: every runtime answers a turn's writes within
                # that turn, a turn starts at most PUTS_PER_TURN puts (admission holds the rest),
                # and a commit writes one run per pool buffer (put refuses past the pool's size).
                assert len(self.writes) < MAX_WRITES_IN_FLIGHT, "more writes in flight than a turn makes"
                assert not self.writes or self.writes[-1].end == e.offset, "writes must be contiguous"
                self.writes.append(WriteInFlight(e.offset, e.end))
            self._emit(e)

    def take_effects(self) -> list:
        out, self.effects = self.effects, []
        return out

    def check_invariants(self) -> None:
        """TigerStyle: the watermarks and queues are in order after every event (O(1)).  What
        the spec's properties say (push2SlaveMaxOffset <= committed...) is left to the
        refinement check, which names the property a bug breaks."""
        log, bug = self.log, self.cfg.bug
        assert 0 <= log.flushed <= log.committed <= log.issued <= log.wrote, \
            (log.flushed, log.committed, log.issued, log.wrote)
        assert self.fsync_in_flight is None or log.flushed < self.fsync_in_flight <= log.committed
        assert self.released_upto <= (log.committed if bug("BugFlushOneFileReleasesAll") else log.flushed)
        assert not self.waiting or self.waiting[0].next_offset <= self.waiting[-1].next_offset
        assert not self.unconfirmed or self.writable, "puts are only appended while writable"
        assert not self.writes or self.writes[0].offset >= log.committed, "a write in flight below committed"
        # What the HA port's peers feed stays within its bounds (the core closes, never grows past them).
        assert len(self.ungreeted) <= self.cfg.ha_max_ungreeted_connections, "ungreeted connections past the bound"
        assert self.epoch_queried <= self.ungreeted.keys(), "an epoch query outlived its connection's greeting"
        assert not self._pool or log.pool_buffers_in_use() <= self.cfg.transient_store_pool_size, \
            "pool buffers past transient_store_pool_size"
        assert all(len(p) <= self.cfg.ha_max_parked_events for p in self._parked.values()), "parked frames past the bound"

    def _answer(self, req: Request, status: PutStatus, step: str) -> None:
        double = "BugDoubleResponse" in self._bugs
        if req.status is not None and not (double and step == "Timeout"):
            return
        if req.status is None:
            req.flush_done_when_answered = self.flush_leg_done(req)
        req.status = status
        if status is PutStatus.PUT_OK:
            self.acked_upto = max(self.acked_upto, req.next_offset)
        self.requests.pop(req.req_id, None)
        # The double-response switch is decided here, not in a runtime: under the bug a PUT_OK
        # whose flush deadline is still queued gets a second answer when that deadline passes.
        final = not (double and status is PutStatus.PUT_OK and req.flush_deadline_pending)
        self._emit(Respond(req.req_id, int(status), req.next_offset, final))
        self.spec_steps.append((step, req.req_id) if step == "Respond" else (step, req.req_id, status.name))

    def _reject(self, req: Request, status: PutStatus, step: str) -> None:
        """Answer a request whose record never reached the log (spec: a rejected Put, or WriteFail)."""
        req.status, req.next_offset = status, 0
        self.requests.pop(req.req_id, None)
        self._emit(Respond(req.req_id, int(status), 0))
        self.spec_steps.append((step, req.req_id))

    def flush_leg_done(self, req: Request) -> bool:
        """The request's flush future is complete (group commit released it; always under ASYNC_FLUSH)."""
        return not self._sync_flush or req.next_offset <= self.released_upto

    def flush_frontier(self) -> float:
        """Waiting requests with nextOffset at or below this have their flush leg done."""
        if not self._sync_flush:
            return INF
        if self._ack_on_wrote:
            return self.log.wrote
        if self._ack_on_committed:
            return self.log.committed
        return self.released_upto

    def _policy(self) -> str:
        return self._policy_name

    def replica_coverage(self) -> float:
        """Waiting requests with nextOffset at or below this have their replica leg done."""
        if not self._sync_master:
            return INF
        policy = self._policy_name
        if policy == "ANY_REPLICA_MAX":      # the decision reads neither list: do not build them per call
            return replica_coverage(policy, self.cfg.in_sync_replicas, self.push2SlaveMaxOffset, [], [],
                                    len(self.sync_state_set))
        conns = self.conns
        if policy == "AT_LEAST_K":           # it reads the connected slaves' acks, not the SyncStateSet's
            return replica_coverage(policy, self.cfg.in_sync_replicas, self.push2SlaveMaxOffset,
                                    [c.ack_offset for c in conns.values()], [], len(self.sync_state_set))
        if self._sss_sorted[0] is not self.sync_state_set:      # sorted once per SyncStateSet, not per call
            self._sss_sorted = (self.sync_state_set, tuple(sorted(self.sync_state_set)))
        sss = [conns[name].ack_offset for name in self._sss_sorted[1] if name in conns]
        return replica_coverage(policy, self.cfg.in_sync_replicas, self.push2SlaveMaxOffset,    # ALL_IN_SYNC:
                                [], sss, len(self.sync_state_set))        # the SyncStateSet's acks only

    def _complete_covered(self) -> None:
        if not self.waiting:
            return
        if self._sweep_deferred:
            return
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
        size = len(body)
        if self._pool and self._pool_deficient():
            self._emit(Respond(req_id, int(PutStatus.OS_PAGE_CACHE_BUSY), 0))
            return
        if not size or size > cfg.max_message_size or not self.log.fits(size):
            self._emit(Respond(req_id, int(PutStatus.MESSAGE_ILLEGAL), 0))
            return
        if (self._sync_master and self._policy() == "AT_LEAST_K"
                and 1 + len(self.conns) < cfg.in_sync_replicas):
            self._emit(Respond(req_id, int(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH), 0))
            return
        req = Request(req_id, key, 0, now_ms)
        self.requests[req_id] = req
        if self.request_log is not None:
            self.request_log[req_id] = req
        if not self.writable:
            self._reject(req, PutStatus.SERVICE_NOT_AVAILABLE, "Put")
            return
        req.next_offset, effects = self.log.append(key, body)
        self._emit_writes(effects)
        if self._pool:
            self._appended(req, now_ms)        # the write buffer is memory: the append cannot fail
        else:
            self.unconfirmed.append(req)       # continues in write_done (or write_failed)

    def _pool_deficient(self) -> bool:
        """TransientStorePool has no buffer left (SendMessageProcessor.rejectRequest answers
        SYSTEM_BUSY): the puts wait for the commits that return buffers, the memory stays bounded."""
        return self.log.pool_buffers_in_use() >= self.cfg.transient_store_pool_size

    def _appended(self, req: Request, now_ms: int, step: tuple | None = None) -> None:
        """The record is in the log (page cache, or the pool's write buffer): the request waits for its legs."""
        cfg = self.cfg
        self.spec_steps.append(step or ("Put", req.req_id))
        if not (self._sync_flush or self._sync_master):
            self._answer(req, PutStatus.PUT_OK, "Respond")
            self._after_append()
            return
        assert not self.waiting or self.waiting[-1].next_offset <= req.next_offset
        self.waiting.append(req)
        if self._sync_flush:
            self.requests_write.append(req)
            self._flush_wakeup = True
            if "BugNoFlushDiskWatcher" not in self._bugs:
                self.flush_deadlines.append((req.put_ms + cfg.sync_flush_timeout_ms, req))
                req.flush_deadline_pending = True
        if self._sync_master and (cfg.ack_mode == "DECOUPLED" or not self._sync_flush):
            self._register_replica_leg(req, now_ms)
        self._after_append()
        self._complete_covered()

    def _after_append(self) -> None:
        if self._pool and self.cfg.wake_commit_when_put_message:
            self._commit_wakeup = True
        if not self._sync_flush and self.cfg.wake_flush_when_put_message:
            self._flush_wakeup = True

    def _register_replica_leg(self, req: Request, now_ms: int) -> None:
        """CommitLog.handleHA: the request joins GroupTransferService."""
        self.repl_deadlines.append((now_ms + self.cfg.slave_timeout_ms, req))
        cfg = self.cfg
        if (cfg.commit_on_replica_wait and self._pool and self.writable
                and req.next_offset > self.log.issued):
            self._commit_all(now_ms)   # the fix for seed 001: slaves can only read committed data
        if req.next_offset <= self.replica_coverage():
            return  # fast path: the sweep completes it (seed 000)
        if self._policy() == "ANY_REPLICA_MAX":  # 4.x isSlaveOK
            behind = req.next_offset - self.push2SlaveMaxOffset
            if not self.conns or behind > self.cfg.ha_max_gap_not_in_sync:
                flush_pending = req.next_offset > self.flush_frontier()
                swapped = flush_pending and "BugFlushTimeoutHidesSlaveTimeout" in self._bugs
                self._fail(req, PutStatus.FLUSH_DISK_TIMEOUT if swapped else PutStatus.SLAVE_NOT_AVAILABLE)

    def _fail(self, req: Request, status: PutStatus) -> None:
        """An error answer from a deadline or a fail-fast check (BugTimeoutAsOK: PUT_OK)."""
        self._answer(req, PutStatus.PUT_OK if "BugTimeoutAsOK" in self._bugs else status, "Timeout")

    # ------------------------------------------------------------------ page-cache writes

    def _pop_write(self, offset: int, end: int) -> WriteInFlight:
        assert self.writes, f"a write result for [{offset}, {end}) with no write in flight"
        w = self.writes.popleft()
        assert (w.offset, w.end) == (offset, end), f"write results out of order: {(offset, end)} for {w}"
        return w

    def write_cancelled(self, start: int, position: int, length: int) -> bool:
        """Whether the runtime must not perform this WriteData, the next one in flight: it was
        issued before a write that failed, and follows the hole that write left (its record was
        forgotten and its producer answered, or the pool's write buffer issues it again).  Its
        bytes must never reach the page cache, where a restart would find a record no producer
        was told is stored.  The runtime reports it with ``write_failed(..., 0)``, writing nothing."""
        assert self.writes, f"a write [{start + position}, {start + position + length}) with no write in flight"
        w = self.writes[0]
        assert (w.offset, w.end) == (start + position, start + position + length), \
            f"writes performed out of order: {(start + position, start + position + length)} for {w}"
        return w.stale

    def write_done(self, start: int, position: int, length: int, now_ms: int) -> None:
        """The runtime wrote one WriteData into the page cache."""
        self.writes_done([(start, position, length)], now_ms)

    def writes_done(self, writes: list[tuple[int, int, int]], now_ms: int) -> None:
        """The runtime wrote these WriteData (start, position, length), in order, into the page
        cache (one pwrite for a batch): the same as one write_done each, with one transfer and
        one sweep of the waiting requests at the end instead of one per write."""
        end = None
        for start, position, length in writes:
            w = self._pop_write(start + position, start + position + length)
            if not w.stale:
                end = w.end
        if end is None:
            return
        self._sweep_deferred = True
        try:
            self._confirm(end, now_ms)
        finally:
            self._sweep_deferred = False
        self._transfer(now_ms)
        self._complete_covered()

    def write_failed(self, start: int, position: int, length: int, written: int, now_ms: int) -> None:
        """A WriteData failed after ``written`` of its bytes (EIO, ENOSPC, a short write)."""
        assert 0 <= written < length, (written, length)
        w = self._pop_write(start + position, start + position + length)
        if w.stale:
            return
        for later in self.writes:              # they follow a hole: never count them
            later.stale = True
        self._confirm(max(self.log.committed, self.log.index.boundary_at_or_below(w.offset + written)), now_ms)
        self.writable = False                  # RunningFlags.makeNotWriteable
        if self._pool:
            self._commit_failed(w)
        else:
            self._put_write_failed(w, now_ms)
        self._transfer(now_ms)
        self._complete_covered()

    def _confirm(self, upto: int, now_ms: int) -> None:
        """Bytes below ``upto`` are in the page cache."""
        log = self.log
        if upto <= log.committed:
            return
        log.confirm(upto)
        self._recompute_confirm(None)
        if self._pool:
            self.spec_steps.append(("Commit", log.records_upto(log.committed)))
            self._last_commit_done_ms = now_ms
            self._flush_wakeup = True
            return
        while self.unconfirmed and self.unconfirmed[0].next_offset <= log.committed:
            self._appended(self.unconfirmed.popleft(), now_ms)

    def _put_write_failed(self, w: WriteInFlight, now_ms: int) -> None:
        """Without the pool: the put whose record was being written fails (its record stays
        in memory, never counted: part or all of it may be in the page cache), and so does
        every put appended after it, forgotten (they sit behind a hole)."""
        log = self.log
        failed = self.unconfirmed.popleft()
        if "BugFsyncCoversFailedWrite" in self._bugs:   # kept as written: the fsync will cover it
            log.confirm(failed.next_offset)
            self._appended(failed, now_ms, step=("WriteFail", failed.req_id, None))
        else:
            failed.status = PutStatus.UNKNOWN_ERROR
            self.requests.pop(failed.req_id, None)
            self._emit(Respond(failed.req_id, int(PutStatus.UNKNOWN_ERROR), failed.next_offset))
            self.spec_steps.append(("WriteFail", failed.req_id, None))
        if self.unconfirmed:
            while self.unconfirmed:
                self._reject(self.unconfirmed.popleft(), PutStatus.SERVICE_NOT_AVAILABLE, "Put")
            log.truncate(failed.next_offset)

    def _commit_failed(self, w: WriteInFlight) -> None:
        """With the pool: the write buffer keeps the data; a later commit retries from committed."""
        log = self.log
        if "BugFsyncCoversFailedWrite" in self._bugs:      # the failed range counted as committed
            log.confirm(w.end)
            self.spec_steps.append(("WriteFail", None, log.records_upto(log.committed)))
            self._flush_wakeup = True
            return
        self.spec_steps.append(("WriteFail", None, None))
        log.reissue_from_committed()

    # ------------------------------------------------------------------ services

    def tick(self, now_ms: int) -> None:
        """Run every service that is due at ``now_ms``."""
        self._commit_service(now_ms)
        self._flush_service(now_ms)
        self._deadlines(now_ms)
        self._housekeeping(now_ms)
        self._transfer(now_ms)
        self._complete_covered()
        self._retain()

    def _housekeeping(self, now_ms: int) -> None:
        """HAConnection: close a connection that never greets, or that acknowledges none of
        the data in flight to it (ReadSocketService's haHousekeepingInterval)."""
        limit = self.cfg.ha_housekeeping_interval_ms
        for conn, opened_ms in list(self.ungreeted.items()):
            if now_ms - opened_ms >= limit:
                del self.ungreeted[conn]
                self.epoch_queried.discard(conn)
                self._emit(CloseReplica(conn, f"no HANDSHAKE in {now_ms - opened_ms} ms",
                                        bound="ha_housekeeping_interval_ms"))
        for name, hc in list(self.conns.items()):
            if hc.next_transfer > hc.ack_offset and now_ms - hc.ack_owed_since_ms >= limit:
                self._drop(name, f"slave {name} acknowledged nothing for {now_ms - hc.ack_owed_since_ms} ms "
                                 f"with {hc.next_transfer - hc.ack_offset} bytes in flight")

    def _commit_service(self, now_ms: int) -> None:
        cfg, log = self.cfg, self.log
        if not self._pool or log.issued >= log.wrote or self.writes:
            return
        if not self._commit_wakeup and now_ms - self._last_commit_round_ms < cfg.commit_interval_commit_log_ms:
            return
        self._commit_wakeup = False
        self._last_commit_round_ms = now_ms
        thorough = now_ms - self._last_commit_done_ms >= cfg.commit_commit_log_thorough_interval_ms
        least = 0 if thorough else cfg.commit_commit_log_least_pages * cfg.os_page_size
        segment_full = log.wrote >= log.segment_end(log.issued)
        if log.wrote - log.issued < max(least, 1) and not segment_full:
            return
        self._commit_all(now_ms)

    def _commit_all(self, now_ms: int) -> None:
        """MappedFile.commit of everything written: the write buffer to the page cache."""
        log = self.log
        assert self._pool and log.issued < log.wrote
        for _ in range((log.wrote - log.issued) // log.segment_size + 2):   # one segment per MappedFile.commit
            if (write := log.commit()) is None:
                break
            self._emit_writes([write])
        assert log.issued == log.wrote, (log.issued, log.wrote)

    def _flush_allowed(self) -> bool:
        """No fsync once the store is read-only (BugFsyncCoversFailedWrite: the flush path
        does not look at the flag, so the follow-up fsync after a failed write runs)."""
        return self.writable or "BugFsyncCoversFailedWrite" in self._bugs

    def _flush_needed(self) -> bool:
        """Some message record in the page cache is not fsync'd yet.  (A segment
        whose only unflushed bytes are padding waits for the record after it.)"""
        log = self.log
        return log.records_upto(log.committed) > log.records_upto(log.flushed)

    def _issue_fsync(self) -> None:
        target = self.log.flush_target()
        if self.cfg.flush_one_message_per_fsync:     # the benchmark's baseline: no batching
            target = min(target, self.log.index.end_after(self.log.records_upto(self.log.flushed) + 1))
        assert target > self.log.flushed and self.fsync_in_flight is None and self._flush_allowed()
        self.fsync_in_flight = target
        self._emit(Fsync(self.log.segment_start(self.log.flushed), target))

    def _flush_service(self, now_ms: int) -> None:
        cfg, log = self.cfg, self.log
        if self.fsync_in_flight is not None or not self._flush_allowed():
            return
        if self._sync_flush:  # GroupCommitService.run: waitForRunning(10 ms), then swap and doCommit
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
        """The runtime finished the fsync issued for ``upto``.  A store that turned
        read-only while it ran (a write failed) does not count it: nothing is
        vouched for on a failing disk."""
        assert self.fsync_in_flight == upto, (self.fsync_in_flight, upto)
        self.fsync_in_flight = None
        if self._flush_allowed():
            self._flushed(upto, now_ms)

    def _release_bound(self, upto: int, advanced: bool) -> int:
        """Group commit releases waiters up to the flushed offset (the buggy
        variant: up to everything committed, whenever a record was flushed)."""
        if "BugFlushOneFileReleasesAll" in self._bugs and advanced:
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
        if self._sync_flush:
            self._release_read(now_ms)
            if self.requests_read and self._flush_needed() and self._flush_allowed():
                self._issue_fsync()    # "flush up to twice": the message rolled into the next segment
        self._complete_covered()
        self._retain()

    def _release_read(self, now_ms: int) -> None:
        """Complete the flush futures of the round's requests that are flushed."""
        released = [r for r in self.requests_read if r.next_offset <= self.released_upto]
        if not released:
            return
        self.requests_read = [r for r in self.requests_read if r.next_offset > self.released_upto]
        if self._sync_master and self.cfg.ack_mode == "BLOCKING":
            for req in released:   # 4.x: handleHA only after handleDiskFlush returned
                if req.status is None:
                    self._register_replica_leg(req, now_ms)

    def fsync_failed(self, start: int, upto: int, now_ms: int) -> None:
        """fsync raised (EIO, ENOSPC): never PUT_OK on it (RocketMQ #9713)."""
        assert self.fsync_in_flight == upto, (self.fsync_in_flight, upto)
        self.fsync_in_flight = None
        if not self._flush_allowed():
            return                    # already read-only (a write failed while it ran)
        if "BugFlushIgnoresFsyncError" in self._bugs:
            self._flushed(upto, now_ms, step="FlushFail")   # B1: flushedPosition advanced anyway
            return
        self.writable = False         # RunningFlags.makeNotWriteable
        self.spec_steps.append(("FlushFail", None))

    def _deadlines(self, now_ms: int) -> None:
        cfg = self.cfg
        while self.flush_deadlines and self.flush_deadlines[0][0] <= now_ms:
            _, req = self.flush_deadlines.popleft()
            req.flush_deadline_pending = False
            if req.status is None and req.next_offset > self.flush_frontier():
                self._fail(req, self._deadline_status(req, flush_pending=True))
            elif req.status is PutStatus.PUT_OK and "BugDoubleResponse" in self._bugs:
                self._answer(req, self._deadline_status(req, flush_pending=False), "Timeout")
        while self.repl_deadlines and self.repl_deadlines[0][0] <= now_ms:
            _, req = self.repl_deadlines.popleft()
            if req.status is None and req.next_offset > self.replica_coverage():
                flush_pending = req.next_offset > self.flush_frontier()
                self._fail(req, self._deadline_status(req, flush_pending))

    def _deadline_status(self, req: Request, flush_pending: bool) -> PutStatus:
        """thenCombine over the legs pending now (BugFlushTimeoutHidesSlaveTimeout: swapped)."""
        replica_pending = req.next_offset > self.replica_coverage()
        if flush_pending and "BugFlushTimeoutHidesSlaveTimeout" in self._bugs:
            return PutStatus.FLUSH_DISK_TIMEOUT
        return deadline_status(replica_pending, bool(self.conns))

    def next_wakeup_ms(self, now_ms: int) -> int:
        """When ``tick`` next has something to do (the runtime may tick earlier).  (Called
        after every event by a simulator: a running minimum, no list of candidates; once it
        reaches ``now_ms`` nothing later can lower the answer, so it returns at once.)"""
        cfg, log = self.cfg, self.log
        due = now_ms + 1000
        if self._pool and log.issued < log.wrote:
            if self._commit_wakeup:
                return now_ms
            at = self._last_commit_round_ms + cfg.commit_interval_commit_log_ms
            if at < due:
                due = at
        # GroupCommitService also runs for requests an earlier fsync already covered (a follow-up
        # fsync reached past them while they waited in requests_write): its round releases them.
        if (self.fsync_in_flight is None and self._flush_allowed()
                and (log.committed > log.flushed or self._sync_flush and (self.requests_write or self.requests_read))):
            if self._flush_wakeup:
                return now_ms
            at = self._last_flush_round_ms + (cfg.group_commit_interval_ms if self._sync_flush
                                              else cfg.flush_interval_commit_log_ms)
            if at < due:
                due = at
        if self.flush_deadlines and (at := self.flush_deadlines[0][0]) < due:
            due = at
        if self.repl_deadlines and (at := self.repl_deadlines[0][0]) < due:
            due = at
        if due <= now_ms:
            return now_ms
        housekeeping = cfg.ha_housekeeping_interval_ms
        for opened_ms in self.ungreeted.values():
            if opened_ms + housekeeping < due:
                due = opened_ms + housekeeping
        for hc in self.conns.values():
            if hc.next_transfer > hc.ack_offset and hc.ack_owed_since_ms + housekeeping < due:
                due = hc.ack_owed_since_ms + housekeeping
        return now_ms if due < now_ms else due

    # ------------------------------------------------------------------ HA

    def _transfer_limit(self) -> int:
        return self.log.wrote if "BugTransferBeyondCommitted" in self._bugs else self.log.committed

    def _transfer(self, now_ms: int) -> None:
        """HAConnection.WriteSocketService: stream committed data, batch by batch.
        (The spec's Transfer(r) label is recorded by the slave, per record it takes.)
        A slave behind the segments in memory is served from a segment read back."""
        limit = self._transfer_limit()
        cfg, log = self.cfg, self.log
        confirm = None
        for hc in self.conns.values():
            if hc.next_transfer == hc.ack_offset and hc.next_transfer < limit:
                hc.ack_owed_since_ms = now_ms     # an idle slave is sent data: it owes an ack from now
            while hc.next_transfer < limit and hc.next_transfer - hc.ack_offset < cfg.ha_send_window_bytes:
                start = hc.next_transfer
                epoch, epoch_start, epoch_end = self.transfer_label(start, hc.cursor_epoch)
                end = min(limit, log.segment_end(start), start + cfg.ha_transfer_batch_size, epoch_end)
                data = self._data(start, end)
                if data is None:
                    break            # a ReadSegment is under way: segment_read resumes the stream
                confirm = self.header_confirm() if confirm is None else confirm
                self._emit(SendData(hc.conn, start, data, epoch, epoch_start, confirm))
                hc.next_transfer = end

    # --- segments read back ---------------------------------------------------------

    def _old_segment(self, start: int) -> tuple[LogIndex, bytes] | None:
        """A segment below the log's memory, or None after asking the runtime to read it."""
        seg = self._old.get(start)
        if seg is not None:
            self._old.move_to_end(start)
            return seg
        if start not in self._reads:
            self._reads.add(start)
            self._emit(ReadSegment(start))
        return None

    def _index_at(self, offset: int) -> LogIndex | None:
        """The index that answers for ``offset`` (None: a read was asked for)."""
        if self.log.index.retains(offset):
            return self.log.index
        seg = self._old_segment(self.log.segment_start(offset))
        return None if seg is None else seg[0]

    def _data(self, offset: int, end: int) -> bytes | None:
        if offset >= self.log.base:
            return self.log.data(offset, end)
        start = self.log.segment_start(offset)
        seg = self._old_segment(start)
        return None if seg is None else seg[1][offset - start: end - start]

    def segment_read(self, start: int, data: bytes, now_ms: int) -> None:
        """The runtime read back the segment file asked for by ReadSegment(start)."""
        if start not in self._reads:
            return
        self._reads.discard(start)
        log = self.log
        cp, nxt = log.index.checkpoints.get(start), log.index.checkpoints.get(start + log.segment_size)
        assert cp is not None and nxt is not None and start < log.base, (start, log.base)
        index = LogIndex.of_segment(log.segment_size, cp, data)
        if (index.count, index.last_chain) != (nxt.records, nxt.chain):
            self.segment_read_failed(start, f"segment {start} read back does not hold the records the log "
                                            f"wrote there ({index.count - cp.records} of {nxt.records - cp.records})",
                                     now_ms)
            return
        self._old[start] = (index, bytes(data))
        while len(self._old) > self._old_capacity:
            self._old.popitem(last=False)
        self._replay_parked(now_ms)
        self._transfer(now_ms)
        self._complete_covered()

    def segment_read_failed(self, start: int, reason: str, now_ms: int) -> None:
        """The segment could not be read back: close the connections that wait for a read
        (parked ones, and accepted ones whose stream needs this segment)."""
        self._reads.discard(start)
        size = self.log.segment_size
        for conn in list(self._parked):
            # a parked ACK's connection is an accepted one: dropped as such (the spec's
            # ReplicaDisconnect), not closed as a stranger that the core would still count
            if (name := self.name_of(conn)) is not None:
                self._drop(name, reason)
            else:
                self._close_unaccepted(conn, reason)
        for name, hc in list(self.conns.items()):
            if hc.next_transfer < self.log.base and self.log.segment_start(hc.next_transfer) == start:
                self._drop(name, reason)
        assert all(s + size <= self.log.base for s in self._reads)

    # --- the events of HA connections, in order per connection ---------------------------

    def _run_or_park(self, conn: int, event: tuple, now_ms: int) -> None:
        parked = self._parked.get(conn)
        if parked is not None:
            bound = self.cfg.ha_max_parked_events
            if len(parked) >= bound:
                # A slave waits for its handshake's answer or its stream before it says more: a
                # connection that keeps talking while its frames wait for a segment read is not one.
                reason = f"{len(parked)} frames wait for a segment read on this connection (ha_max_parked_events = {bound})"
                if (name := self.name_of(conn)) is not None:
                    self._drop(name, reason, bound="ha_max_parked_events")
                else:
                    self._close_unaccepted(conn, reason, bound="ha_max_parked_events")
                return
            parked.append(event)
        elif not self._run(conn, event, now_ms):
            self._parked[conn] = deque([event])

    def _replay_parked(self, now_ms: int) -> None:
        for conn in list(self._parked):
            parked = self._parked.get(conn)
            while parked and self._run(conn, parked[0], now_ms):
                if self._parked.get(conn) is not parked:
                    break        # that event closed its connection: the frames behind it go with it
                parked.popleft()
            if conn in self._parked and not self._parked[conn]:
                del self._parked[conn]

    def _run(self, conn: int, event: tuple, now_ms: int) -> bool:
        """Perform one HA event; False when it waits for a segment read (nothing changed)."""
        if event[0] == "handshake":
            return self._handshake(conn, *event[1:], now_ms)
        return self._ack(conn, *event[1:], now_ms)

    def _close_unaccepted(self, conn: int, reason: str, bound: str | None = None) -> None:
        self._parked.pop(conn, None)
        for name in [n for n, c in self.connecting.items() if c == conn]:
            del self.connecting[name]
        self._emit(CloseReplica(conn, reason, bound))

    def begin_epoch(self, entries: tuple[tuple[int, int], ...], confirm_offset: int,
                    bugs: frozenset[str] = frozenset()) -> None:
        """ChangeToMaster, the store's part (reference/real/node.py): this master's epoch entries,
        the last its own epoch starting at its log end, and the confirmOffset ReplicasManager
        computed for it (ConfirmWith over its new SyncStateSet).  Every transfer header is
        labelled from the entries and no batch spans two; from here on confirmOffset is
        computeConfirmOffset over the SyncStateSet (``set_confirm_view``), the spec's rule."""
        epochs = EpochFileCache(entries)
        assert epochs.entries, "a master has at least its own epoch"
        assert epochs.last_start() <= self.log.wrote, (epochs.entries, self.log.wrote)
        re_elected = bool(self.epochs.entries)
        self.epochs, self.failover_bugs = epochs, frozenset(bugs)
        self.confirm = min(confirm_offset, self.log_end_offset())
        if re_elected:
            # A request of an earlier epoch is never answered PUT_OK (the spec's Respond needs the
            # master's epoch to be the request's): the SyncStateSet it waited for is gone, and the
            # new epoch's starts with this master alone.  Its producer learns so now.
            self.stop_serving()

    def stop_serving(self) -> None:
        """Every request still waiting is answered FLUSH_SLAVE_TIMEOUT: at a re-election (its epoch
        is over) and when the master's machine stops (BrokerCore.detach: a demotion), so no
        producer waits on a SyncStateSet, or a machine, that is gone."""
        for req in [r for r in self.requests.values() if r.status is None]:
            self._fail(req, PutStatus.FLUSH_SLAVE_TIMEOUT)

    def log_end_offset(self) -> int:
        """The master's max offset as the failover rules count it: its last whole record in the
        page cache (acks and epoch starts are record boundaries)."""
        return self.log.index.boundary_at_or_below(self.log.committed)

    def set_confirm_view(self, committed: frozenset[str], view: frozenset[str], confirm_offset: int) -> None:
        """The node's SyncStateSet, as ReplicasManager holds it after a change (less this master):
        the controller's set, the view with a proposal in flight, and the confirmOffset the
        change left (ChangeSyncStateSet recomputes it over the new set, a refused alter alone
        takes the log end, a proposal keeps it) — computed there over this core's acks."""
        assert self.confirm is not None, "set_confirm_view before begin_epoch"
        assert committed <= view and len(view) <= 64, (committed, view)
        self.confirm_committed, self.confirm_view = frozenset(committed), frozenset(view)
        self.confirm = min(confirm_offset, self.log_end_offset())

    def _recompute_confirm(self, name: str | None) -> None:
        """ReplicaConnect / ReplicaAck of a committed member (``name``), or Put with no other
        member in the view (``name`` None): the spec's confirmOffset, roles.confirm_with."""
        if self.confirm is None:
            return
        from reference.failover.roles import confirm_with     # failover only: not on the write path's imports
        if name is None:
            if not self.confirm_view:
                self.confirm = self.log_end_offset()
            return
        if name in self.confirm_committed:
            self.confirm = confirm_with("", self.confirm_view, self.conns, self.log_end_offset(), self.confirm,
                                        bugs=self.failover_bugs)

    def replica_epoch_query(self, conn: int, now_ms: int) -> None:
        """EPOCH_QUERY, a following slave's first frame (AutoSwitchHAConnection's HANDSHAKE
        answer): our entries, our log end at a record boundary and confirmOffset, on the same
        connection, which must then send its HANDSHAKE within the housekeeping interval as any
        new connection.  Asked twice, or after a HANDSHAKE, it is not a slave: closed."""
        if conn in self.epoch_queried or conn not in self.ungreeted:
            self.replica_bad_input(conn, "a second EPOCH_QUERY, or one after the HANDSHAKE")
            return
        self.epoch_queried.add(conn)
        end = self.log_end_offset()
        self._emit(SendEpochs(conn, tuple((e.epoch, e.start_offset) for e in self.epochs.entries), end,
                              self.header_confirm()))

    def _cursor_epoch_at_connect(self) -> int:
        if not self.epochs.entries:
            return 0                 # outside failover: no labels (transfer_label reads no cursor then)
        from reference.failover.roles import cursor_epoch_at_connect     # failover only, as confirm_with
        return cursor_epoch_at_connect(self.epochs, bugs=self.failover_bugs)

    def transfer_label(self, offset: int, cursor_epoch: int) -> tuple[int, int, int]:
        """The transfer header for a batch from ``offset``: (epoch, its start, where the batch
        must end — the next entry's start, or no end), from the entries (H2): the spec's
        TransferLabel, roles.transfer_label, the definition the record-level model runs.  A
        connection whose cursor is fixed (``cursor_epoch``, only under BugTransferCursorNotReset)
        ships its cursor's label, unbounded, as ReplicasManager.next_transfer does."""
        k = self.epochs.covering_index(offset)
        if k is None:
            return 0, 0, INF
        from reference.failover.roles import transfer_label
        entry = transfer_label(self.epochs, offset, cursor_epoch, bugs=self.failover_bugs)
        if cursor_epoch != 0:
            return entry.epoch, entry.start_offset, INF
        end = self.epochs.entries[k + 1].start_offset if k + 1 < len(self.epochs.entries) else INF
        return entry.epoch, entry.start_offset, end

    def change_sync_state_set(self, replicas: tuple[str, ...], sync_state_set: frozenset[str]) -> None:
        """Controller-driven failover (reference/real/node.py): the slaves this master may
        take and the SyncStateSet its ALL_IN_SYNC acks count over — the controller's, or its
        union with an AlterSyncStateSet proposal in flight (#5663).  Slaves are only ever
        added to ``replicas``; a connected slave stays connected."""
        replicas, sync_state_set = tuple(replicas), frozenset(sync_state_set)
        assert set(self.replicas) <= set(replicas), (self.replicas, replicas)
        assert sync_state_set <= set(replicas), (sync_state_set, replicas)
        assert len(replicas) <= MAX_REPLICAS, "replicas unbounded"
        self.replicas, self.sync_state_set = replicas, sync_state_set
        self._old_capacity = max(2, len(replicas) + 1)
        self._complete_covered()

    def readable_end(self) -> int:
        """confirmOffset as consumers see it (reputEndOffset).  Under failover the spec's rule
        (computeConfirmOffset: the minimum of the log end and the SyncStateSet's acks, the old
        value while a member has no connection).  Outside it, below the largest PUT_OK and in
        the page cache: a PUT_OK may run ahead of that (ASYNC_FLUSH with the transient store
        pool answers at the append), a read never does."""
        if self.confirm is not None:
            return min(self.confirm, self.log.committed)
        return min(self.acked_upto, self.log.committed)

    def header_confirm(self) -> int:
        """The confirmOffset a transfer header carries (roles.header_confirm: one definition)."""
        if self.confirm is None:
            return self.readable_end()
        from reference.failover.roles import header_confirm
        return min(header_confirm(self.log_end_offset(), self.confirm, bugs=self.failover_bugs),
                   self.log.committed)

    def name_of(self, conn: int) -> str | None:
        return next((name for name, hc in self.conns.items() if hc.conn == conn), None)

    NEED_READ = object()

    def handshake_accepts(self, offset: int, chain: bytes, records: int):
        """HandshakeAccepts: None, or why the slave's log cannot follow this master's
        (NEED_READ: the segment holding ``offset`` is being read back to tell)."""
        if "BugAcceptAckBeyondLog" in self._bugs:
            return None
        committed = self.log.records_upto(self.log.committed)
        if "BugHandshakeOffsetOnly" in self._bugs:   # position only, no content check (4.9.x, B22)
            return None if records <= committed else f"slave holds {records} records, master {committed}"
        if offset > self.log.committed:
            return f"slave offset {offset} is beyond the master's log ({self.log.committed})"
        index = self._index_at(offset)
        if index is None:
            return self.NEED_READ
        if index.chain_at(offset) != chain:
            return f"slave log up to {offset} differs from the master's (another master incarnation)"
        if records != index.records_upto(offset):
            return f"slave claims {records} records up to {offset}, the master's log has {index.records_upto(offset)}"
        # In records, as the spec counts: committed may stop inside a record that spans two segments.
        if "BugHandshakeRefusesCaughtUp" in self._bugs and records >= committed:
            return f"slave holds all {committed} committed records: nothing to send it"
        return None

    def replica_connection_opened(self, conn: int, now_ms: int) -> None:
        """The HA port accepted a connection: it must send its HANDSHAKE within the
        housekeeping interval, or it is closed (a handshake cut or garbled on the way
        would otherwise leave both ends waiting for each other forever)."""
        assert conn not in self.ungreeted and self.name_of(conn) is None, f"connection {conn} opened twice"
        bound = self.cfg.ha_max_ungreeted_connections
        if len(self.ungreeted) >= bound:
            # The oldest goes, not the newcomer: a slave greets the moment it connects, so the
            # connection silent the longest is the least likely to be one.
            oldest = next(iter(self.ungreeted))
            del self.ungreeted[oldest]
            self.epoch_queried.discard(oldest)
            self._emit(CloseReplica(oldest, f"{bound} HA connections have not sent their HANDSHAKE "
                                            f"(ha_max_ungreeted_connections = {bound}): the oldest is closed",
                                    bound="ha_max_ungreeted_connections"))
        self.ungreeted[conn] = now_ms

    def replica_handshake(self, conn: int, name: str, offset: int, chain: bytes, now_ms: int,
                          records: int) -> None:
        """A new HA connection's first frame: the slave's name, max offset and chain hash there.
        Every decision is here, none in a runtime: a second HANDSHAKE, an unknown name, a name
        already connected (or whose handshake is being checked on another connection)."""
        self.ungreeted.pop(conn, None)
        self.epoch_queried.discard(conn)
        self._run_or_park(conn, ("handshake", name, offset, chain, records), now_ms)

    def _handshake(self, conn: int, name: str, offset: int, chain: bytes, records: int, now_ms: int) -> bool:
        if (current := self.name_of(conn)) is not None:
            self._drop(current, f"a second HANDSHAKE on the connection of slave {current}")
            return True
        waiting_here = self.connecting.get(name) == conn
        if name not in self.replicas:
            self._close_unaccepted(conn, f"unknown slave {name!r}")
            return True
        if name in self.conns or (name in self.connecting and not waiting_here):
            self._close_unaccepted(conn, f"slave {name} is already connected")
            return True
        reason = self.handshake_accepts(offset, chain, records)
        if reason is self.NEED_READ:
            self.connecting[name] = conn
            return False
        self.connecting.pop(name, None)
        if reason is not None:
            self._close_unaccepted(conn, f"slave {name}: {reason}")
            return True
        self.conns[name] = HaConnection(conn, ack_offset=offset, next_transfer=offset, ack_records=records,
                                        ack_owed_since_ms=now_ms, cursor_epoch=self._cursor_epoch_at_connect())
        self.push2SlaveMaxOffset = max(self.push2SlaveMaxOffset, offset)
        self.push2_records = max(self.push2_records, records)
        self.spec_steps.append(("ReplicaConnect", name))
        self._recompute_confirm(name)
        self._transfer(now_ms)
        self._complete_covered()
        return True

    def _report_problem(self, offset: int, records: int):
        """The master's check of a report (PR #3016, B3): (why it is refused or None,
        the records it claims in the spec's terms); NEED_READ while the segment
        holding ``offset`` is being read back."""
        log = self.log
        committed_records = log.records_upto(log.committed)
        claimed = max(records, committed_records + 1) if offset > log.committed else records
        claimed = min(claimed, log.index.count + 1)     # never past one beyond everything written
        if "BugAcceptAckBeyondLog" in self._bugs:
            return None, claimed
        limit = log.wrote if "BugAckCheckedAgainstWrote" in self._bugs else log.committed
        if offset > limit:
            return f"ack {offset} is beyond what the master could have shipped ({log.committed})", claimed
        index = self._index_at(offset)
        if index is None:
            return self.NEED_READ, claimed
        if records != index.records_upto(offset):
            return (f"ack {offset} claims {records} records, the master's log has "
                    f"{index.records_upto(offset)} there"), claimed
        return None, claimed

    def replica_ack(self, conn: int, offset: int, now_ms: int, records: int) -> None:
        """HAConnection.ReadSocketService: a slave reported the offset it holds
        (and how many records that is).  A report beyond what the master could
        have shipped, or that does not match the master's log, closes the
        connection (PR #3016; bug B3 without the check)."""
        self._run_or_park(conn, ("ack", offset, records), now_ms)

    def _ack(self, conn: int, offset: int, records: int, now_ms: int) -> bool:
        name = self.name_of(conn)
        if name is None:
            # No accepted HANDSHAKE on this connection (a refused one is closed at once, a
            # pending one parks its ACKs): a slave never sends that.
            self._close_unaccepted(conn, "an ACK on a connection with no accepted HANDSHAKE")
            return True
        hc = self.conns[name]
        if offset == hc.ack_offset and records == hc.ack_records:
            return True  # a heartbeat: what this connection reported last, checked then
        problem, claimed = self._report_problem(offset, records)
        if problem is self.NEED_READ:
            return False
        if problem is not None:
            if claimed > self.log.records_upto(self.log.committed):
                self.spec_steps.append(("ReplicaAck", name, claimed))   # TakeReport's refusal
                del self.conns[name]
                self._emit(CloseReplica(conn, problem))
            else:
                self._drop(name, problem)                               # a mangled report
            return True
        if offset <= hc.ack_offset:
            return True
        hc.ack_offset, hc.ack_records, hc.ack_owed_since_ms = offset, claimed, now_ms
        self.push2SlaveMaxOffset = max(self.push2SlaveMaxOffset, offset)
        self.push2_records = max(self.push2_records, claimed)
        self.spec_steps.append(("ReplicaAck", name, claimed))
        self._recompute_confirm(name)
        self._transfer(now_ms)
        self._complete_covered()
        return True

    def replica_bad_input(self, conn: int, reason: str) -> None:
        """The runtime could not decode what connection ``conn`` sent (or it sent a
        frame a slave never sends): close it."""
        self.ungreeted.pop(conn, None)
        self.epoch_queried.discard(conn)
        name = self.name_of(conn)
        self._close_unaccepted(conn, reason)
        if name is not None:
            self._drop(name, reason, close=False)

    def _drop(self, name: str, reason: str, close: bool = True, bound: str | None = None) -> None:
        """Close an accepted connection over its input (the spec: ReplicaDisconnect)."""
        hc = self.conns.pop(name)
        self._parked.pop(hc.conn, None)
        self.spec_steps.append(("ReplicaDisconnect", name))
        if close:
            self._emit(CloseReplica(hc.conn, reason, bound))

    def replica_disconnected(self, conn: int) -> None:
        """The connection is gone (network, slave crash, or our CloseReplica)."""
        self.ungreeted.pop(conn, None)
        self.epoch_queried.discard(conn)
        self._parked.pop(conn, None)
        for name in [n for n, c in self.connecting.items() if c == conn]:
            del self.connecting[name]
        name = self.name_of(conn)
        if name is not None:
            del self.conns[name]

    # --- memory ------------------------------------------------------------------------

    def _retain(self) -> None:
        """Forget the log's segments that nothing needs in memory any more: below the one
        holding the flushed offset and the acks of the slaves that keep up (a slave more
        than RETAINED_SEGMENTS_BEHIND segments behind is served by segment reads).  A
        read-only store forgets nothing: what it holds may differ from its files."""
        log = self.log
        if not self.writable:
            return
        keep = log.segment_start(log.flushed)
        floor = log.segment_start(log.committed) - RETAINED_SEGMENTS_BEHIND * log.segment_size
        for hc in self.conns.values():
            if hc.ack_offset >= log.base:
                keep = min(keep, max(log.segment_start(hc.ack_offset), floor))
        if keep > log.base:
            log.forget_below(keep)
