"""The deterministic simulated runtime: a cluster (reference/sim/cluster.py)
on a virtual clock, with producers, network and fsync latencies and faults,
all drawn from one seed (FoundationDB-style).  One seed gives one run.

After the faulty phase comes a liveness phase (TigerBeetle-style): faults
and new puts stop, the system heals, and every request still waiting must
be answered within a bounded virtual time.
"""

from __future__ import annotations

import heapq
import random
from contextlib import nullcontext

import attrs

from reference.refinement import PropertyViolation, RefinementError
from reference.sim.cluster import MACHINE_DOWN, MANGLINGS, UNKNOWN_SLAVE, UP, WRITE_FAULTS, Cluster
from reference.sim.disk import sim_disk_factory
from reference.sim.gcpolicy import LONG_RUN_EVENTS
from reference.sim.params import SimParams
from spec.gcpause import no_full_collections

MAX_QUEUED_EVENTS = 1_000_000
PUT_TURN_RATE = 0.25              # put events that are several puts of one loop turn (the real runtime's)
MAX_PUTS_IN_A_TURN = 4
READ_FAILURE_RATE = 0.1           # segment reads back (a slave far behind) that fail with EIO
HEARTBEAT_MS = (200, 1500)        # a slave reports what it holds this often (virtual time)


@attrs.define
class Outcome:
    """How a run ended."""
    seed: int
    steps: int                  # cluster steps (events) processed
    spec_steps: int             # spec actions the refinement check replayed
    sim_ms: int
    violation: str | None       # property name, "refinement", or None
    message: str | None
    trace_hash: str
    statuses: dict[str, int]
    actions: dict[str, int]     # spec action -> count (coverage)
    tail: list[str] = attrs.Factory(list)   # the last spec actions before a violation
    faults: dict[str, int] = attrs.Factory(dict)   # injected faults by kind
    branches: dict[str, int] = attrs.Factory(dict)     # spec branches (tla/AckOrder.tla labels) taken
    antecedents: dict[str, int] = attrs.Factory(dict)  # property antecedents reached (spec/coverage.py)
    guards: dict[str, int] = attrs.Factory(dict)       # bounds that closed a connection or refused a put

    @property
    def ok(self) -> bool:
        return self.violation is None


MAX_CLOSED_LINK_CLOCKS = 64     # delivery clocks kept for links already closed, before they are swept


class World:
    def __init__(self, params: SimParams, check: bool = True, trace=None) -> None:
        self.p = params
        self.cfg = params.store
        self.rng = random.Random(f"ackorder-sim-run-{params.seed}")
        self._getrandbits = self.rng.getrandbits
        # Whether a put event is one put or several of one loop turn (their page-cache writes one
        # run): a stream of its own, so a run keeps its schedule until its first such turn.
        self._turns = random.Random(f"ackorder-sim-turns-{params.seed}")
        self._read_faults = random.Random(f"ackorder-sim-read-faults-{params.seed}")
        assert random.Random._randbelow is random.Random._randbelow_with_getrandbits, \
            "World._randint inlines CPython's randint; this Python draws differently"
        self.cluster = Cluster(params.store, params.replicas, sim_disk_factory, check=check, trace=trace,
                               wire_bytes=params.wire_bytes)
        self.cluster.write_fault = self._write_fault
        self._queue: list = []
        self._handlers: dict[str, object] = {}               # event kind -> its _on_ method
        self._seq = 0
        self._scheduled: dict[tuple[int, str], int] = {}     # link -> frames with a delivery scheduled
        self._link_clock: dict[tuple[int, str], int] = {}    # link -> time of its last delivery (FIFO)
        self._fsync_scheduled = False
        self._reads_scheduled = 0
        self.cluster.deferred_reads = True
        self._connecting: set[str] = set(params.replicas)   # replicas with a connect attempt scheduled
        self._tick_at: int | None = None
        self._tick_seq: int | None = None    # the one live wake-up: an earlier one supersedes it
        self._operator_restart = False
        self.calm = False
        self.healed = False         # the liveness phase ran to its end (or a request outlived its deadlines)
        # Every request has its answer within both deadlines (BLOCKING registers the replica leg
        # after the flush) plus a tick: a broker that loses a request must not hide behind a restart.
        self._answer_bound_ms = self.cfg.sync_flush_timeout_ms + self.cfg.slave_timeout_ms + 50
        self._schedule(0, "put")
        for name in params.replicas:
            self._schedule(self._delay((0, 5)), "connect", name)
            self._schedule(self._delay(HEARTBEAT_MS), "heartbeat", name)
        for kind, rate in self._fault_rates().items():
            if rate > 0:
                self._schedule(self._exp(rate), kind)

    @property
    def now(self) -> int:
        return self.cluster.now

    # ------------------------------------------------------------ scheduling

    def _schedule(self, delay_ms: int, kind: str, *payload) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.cluster.now + delay_ms, self._seq, kind, payload))
        assert len(self._queue) < MAX_QUEUED_EVENTS, "event queue unbounded"

    def _delay(self, bounds: tuple[int, int]) -> int:
        return self._randint(*bounds)

    def _randint(self, low: int, high: int) -> int:
        """``self.rng.randint(low, high)``, the same draw from the same stream (CPython's
        randrange -> _randbelow_with_getrandbits, inlined: the call chain was most of its
        cost, and the simulator draws a delay for nearly every event)."""
        n = high - low + 1
        if n <= 0 or type(low) is not int or type(high) is not int:
            return self.rng.randint(low, high)      # its error, or its conversions
        k = n.bit_length()
        getrandbits = self._getrandbits
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return low + r

    def _exp(self, per_s: float) -> int:
        return max(1, int(self.rng.expovariate(per_s) * 1000))

    def _fault_rates(self) -> dict[str, float]:
        f = self.p.faults
        return {"master_process_crash": f.master_process_crash_per_s,
                "master_machine_crash": f.master_machine_crash_per_s,
                "replica_crash": f.replica_crash_per_s,
                "replica_disconnect": f.replica_disconnect_per_s,
                "forged_ack": f.forged_ack_per_s,
                "impostor": f.impostor_per_s,
                "flood": f.flood_per_s,
                "greetless": f.greetless_per_s,
                "epoch_query": f.epoch_query_per_s,
                **{f"{how}_frame": getattr(f, f"{how}_frame_per_s") for how in MANGLINGS}}

    def _plan(self) -> None:
        """After each step: schedule what the cluster now has in flight."""
        c = self.cluster
        now = c.now
        scheduled = self._scheduled
        for key, link in c.links.items() if c.links_grew else ():
            pending = len(link.frames) - scheduled.get(key, 0)
            if pending <= 0:
                continue
            net_delay_ms, clock = self.p.faults.net_delay_ms, self._link_clock
            for _ in range(pending):
                at = max(now + self._randint(*net_delay_ms), clock.get(key, 0))
                clock[key] = at
                scheduled[key] = scheduled.get(key, 0) + 1
                self._seq += 1
                heapq.heappush(self._queue, (at, self._seq, "deliver", (key,)))
        if len(self._link_clock) > len(c.links) + MAX_CLOSED_LINK_CLOCKS:
            # Connections come and go for the whole run: forget the clocks of closed links
            # (a connection id is never reused, so no later frame reads them).
            self._link_clock = {k: t for k, t in self._link_clock.items() if k in c.links}
            assert len(self._link_clock) <= len(c.links), "a link clock outlived its sweep"
        c.links_grew = False
        if c.pending_fsync is not None and not self._fsync_scheduled:
            self._fsync_scheduled = True
            fail = not self.calm and self.rng.random() < self.p.faults.fsync_failure_probability
            self._schedule(self._delay(self.p.faults.fsync_latency_ms), "fsync", c.incarnation, fail)
        for name, node in c.replicas.items():     # HAClient reconnects after any close
            if node.conn is None and node.up and name not in self._connecting:
                self._connecting.add(name)
                self._schedule(self._delay((2, 20)), "connect", name)
        while self._reads_scheduled < len(c.pending_reads):
            self._reads_scheduled += 1
            self._schedule(self._delay(self.p.faults.fsync_latency_ms), "segment_read", c.incarnation)
        if c.mstate == UP:
            m = c.master
            if not m.writable and not self._operator_restart:
                # A read-only store (a failed write or fsync) stays so until someone restarts the broker.
                self._operator_restart = True
                self._schedule(self._delay((20, 200)), "operator_restart", c.incarnation)
            at = m.next_wakeup_ms(now)
            tick_at = self._tick_at
            if tick_at is None or at < tick_at or tick_at < now:
                self._tick_at = at
                self._seq += 1
                self._tick_seq = self._seq
                heapq.heappush(self._queue, (at, self._seq, "tick", ()))

    # ------------------------------------------------------------ the run

    def run(self, steps: int, liveness: bool = True) -> Outcome:
        violation = message = None
        try:
            # A short run (a campaign's seed) leaves the collector alone: the worlds it drops are
            # garbage cycles that the next full collection frees.  Past LONG_RUN_EVENTS, see gcpolicy.
            while self._queue and self.cluster.steps < min(steps, LONG_RUN_EVENTS):
                self._process_next()
            with no_full_collections() if steps > LONG_RUN_EVENTS else nullcontext():
                while self._queue and self.cluster.steps < steps:
                    self._process_next()
                if liveness:
                    self._liveness_phase()
                elif self.cluster.checker is not None:
                    self.cluster.checker.finish()
        except PropertyViolation as err:
            violation, message = err.prop, str(err)
        except RefinementError as err:
            violation, message = "refinement", str(err)
        c = self.cluster
        if c.trace is not None:
            c.trace.end(self.healed, (violation, message or "") if violation else None, c.now)
        return Outcome(
            seed=self.p.seed, steps=c.steps, spec_steps=c.checker.steps_checked if c.checker else 0,
            sim_ms=c.now, violation=violation, message=message, trace_hash=c.trace_hash,
            statuses=c.statuses(), actions=dict(sorted(c.action_counts.items())),
            tail=list(c.recent_actions) if violation else [], faults=dict(sorted(c.faults.items())),
            branches=dict(sorted(c.coverage.branches.items())),
            antecedents=dict(sorted(c.coverage.antecedents.items())),
            guards=dict(sorted(c.guards.items())),
        )

    def _process_next(self) -> None:
        at, seq, kind, payload = heapq.heappop(self._queue)
        if kind == "tick" and seq != self._tick_seq:
            # Superseded by an earlier wake-up, whose tick scheduled its own successor: firing
            # this one too would start a second chain of ticks that never ends.
            return
        if at > self.cluster.now:
            self.cluster.now = at
        handler = self._handlers.get(kind)
        if handler is None:
            handler = self._handlers[kind] = getattr(self, "_on_" + kind)
        handler(*payload)
        try:
            self.cluster.check_answered_in_time(self._answer_bound_ms)
        except PropertyViolation:
            self.healed = True      # the system had both deadlines to answer: nothing more will
            raise
        self._plan()

    def _liveness_phase(self) -> None:
        self.calm = True
        f, cfg = self.p.faults, self.cfg
        c = self.cluster
        budget = 3 * max(cfg.sync_flush_timeout_ms, cfg.slave_timeout_ms) + 4 * f.restart_delay_ms[1] + 1000
        # A slave far behind catches up one send window per round trip: give each window of the
        # backlog two network delays and a tick, so a slow but steady catch-up is not a failure.
        behind_bytes = max((c.master.log.committed - c.replicas[n].core.received_end for n in c.replica_names),
                           default=0)
        windows = -(-max(0, behind_bytes) // cfg.ha_send_window_bytes)
        budget += windows * (2 * f.net_delay_ms[1] + 1)
        until = self.now + budget
        while self._queue and self.now <= until and not self._settled():
            self._process_next()
        self.healed = True
        c.check_liveness(budget)

    def _settled(self) -> bool:
        """Every request answered and every slave caught up (or diverged for good)."""
        c = self.cluster
        return c.mstate == UP and not c.waiting() and all(c.caught_up(n) is not False for n in c.replica_names)

    # ------------------------------------------------------------ events

    def _on_put(self) -> None:
        if self.calm:
            return
        if self._turns.random() < PUT_TURN_RATE:
            bodies = []
            for _ in range(self._turns.randint(2, MAX_PUTS_IN_A_TURN)):
                size = self.cluster.next_body_size(self._randint(*self.p.faults.body_size))
                bodies.append(self.rng.randbytes(size))
            self.cluster.puts_in_one_turn(bodies)
        else:
            size = self.cluster.next_body_size(self._randint(*self.p.faults.body_size))
            self.cluster.put(self.rng.randbytes(size))
        self._schedule(self._delay(self.p.faults.put_interval_ms), "put")

    def _on_tick(self) -> None:
        self._tick_at = self._tick_seq = None
        self.cluster.tick(self.now)

    def _on_fsync(self, incarnation: int, fail: bool) -> None:
        self._fsync_scheduled = False
        if incarnation == self.cluster.incarnation:
            self.cluster.complete_fsync(ok=not fail)

    def _on_segment_read(self, incarnation: int) -> None:
        self._reads_scheduled -= 1
        if incarnation == self.cluster.incarnation and self.cluster.pending_reads:
            # a read that fails (EIO): a stream of its own, so a run keeps its schedule until then
            ok = self.calm or self._read_faults.random() >= READ_FAILURE_RATE
            self.cluster.complete_read(ok=ok)

    def _on_deliver(self, key: tuple[int, str]) -> None:
        left = self._scheduled.pop(key) - 1
        if left:
            self._scheduled[key] = left
        if key in self.cluster.links:
            self.cluster.deliver(*key)
        # else: the connection closed with this frame in flight; it is lost

    def _on_heartbeat(self, name: str) -> None:
        self.cluster.heartbeat(name)
        self._schedule(self._delay(HEARTBEAT_MS), "heartbeat", name)

    def _on_connect(self, name: str) -> None:
        """HAClient.connectMaster; it retries while the master is away."""
        c = self.cluster
        node = c.replicas[name]
        self._connecting.discard(name)
        if not node.up or node.conn is not None:
            return
        if c.mstate != UP:
            self._connecting.add(name)
            self._schedule(self._delay((5, 30)), "connect", name)
            return
        c.connect(name)

    # --- faults

    def _fault(self, kind: str) -> bool:
        """Reschedule this fault kind; False when faults have stopped."""
        if self.calm:
            return False
        self._schedule(self._exp(self._fault_rates()[kind]), kind)
        return True

    def _on_master_process_crash(self) -> None:
        if self._fault("master_process_crash") and self.cluster.mstate == UP:
            self.cluster.master_process_crash()
            self._after_master_died()

    def _on_master_machine_crash(self) -> None:
        c = self.cluster
        if not self._fault("master_machine_crash") or c.mstate == MACHINE_DOWN:
            return
        low, high, ends = c.machine_crash_bounds()
        cut = self.rng.choice([low, high, *ends]) if self.rng.random() < 0.5 else self.rng.randint(low, high)
        c.master_machine_crash(cut)
        self._after_master_died()       # a new incarnation: the earlier restart, if any, is void

    def _on_operator_restart(self, incarnation: int) -> None:
        self._operator_restart = False
        c = self.cluster
        if c.mstate == UP and incarnation == c.incarnation and not c.master.writable:
            c.master_process_crash()
            self._after_master_died()

    def _write_fault(self, length: int):
        """Whether the next page-cache write fails, and after how many bytes."""
        if self.calm or self.rng.random() >= self.p.faults.write_failure_probability:
            return None
        kind = self.rng.choice(WRITE_FAULTS)
        return kind, (self.rng.randrange(length) if kind == "short" else 0)

    def _on_forged_ack(self) -> None:
        """A report the slave never sent: beyond committed (in the write buffer, or past
        everything written), or at a committed offset with the wrong record count."""
        c = self.cluster
        if not self._fault("forged_ack") or c.mstate != UP:
            return
        linked = [n for n in c.replica_names if c.accepted_conn(n) is not None]
        if not linked:
            return
        log = c.master.log
        name = self.rng.choice(linked)
        kind = self.rng.choice(("buffer", "beyond", "mangled"))
        if kind == "buffer" and log.wrote > log.committed:
            offset = self.rng.randint(log.committed + 1, log.wrote)
            c.forge_ack(name, offset, log.ghost.records_upto(offset))
        elif kind == "mangled" and log.committed > 0:
            offset = self.rng.randint(1, log.committed)
            c.forge_ack(name, offset, log.ghost.records_upto(offset) + self.rng.choice((-1, 1, 7)) % 1000)
        else:
            offset = log.wrote + self.rng.randint(1, 4096)
            c.forge_ack(name, offset, log.ghost.count + self.rng.randint(0, 3))

    def _on_impostor(self) -> None:
        c = self.cluster
        if self._fault("impostor") and c.mstate == UP:
            c.impostor(self.rng.choice((*c.replica_names, UNKNOWN_SLAVE)))

    def _on_flood(self) -> None:
        c = self.cluster
        if self._fault("flood") and c.mstate == UP:
            # A name with no connection makes the master read a segment back (if the log moved on).
            unlinked = [n for n in c.replica_names if c.accepted_conn(n) is None]
            name = self.rng.choice(unlinked or [*c.replica_names, UNKNOWN_SLAVE])
            c.flood(name, self._randint(1, min(2 * self.cfg.ha_max_parked_events + 2, 64)))

    def _on_greetless(self) -> None:
        c = self.cluster
        if self._fault("greetless") and c.mstate == UP:
            c.greetless(self._randint(1, min(self.cfg.ha_max_ungreeted_connections + 2, 16)))

    def _on_epoch_query(self) -> None:
        c = self.cluster
        if self._fault("epoch_query") and c.mstate == UP:
            c.epoch_queries(self._randint(1, 3))

    def _mangle(self, how: str) -> None:
        if self._fault(f"{how}_frame"):
            self.cluster.mangle(how, self.rng.randrange(1 << 16), self.rng.randrange(1 << 16))

    def _on_duplicate_frame(self) -> None:
        self._mangle("duplicate")

    def _on_reorder_frame(self) -> None:
        self._mangle("reorder")

    def _on_truncate_frame(self) -> None:
        self._mangle("truncate")

    def _on_garbage_frame(self) -> None:
        self._mangle("garbage")

    def _on_corrupt_frame(self) -> None:
        self._mangle("corrupt")

    def _after_master_died(self) -> None:
        self._schedule(self._delay(self.p.faults.restart_delay_ms), "master_restart", self.cluster.incarnation)

    def _on_master_restart(self, incarnation: int) -> None:
        if self.cluster.mstate != UP and incarnation == self.cluster.incarnation:
            self.cluster.master_restart()

    def _on_replica_crash(self) -> None:
        c = self.cluster
        if not self._fault("replica_crash"):
            return
        up = [n for n in c.replicas.values() if n.up]
        if up:
            node = self.rng.choice(up)
            c.replica_crash(node.name)
            self._schedule(self._delay(self.p.faults.restart_delay_ms), "replica_restart", node.name)

    def _on_replica_restart(self, name: str) -> None:
        self.cluster.replica_restart(name)

    def _on_replica_disconnect(self) -> None:
        c = self.cluster
        if not self._fault("replica_disconnect"):
            return
        linked = [n for n in c.replicas.values() if n.conn is not None]
        if linked:
            c.disconnect(self.rng.choice(linked).name)
