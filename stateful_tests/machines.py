"""Hypothesis state machines.

* ``SpecMachine`` drives spec/ (the Python twin) through enabled actions,
  with bounds larger than TLC can exhaust, checking every invariant.
* ``RefinementMachine`` drives the reference cores through a Cluster (puts,
  clock ticks, fsyncs, failed page-cache writes, frame deliveries, forged,
  duplicated, reordered, cut and corrupted HA frames, impostor connections,
  disconnects, crashes, recovery) with a configuration drawn per test case;
  after every step the refinement check maps the cores' state to the spec's,
  replays the spec steps they reported and checks every invariant.
* ``RealStoreMachine`` is the same on real files with fdatasync in a
  temporary directory (process crashes only: a real disk cannot lose power
  on demand).

Each ends with a liveness phase in ``teardown``: faults stop, everything
heals, and within a bounded number of steps every waiting request must be
answered and every slave whose log follows the master's must be connected
and caught up (ReplicasCatchUp), not only the ones connected at the end.
"""

from __future__ import annotations

import io
import shutil
import sys
import tempfile
from pathlib import Path

import attrs
from hypothesis import strategies as st, target
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition, rule

from reference.config import StoreConfig
from reference.real.disk import SegmentStore
from reference.refinement import PropertyViolation
from reference.sim.cluster import MANGLINGS, UNKNOWN_SLAVE, UP, WRITE_FAULTS, Cluster
from reference.sim.heal import LIVENESS_STEPS, heal
from reference.sim.disk import sim_disk_factory
from spec import actions as sa
from spec.config import ACK_POLICIES, Bounds, Config
from spec.properties import INVARIANTS, SAFETY, caught_up, diverged
from spec.state import WAITING

# Where a failing test case's spec-level trace goes (spec/traceformat.py; `ackorder trace-check`): the
# file is rewritten by each failing case, so after shrinking it holds the minimal one's.
TRACE_DIR = Path(__file__).resolve().parent.parent / ".ackorder" / "stateful"


class Targets:
    """The most interesting value of each metric in a test case; Hypothesis
    accepts one target() per label and case, so they are reported at the end."""

    def __init__(self) -> None:
        self.best: dict[str, float] = {}

    def see(self, **metrics: float) -> None:
        for label, value in metrics.items():
            self.best[label] = max(self.best.get(label, value), value)

    def report(self) -> None:
        if not currently_in_test_context():     # a replayed program runs outside Hypothesis
            return
        for label, value in self.best.items():
            target(value, label=label)

# ------------------------------------------------------------------ the spec

SPEC_ACTIONS = ("Put", "Commit", "Flush", "FlushFail", "WriteFail", "Respond", "Timeout", "MasterProcessCrash",
                "MasterMachineCrash", "Recover", "ReplicaConnect", "Transfer", "ReplicaAck", "ForgedAck",
                "ReplicaDisconnect", "ReplicaCrash", "ReplicaRestart")
HEALING = frozenset({"Recover", "ReplicaRestart", "ReplicaConnect", "Transfer", "ReplicaAck", "Commit", "Flush",
                     "Respond", "Timeout"})
# Each action's successors alone (sa.successors' ``only``): the rule picks the action first.
ONLY = {action: frozenset({action}) for action in SPEC_ACTIONS}

spec_configs = st.builds(
    Config,
    replicas=st.sampled_from([("r1",), ("r1", "r2"), ("r1", "r2", "r3")]),
    flush_mode=st.sampled_from(["SYNC_FLUSH", "ASYNC_FLUSH"]),
    repl_mode=st.sampled_from(["SYNC_MASTER", "ASYNC_MASTER"]),
    transient_store_pool=st.booleans(),
    ack_policy=st.sampled_from(ACK_POLICIES),
    in_sync_replicas=st.just(2),
    file_size=st.integers(1, 4),
)

# Larger than any TLC model (which stop at 3 puts and one of each fault).
SPEC_BOUNDS = Bounds(max_puts=12, max_master_process_crashes=3, max_master_machine_crashes=3,
                     max_replica_crashes=4, max_replica_disconnects=4, max_fsync_failures=2,
                     max_write_failures=2, max_forged_reports=3)


class SpecMachine(RuleBasedStateMachine):
    """The twin itself, explored by Hypothesis instead of BFS."""

    @initialize(cfg=spec_configs)
    def setup(self, cfg: Config) -> None:
        self.cfg = cfg
        self.state = sa.initial_state(cfg)
        self.targets = Targets()

    @rule(action=st.sampled_from(SPEC_ACTIONS), choice=st.integers(0, 7))
    def act(self, action: str, choice: int) -> None:
        options = [t for _, t in sa.successors(self.cfg, SPEC_BOUNDS, self.state, ONLY[action])]
        if options:
            self.state = options[choice % len(options)]
        s = self.state
        self.targets.see(unflushed_records=s.wrote - s.flushed,
                         queued_requests=sum(r.status == WAITING for r in s.reqs),
                         replica_lag=max((s.committed - len(rl) for rl in s.rlog), default=0))

    @invariant()
    def safety(self) -> None:
        for name in SAFETY:
            if not INVARIANTS[name](self.cfg, self.state):
                raise PropertyViolation(name, f"{name} violated in {self.state}")

    def teardown(self) -> None:
        """Fair scheduling of the healing actions only: every request gets answered."""
        if not hasattr(self, "state"):
            return
        self.targets.report()
        cfg, s = self.cfg, self.state
        for step in range(LIVENESS_STEPS):
            if s.mstate == "UP" and not any(r.status == WAITING for r in s.reqs):
                break
            healing = [t for _, t in sa.successors(cfg, SPEC_BOUNDS, s, HEALING)]
            if not healing:
                break
            s = healing[step % len(healing)]
        for step in range(LIVENESS_STEPS):      # then let the slaves catch up (ReplicasCatchUp)
            if all(diverged(cfg, s, k) or caught_up(cfg, s, k) for k in range(len(cfg.replicas))):
                break
            healing = [t for _, t in sa.successors(cfg, SPEC_BOUNDS, s, HEALING)]
            if not healing:
                break
            s = healing[step % len(healing)]
        waiting = [i for i, r in enumerate(s.reqs, 1) if r.status == WAITING]
        if waiting or s.mstate != "UP":
            raise PropertyViolation("EveryRequestAnswered",
                                    f"requests {waiting} still waiting after {LIVENESS_STEPS} healing steps")
        behind = [r for k, r in enumerate(cfg.replicas) if not (diverged(cfg, s, k) or caught_up(cfg, s, k))]
        if behind:
            raise PropertyViolation("ReplicasCatchUp",
                                    f"slaves {behind} neither diverged nor caught up after {LIVENESS_STEPS} healing steps")


# ------------------------------------------------------------------ the reference

store_configs = st.builds(
    StoreConfig,
    flush_disk_type=st.sampled_from(["SYNC_FLUSH", "ASYNC_FLUSH"]),
    broker_role=st.sampled_from(["SYNC_MASTER", "ASYNC_MASTER"]),
    transient_store_pool_enable=st.booleans(),
    ack_policy=st.sampled_from(ACK_POLICIES),
    in_sync_replicas=st.integers(2, 3),
    ack_mode=st.sampled_from(["DECOUPLED", "BLOCKING"]),
    flush_one_message_per_fsync=st.booleans(),
    commit_on_replica_wait=st.booleans(),
    mapped_file_size_commit_log=st.sampled_from([256, 512]),
    max_message_size=st.just(100),
    os_page_size=st.just(64),
    sync_flush_timeout_ms=st.integers(5, 60),
    slave_timeout_ms=st.integers(5, 60),
    group_commit_interval_ms=st.just(1),
    flush_interval_commit_log_ms=st.integers(1, 20),
    flush_commit_log_least_pages=st.sampled_from([0, 1]),
    commit_interval_commit_log_ms=st.integers(1, 20),
    commit_commit_log_least_pages=st.sampled_from([0, 1, 4]),
    commit_commit_log_thorough_interval_ms=st.integers(1, 20),
    ha_transfer_batch_size=st.sampled_from([40, 200]),
    ha_send_window_bytes=st.just(1024),
    ha_housekeeping_interval_ms=st.integers(20, 200),
    # Small enough for the flood and greetless rules to reach (no draw: the examples of the
    # machines stay those they were)
    ha_max_ungreeted_connections=st.just(4),
    ha_max_parked_events=st.just(2),
    # Few enough pool buffers for a pooled master whose commits lag to refuse puts (busy)
    transient_store_pool_size=st.just(2),
)


@attrs.frozen
class Pins:
    """Configuration a test pins (a bug switch and what it needs to matter)."""
    store: dict = attrs.Factory(dict)
    replicas: int | None = None


class RefinementMachine(RuleBasedStateMachine):
    """The reference cores on a simulated disk and network, step by step."""

    pins = Pins()
    requests = Bundle("requests")
    fsync_failures_in_ten = 1
    trace_to: Path | None = None      # on demand: every test case's trace there (the last case's stays)
    coverage_runs: list | None = None  # on demand: (spec config, branches, antecedents) of every test case

    def disk_factory(self):
        return sim_disk_factory

    @initialize(cfg=store_configs, n=st.integers(1, 3), connected=st.booleans(), wire_bytes=st.booleans())
    def setup(self, cfg: StoreConfig, n: int, connected: bool, wire_bytes: bool = False) -> None:
        cfg = attrs.evolve(cfg, **self.pins.store)
        n = self.pins.replicas or n
        self._trace = io.StringIO()      # kept in memory; written out on failure or on demand
        self.cluster = Cluster(cfg, tuple(f"r{i + 1}" for i in range(n)), self.disk_factory(),
                               wire_bytes=wire_bytes, trace=self._trace)
        self.write_faults: list = []       # how the next page-cache writes fail (None: they work)
        self.cluster.write_fault = self._next_write_fault
        self.targets = Targets()
        self.puts = 0
        if connected:                     # start from a healthy group: every slave connected
            for name in self.cluster.replica_names:
                self.cluster.connect(name)
            self._drain_network()

    def _drain_network(self, limit: int = 200) -> None:
        for _ in range(limit):
            links = self.cluster.open_links()
            if not links:
                return
            self.cluster.deliver(links[0].conn, links[0].direction)

    def _targets(self) -> None:
        c = self.cluster
        if c.mstate == UP:
            log = c.master.log
            lag = [log.committed - n.core.received_end for n in c.replicas.values()]
            self.targets.see(bytes_between_flushed_and_wrote=log.wrote - log.flushed,
                             queued_requests=len(c.waiting()), replica_lag_bytes=max(lag, default=0))

    # --- producers and time

    @rule(target=requests, size=st.integers(1, 100))
    def put(self, size: int):
        # Bodies differ from put to put, so a slave holding an older message at the same
        # offset differs in content; after a power loss the sizes are those of the lost
        # records, so it differs in content only (look-alike divergence).
        self.puts += 1
        rid = self.cluster.put(bytes([self.puts % 251]) * self.cluster.next_body_size(size))
        self._targets()
        return rid

    @rule(target=requests, sizes=st.lists(st.integers(1, 100), min_size=2, max_size=4))
    def puts_in_one_turn(self, sizes: list[int]):
        """Several puts of one loop turn (the real runtime's): their records' page-cache writes
        go out as one run, so a failed write has later puts' records behind it to forget."""
        bodies = []
        for size in sizes:
            self.puts += 1
            bodies.append(bytes([self.puts % 251]) * self.cluster.next_body_size(size))
        rids = self.cluster.puts_in_one_turn(bodies)
        self._targets()
        return multiple(*rids)

    def _next_write_fault(self, length: int):
        if not self.write_faults:
            return None
        fault = self.write_faults.pop(0)
        if fault is None:
            return None
        kind, fraction = fault
        return kind, (int(fraction * length) if kind == "short" else 0)

    @rule()
    def fail_a_segment_read(self) -> None:
        """The next segment read back (for a slave behind the segments in memory) fails: EIO."""
        self.cluster.read_faults = 1

    @rule(kind=st.sampled_from(WRITE_FAULTS), skip=st.integers(0, 2), fraction=st.floats(0, 0.99))
    def fail_a_write(self, kind: str, skip: int, fraction: float) -> None:
        """After ``skip`` good page-cache writes, one fails (EIO, ENOSPC, or short)."""
        self.write_faults = [None] * skip + [(kind, fraction)]

    @rule(advance_ms=st.integers(0, 30))
    def tick(self, advance_ms: int) -> None:
        self.cluster.tick(self.cluster.now + advance_ms)

    @rule(req=requests)
    def past_its_deadlines(self, req) -> None:
        """Let the clock run past every deadline of one request put earlier."""
        c = self.cluster
        put = c.history.get(req) if c.mstate == UP and req is not None else None
        if put is not None:
            cfg = c.cfg
            c.tick(max(c.now, put.put_ms + max(cfg.sync_flush_timeout_ms, cfg.slave_timeout_ms) + 1))

    def _fsync_ok(self, draw: int) -> bool:
        """``draw`` in 0..9: fsync raises EIO for the top ``fsync_failures_in_ten``
        values, so failures are rare and shrinking leads to success."""
        return draw < 10 - self.fsync_failures_in_ten

    @precondition(lambda self: self.cluster.pending_fsync is not None)
    @rule(draw=st.integers(0, 9))
    def fsync_returns(self, draw: int) -> None:
        self.cluster.complete_fsync(self._fsync_ok(draw))

    # --- network

    @precondition(lambda self: bool(self.cluster.open_links()))
    @rule(choice=st.integers(0, 7), count=st.integers(1, 4))
    def deliver(self, choice: int, count: int) -> None:
        for _ in range(count):
            links = self.cluster.open_links()
            if not links:
                return
            link = links[choice % len(links)]
            self.cluster.deliver(link.conn, link.direction)

    @rule()
    def replicate(self) -> None:
        """A network round trip: the master streams, every frame in flight arrives."""
        self.cluster.tick(self.cluster.now)
        self._drain_network()

    @rule(draw=st.integers(0, 9))
    def flush_round(self, draw: int) -> None:
        """A group-commit round: the timer fires and the fsync it issues returns."""
        c = self.cluster
        c.tick(c.now + c.cfg.group_commit_interval_ms)
        if c.pending_fsync is not None:
            c.complete_fsync(self._fsync_ok(draw))

    @rule(replica=st.integers(0, 2))
    def connect(self, replica: int) -> None:
        self.cluster.connect(self._name(replica))

    @rule(replica=st.integers(0, 2))
    def disconnect(self, replica: int) -> None:
        self.cluster.disconnect(self._name(replica))

    @rule(replica=st.integers(0, 2))
    def heartbeat(self, replica: int) -> None:
        """A slave reports what it holds again (HAClient's heartbeat)."""
        self.cluster.heartbeat(self._name(replica))

    @rule(replica=st.integers(0, 2), where=st.sampled_from(["buffer", "beyond", "mangled"]),
          draw=st.integers(0, 1 << 16))
    def forge_ack(self, replica: int, where: str, draw: int) -> None:
        """An ACK no slave sent: in the write buffer, past everything, or with the wrong count."""
        c = self.cluster
        if c.mstate != UP:
            return
        log = c.master.log
        if where == "buffer" and log.wrote > log.committed:
            offset = log.committed + 1 + draw % (log.wrote - log.committed)
            records = log.ghost.records_upto(offset)
        elif where == "mangled" and log.committed > 0:
            offset = 1 + draw % log.committed
            records = log.ghost.records_upto(offset) + 1 + draw % 3
        else:
            offset, records = log.wrote + 1 + draw % 4096, log.ghost.count + draw % 3
        c.forge_ack(self._name(replica), offset, records)

    @rule(replica=st.integers(0, 3))
    def impostor(self, replica: int) -> None:
        """A second connection under a slave's name (or a name no one has)."""
        names = (*self.cluster.replica_names, UNKNOWN_SLAVE)
        self.cluster.impostor(names[replica % len(names)])

    @rule(replica=st.integers(0, 3), count=st.integers(1, 6))
    def flood(self, replica: int, count: int) -> None:
        """A connection that keeps sending ACKs behind a handshake not yet answered."""
        names = (*self.cluster.replica_names, UNKNOWN_SLAVE)
        self.cluster.flood(names[replica % len(names)], count)

    @rule(count=st.integers(1, 6))
    def greetless(self, count: int) -> None:
        """HA connections that never send their HANDSHAKE."""
        self.cluster.greetless(count)

    @rule(times=st.integers(1, 3))
    def epoch_queries(self, times: int) -> None:
        """EPOCH_QUERY on the HA port: answered once per connection before its HANDSHAKE, else closed."""
        self.cluster.epoch_queries(times)

    @precondition(lambda self: bool(self.cluster.open_links()))
    @rule(how=st.sampled_from(MANGLINGS), pick=st.integers(0, 7), at=st.integers(0, 1 << 16))
    def mangle(self, how: str, pick: int, at: int) -> None:
        """Duplicate, reorder, cut, corrupt a frame in flight or slip garbage in."""
        self.cluster.mangle(how, pick, at)

    def _name(self, i: int) -> str:
        names = self.cluster.replica_names
        return names[i % len(names)]

    # --- failures

    @rule(replica=st.integers(0, 2), restart=st.booleans())
    def replica_crash(self, replica: int, restart: bool) -> None:
        self.cluster.replica_crash(self._name(replica))
        if restart:
            self.cluster.replica_restart(self._name(replica))

    @rule(replica=st.integers(0, 2))
    def replica_restart(self, replica: int) -> None:
        self.cluster.replica_restart(self._name(replica))

    @rule(restart=st.booleans())
    def master_process_crash(self, restart: bool) -> None:
        self.cluster.master_process_crash()
        if restart:
            self.cluster.master_restart()

    @rule(keep=st.integers(0, 8), torn=st.booleans(), restart=st.booleans())
    def master_machine_crash(self, keep: int, torn: bool, restart: bool) -> None:
        """Power loss keeping the ``keep``-th record boundary past the durable
        end (0 shrinks to losing everything not fsync'd), or tearing the record
        after it.  (Hypothesis also draws constants it finds in the loaded
        modules, so which values are common changes with what is imported.)"""
        c = self.cluster
        if c.mstate != "MACHINE_DOWN":
            low, high, ends = c.machine_crash_bounds()
            cuts = [low, *ends, high] if high > low else [low]
            at = keep % len(cuts)         # modulo, not a clamp: large draws must not all mean "lose nothing"
            cut = cuts[at]
            if torn and at + 1 < len(cuts):
                cut = (cuts[at] + cuts[at + 1]) // 2 if cuts[at + 1] - cuts[at] > 1 else cut
            c.master_machine_crash(cut)
        if restart:
            c.master_restart()

    @rule()
    def master_restart(self) -> None:
        self.cluster.master_restart()

    # --- the end

    def teardown(self) -> None:
        if not hasattr(self, "cluster"):
            return
        self.targets.report()
        c = self.cluster
        failing = sys.exc_info()[0] is not None       # a rule raised: teardown runs in Hypothesis's finally
        healed = False
        try:
            heal(c)
            healed = not c.failed
        except PropertyViolation as err:          # the liveness phase ran and found a property broken
            failing = healed = True
            c.trace.end(True, (err.prop, str(err)), c.now)
            raise
        except BaseException:
            failing = True
            raise
        finally:
            c.trace.end(healed, None, c.now)
            self.save_trace(failing)
            if self.coverage_runs is not None:
                self.coverage_runs.append((c.checker.cfg, dict(c.coverage.branches), dict(c.coverage.antecedents)))
            for disk in [c.master_disk, *(n.disk for n in c.replicas.values())]:
                disk.close()

    def save_trace(self, failing: bool) -> None:
        targets = ([self.trace_to] if self.trace_to else []) + \
            ([TRACE_DIR / f"{type(self).__name__}-failure.ndjson"] if failing else [])
        for path in targets:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self._trace.getvalue())


class RealStoreMachine(RefinementMachine):
    """The same machine on the real store: segment files, pwrite, fdatasync."""

    # A real disk cannot lose power on demand: the rule is left out (a non-rule attribute
    # hides it), so that no step is spent drawing it and finding it disabled.
    master_machine_crash = None

    def disk_factory(self):
        self._dir = Path(tempfile.mkdtemp(prefix="ackorder-real-machine-"))

        def factory(name: str, segment_size: int, previous=None) -> SegmentStore:
            return SegmentStore(self._dir / name / "commitlog", segment_size)

        return factory

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            shutil.rmtree(getattr(self, "_dir", ""), ignore_errors=True)

