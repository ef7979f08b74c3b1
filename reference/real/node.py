"""`ackorder broker node`: a broker that follows the controller for real.

The node registers with the controller (reference/real/controller_server.py),
heartbeats (BrokerConfig.brokerHeartbeatInterval) with its epoch and max
offset, and takes the role the controller's metadata gives it.  It makes no
protocol decision: every one is a sans-IO core's, joined in one
reference/failover/broker.py ``BrokerCore``:

* role changes: ``ReplicasManager`` (reference/failover/roles.py) — only on a
  strictly larger master epoch (E5); a new master appends (epoch, its log
  end) to its epoch cache, which is written (fsynced, .bak) before it serves;
* the slave: reference/failover/follower.py ``FollowerCore`` — on the HA
  connection itself, the master's epoch entries (EPOCH_QUERY) against ours,
  the consistent point, TruncateLog → FsyncLog → WriteEpochFile (B14), then
  the HANDSHAKE; each DATA frame's header labels its bytes with their epoch
  and carries confirmOffset — run by the ReplicaRuntime;
* the master's write path: reference/master.py ``MasterCore`` (SYNC_MASTER
  with ALL_IN_SYNC: PUT_OK only when every SyncStateSet member holds the
  data; ``begin_epoch`` labels its transfer headers), run by MasterRuntime;
* the SyncStateSet: reference/failover/sss_policy.py (the policy the
  failover simulator checks against the spec), decided by
  ``BrokerCore.master_check_sync_state_set`` on the master's loop thread
  over the master core's own acks, its ack view pushed in the same step.

This module is the controller client and the I/O: it carries proposals to
the controller and answers back and performs the effects the cores emit in
order.  The process has one event loop for its whole life
(reference/real/broker_runtime.py ``BrokerRuntime``): a role — a
MasterRuntime or a ReplicaRuntime over the same --dir — runs its turns on
it, and a role change is one call on that loop, whose closed role does nothing more, over the
log the old role held in memory (recovered once, when the process starts).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from reference.config import StoreConfig
from reference.failover import broker_effects as bfx
from reference.failover.broker import BrokerCore
from reference.failover.bugs import check_bugs
from reference.failover.effects import CONTROLLER_NOT_LEADER, NO_MASTER, SUCCESS
from reference.failover.epochfile import EpochFileCache, epoch_file_checks_order
from reference.failover.proctrace import BrokerTracer, ProcessTrace
from reference.failover.roles import MASTER, MAX_SLAVES, SLAVE
from reference.failover.sss_policy import HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS_DEFAULT, SyncStateSetPolicy
from reference.real.controller_client import ControllerClient, ControllerClientError, PeerAuthError
from reference.real.disk import SegmentStore
from reference.real.epochfile import load_epoch_file, write_epoch_file
from reference.real.broker_runtime import BrokerRuntime, RoleFailed
from reference.real.master_server import MasterRuntime
from reference.real.options import MasterOptions, ReplicaOptions, require_secret
from reference.real.replica_server import FollowerSetup, ReplicaRuntime, SlaveStopped
from spec.config import ConfigError, ascii_digits

BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT = 1_000     # BrokerConfig.brokerHeartbeatInterval
CONTROLLER_CALL_TIMEOUT_S = 5.0
CONTROLLER_CONNECT_TIMEOUT_S = 30.0
EPOCH_FILE = "epochfile"


def broker_name(broker_id: int) -> str:
    """A broker's name on the HA port (MasterCore's slave names)."""
    return f"b{broker_id}"


def broker_id_of(name: str) -> int:
    assert name.startswith("b") and ascii_digits(name[1:]), name
    return int(name[1:])


def parse_node_address(text: str) -> tuple[str, int, int]:
    """``HOST:PORT:HA_PORT`` as a node registers it with the controller."""
    host, port, ha_port = text.rsplit(":", 2)
    return host, int(port), int(ha_port)


def _positive(instance, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"--{attribute.name.replace('_', '-')} {value!r}: must be a positive integer")


@attrs.frozen
class NodeOptions:
    directory: Path = attrs.field(converter=Path)
    controller: tuple[str, int]
    broker_id: int = attrs.field()
    config: StoreConfig
    group: str = "broker-a"
    host: str = "127.0.0.1"
    port: int = 10911
    ha_port: int = 10912
    heartbeat_interval_ms: int = attrs.field(default=BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT, validator=_positive)
    # more controllers of one service (`controller --etcd`): a failed call moves to the next one
    other_controllers: tuple[tuple[str, int], ...] = ()
    shrink_after_ms: int = attrs.field(default=HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS_DEFAULT, validator=_positive)
    failover_bugs: frozenset[str] = attrs.field(default=frozenset(), converter=check_bugs)
    ha_lag_ms: int = 0                 # --inject-ha-lag-ms: while master, DATA to broker ha_lag_to leaves late
    ha_lag_to: int | None = None
    peer_secret: bytes | None = attrs.field(default=None, repr=False)   # --peer-secret-file: HA and controller
    failover_trace: Path | None = None    # --failover-trace: this process's spec steps (failover/proctrace.py)

    def __attrs_post_init__(self) -> None:
        require_secret(self.host, self.peer_secret, "HA")
        if not isinstance(self.broker_id, int) or not 1 <= self.broker_id <= 10**9:
            raise ConfigError(f"--id {self.broker_id!r}: a broker id is 1..10**9")
        cfg = self.config
        if not (cfg.sync_master and cfg.ack_policy == "ALL_IN_SYNC" and cfg.sync_flush):
            raise ConfigError("a node runs SYNC_FLUSH, SYNC_MASTER and ALL_IN_SYNC (the 5.x controller mode): "
                              "--flush-disk-type SYNC_FLUSH --broker-role SYNC_MASTER --ack-policy ALL_IN_SYNC")
        if not 0 < self.port <= 65535 or not 0 < self.ha_port <= 65535 or self.port == self.ha_port:
            raise ConfigError(f"--port {self.port} --ha-port {self.ha_port}: two different fixed ports 1..65535 "
                              "(the controller hands them to producers and slaves)")
        if not self.group or len(self.group) > 255 or any(c.isspace() for c in self.group):
            raise ConfigError(f"--group {self.group!r}: a name of 1-255 characters without white space")
        lagged = self.ha_lag_to is not None
        if not isinstance(self.ha_lag_ms, int) or self.ha_lag_ms < 0 or (self.ha_lag_ms > 0) != lagged:
            raise ConfigError("--inject-ha-lag-ms N (>= 0) and --inject-ha-lag-to ID go together")
        if self.ha_lag_to is not None and (self.ha_lag_to == self.broker_id or not 1 <= self.ha_lag_to <= 10**9):
            raise ConfigError(f"--inject-ha-lag-to {self.ha_lag_to}: another broker's id")
        if Path(self.directory).exists() and not Path(self.directory).is_dir():
            raise ConfigError(f"--dir {self.directory}: exists and is not a directory")

    @property
    def name(self) -> str:
        return broker_name(self.broker_id)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}:{self.ha_port}"


def metadata_past_bounds(info: dict) -> str | None:
    """Why the controller's GetReplicaInfo names more brokers than one master serves (MAX_SLAVES
    slaves, a SyncStateSet of at most MAX_SLAVES), or None."""
    brokers, sss = len(info.get("addresses", {})), len(info.get("sync_state_set", ()))
    if brokers > MAX_SLAVES + 1 or sss > MAX_SLAVES:
        return (f"{brokers} brokers, a SyncStateSet of {sss}; a group here holds at most {MAX_SLAVES + 1} "
                f"brokers and a SyncStateSet of at most {MAX_SLAVES}")
    return None


class Node:
    def __init__(self, opts: NodeOptions, log: Callable[[str], None] = print) -> None:
        self.opts = opts
        self.log = log
        self.me = opts.name
        opts.directory.mkdir(parents=True, exist_ok=True)
        self.epoch_path = opts.directory / EPOCH_FILE
        self.proc = BrokerRuntime()            # one loop for the process's life: every role runs on it
        self.check_order = epoch_file_checks_order(opts.failover_bugs)
        loaded = load_epoch_file(self.epoch_path, check_order=self.check_order)
        if loaded.fallback_reason:
            log(f"epoch file: {loaded.fallback_reason}; using {loaded.source}")
        recovered = self._recover_log()
        end = recovered.end_offset
        self.broker = BrokerCore(self.me, epoch_cache=loaded.cache, log_end_offset=end, bugs=opts.failover_bugs,
                                 policy=SyncStateSetPolicy(self.me, max_not_catchup_ms=opts.shrink_after_ms),
                                 # no confirmOffset checkpoint on disk: 0, the safe lower bound (a
                                 # consumer reads less until the master's next header says more)
                                 checkpoint_confirm_offset=0, recovered=recovered)
        self.rm = self.broker.rm
        self.tracer: BrokerTracer | None = None
        if opts.failover_trace is not None:
            self.tracer = BrokerTracer(ProcessTrace(opts.failover_trace, self.me, opts.failover_bugs,
                                                    recovered.record_count))
        self.thread: threading.Thread | None = None
        self.runtime_failure: str | None = None
        self.following: str | None = None         # the master whose HA port a ReplicaRuntime follows
        self.addresses: dict[int, tuple[str, int, int]] = {}
        self.stopping = False
        self.metadata: dict | None = None         # the controller's last answer the tick accepted
        self._roles: asyncio.Lock | None = None   # a role change and a SyncStateSet check never interleave
        log(f"node {self.me} (group {opts.group}): log ends at {end}, epochs {list(self.rm.epoch_cache.entries)}")

    # ------------------------------------------------------------------ the log on disk

    def _store(self) -> SegmentStore:
        return SegmentStore(self.opts.directory / "commitlog", self.opts.config.mapped_file_size_commit_log)

    def _recover_log(self):
        """CRC recovery (a torn tail is cut and zeroed, fsynced) before any role holds the files:
        once per process start.  A role change hands the log from one runtime to the next in
        memory (BrokerCore.take_held); only one stopped in the middle of a cut recovers again."""
        store = self._store()
        try:
            return store.recover()
        finally:
            store.close()

    def _perform(self, effects: tuple) -> None:
        """ReplicasManager's effects of a role change, in order (broker_effects.py): the new
        master's epoch file; the HA client and connections go with the role that held them."""
        for e in effects:
            if isinstance(e, bfx.WriteEpochFile):
                write_epoch_file(self.epoch_path, EpochFileCache(e.entries), durable=e.durable,
                                 check_order=self.check_order)
            elif isinstance(e, (bfx.StartHaClient, bfx.StopHaClient, bfx.CloseConnections)):
                pass            # a role change closes one role and builds the other (BrokerRuntime.switch)
            else:
                raise AssertionError(f"unexpected effect {e!r}")

    # ------------------------------------------------------------------ the process's one runtime

    @property
    def runtime(self) -> MasterRuntime | ReplicaRuntime | None:
        """The role running on the process's loop (None: no role yet, or between two)."""
        return self.proc.role

    def _start_loop(self) -> None:
        """The process's one loop and its thread, for its whole life: every role runs on it."""
        assert self.thread is None

        def run() -> None:
            try:
                self.proc.run()
            except RoleFailed as err:
                self.runtime_failure = str(err)
            except BaseException as err:    # noqa: BLE001  (a core's assertion: the node must not go on as if following)
                self.runtime_failure = f"{type(err).__name__}: {err}"
                raise
        self.thread = threading.Thread(target=run, name=f"{self.me}-loop", daemon=True)
        self.thread.start()

    def _stop_loop(self) -> None:
        if self.thread is not None:
            self.proc.stop()
            self.thread.join(30)
            assert not self.thread.is_alive(), "the node's loop did not stop within 30 s"
            self._traced_stop(answers=False)     # the process stops: the spec's crash aborts what waits
            self.broker.detach()
            self.thread = None
            if self.tracer is not None:
                self.tracer.trace.close()

    def _close_role(self) -> None:
        """On the loop thread: the role closed, and what its machine held is the role state now."""
        self.proc.close_role()
        self.broker.detach()            # what a follower learned on its HA connection, the log it held
        self._traced_stop()

    def _stop_runtime(self, hold: bool = False) -> None:
        def close() -> None:
            if hold:
                self.tracer.hold()
            self._close_role()
        if self.runtime is not None:
            self.proc.call(close)
        elif hold:
            self.proc.call(self.tracer.hold)
        self.following = None

    def _switch(self, make: Callable[[], object]) -> object:
        """A role change, in one call on the loop thread: the old role closed (it does nothing more)
        (BrokerCore.detach), the next built by ``make`` over the log held in memory."""
        def build():
            self.broker.detach()        # the role switch() just closed: what its machine held is the role state now
            self._traced_stop()
            return make()
        return self.proc.call(lambda: self.proc.switch(build))

    def _traced_stop(self, answers: bool = True) -> None:
        """The stopped role's last labels read, after BrokerCore.detach (a follower's last records; a
        demoted master's answers to what waited, held for the ChangeToSlave that ends its role),
        before its core is let go.  ``answers`` False: the process is stopping, which the spec
        knows only as a crash (its waiting requests are aborted, never answered)."""
        if self.tracer is not None:
            if not answers and self.tracer.master is not None:
                self.tracer.master.spec_steps.clear()
            self.tracer.master_stopped()
            self.tracer.follower_stopped()

    def _others(self) -> tuple[str, ...]:
        return tuple(broker_name(b) for b in sorted(self.addresses) if b != self.opts.broker_id)

    def _become_master(self, info: dict) -> None:
        """ChangeToMaster.  A master re-elected (the controller lost its heartbeats for a
        while) keeps serving: its new epoch starts at its log end, taken on its loop thread.
        Otherwise the master role is built on the loop over the log held in memory, the epoch
        file is written, and only then does it serve — all in one step of the loop."""
        sss = frozenset(broker_name(b) for b in info["sync_state_set"])
        broker = self.broker
        # CLOCK_MONOTONIC, shared by the processes of one machine, taken before the role serves: a chaos
        # run names the epoch each PUT_OK was answered in by the last of these lines before it
        at_ms = f"at_ms={time.monotonic() * 1000:.1f}"
        if self.rm.role == MASTER and isinstance(self.runtime, MasterRuntime):
            # ChangeToMaster in one step of the master's loop, as the spec's is one action: no put is
            # taken between the log end the new epoch starts at, its entry in the epoch file (fsynced
            # here, on the loop: a rare event) and the labels of the transfer headers.
            def reelect() -> None:
                if self.tracer is not None:
                    self.tracer.drain()     # before: the answers its new epoch times out come after
                self._perform(broker.change_to_master(info["master_epoch"], sss, info["sss_epoch"]))
                if self.tracer is not None:
                    self.tracer.role_step("ChangeToMaster", epoch=self.rm.master_epoch)
            self.proc.call(reelect)
            self.log(f"role MASTER epoch {self.rm.master_epoch} (re-elected) from offset {self.rm.log_end_offset} "
                     f"{at_ms}")
            return
        opts = self.opts
        mopts = MasterOptions(directory=opts.directory, config=opts.config, replicas=self._others(), host=opts.host,
                              port=opts.port, ha_port=opts.ha_port, sync_state_set=(), ha_lag_ms=opts.ha_lag_ms,
                              ha_lag_to=None if opts.ha_lag_to is None else broker_name(opts.ha_lag_to),
                              peer_secret=opts.peer_secret)
        taken: list = []              # the held log, taken once whatever the attempts

        def make() -> MasterRuntime:
            if not taken:
                taken.append(broker.take_held())
            runtime = MasterRuntime(mopts, log=lambda m: self.log(f"[master] {m}"), held=taken[0],
                                    loop=self.proc.role_loop())
            if self.tracer is not None:
                runtime.core = self.tracer.traced_master(runtime.core)
            try:
                # not serving yet: the core's epochs, confirmOffset and views, and the epoch file,
                # fsynced, before the first put is taken
                broker.peers = self._others()
                broker.attach_master(runtime.core)
                self._perform(broker.change_to_master(info["master_epoch"], sss, info["sss_epoch"]))
                if self.tracer is not None:
                    self.tracer.role_step("ChangeToMaster", epoch=self.rm.master_epoch)
            except BaseException as err:
                runtime.close_role()
                broker.detach()
                raise RuntimeError(f"ChangeToMaster failed: {type(err).__name__}: {err}") from err
            return runtime
        for attempt in range(100):          # our last incarnation's port may linger a moment
            try:
                self._switch(make)
                break
            except OSError:                 # a port still held: nothing of the role was taken yet
                if attempt == 99:
                    raise
                time.sleep(0.05)
        self.following = None
        self.log(f"role MASTER epoch {self.rm.master_epoch} from offset {self.rm.log_end_offset} "
                 f"({'the log this process holds: no recovery' if taken[0] is not None else 'its files recovered again'}) "
                 f"sss {sorted(self.rm.sss)} epochs {list(self.rm.epoch_cache.entries)} {at_ms}")

    def _become_slave(self, info: dict) -> None:
        """ChangeToSlave: a ReplicaRuntime following the new master, its FollowerCore starting
        from our epochs; the handshake (and any cut) happens on the HA connection."""
        master = broker_name(info["master_id"])
        tracer = self.tracer
        stops = self.broker.stops_serving_for(master)
        if tracer is not None and not stops:
            self.proc.call(tracer.hold)
        try:
            if stops:
                # a demoted master takes no put from here on; its last answers follow its ChangeToSlave
                # (held from the same step of the loop that closes it)
                self._stop_runtime(hold=tracer is not None)
            was = self.rm.master_epoch
            self._perform(self.broker.change_to_slave(master, info["master_epoch"]))
            if tracer is not None:
                tracer.role_step("ChangeToSlave", epoch=self.rm.master_epoch, master=master)
        finally:
            if tracer is not None:
                self.proc.call(tracer.release)
        if self.rm.master_epoch != was:
            self.log(f"role SLAVE of {master} epoch {self.rm.master_epoch} at_ms={time.monotonic() * 1000:.1f}")

    def _follow(self) -> None:
        """Start following the master the metadata names, once its address is known."""
        master = self.rm.master_id
        addr = self.addresses.get(broker_id_of(master))
        if addr is None:
            return
        opts, rm = self.opts, self.rm
        ropts = ReplicaOptions(directory=opts.directory, name=self.me, master=(addr[0], addr[2]),
                               segment_size=opts.config.mapped_file_size_commit_log,
                               heartbeat_interval_ms=opts.heartbeat_interval_ms, peer_secret=opts.peer_secret)
        attach, written = self.broker.attach_follower, None
        if self.tracer is not None:
            tracer = self.tracer
            attach = lambda replica: tracer.traced_follower(self.broker.attach_follower(replica))   # noqa: E731
            written = tracer.written
        setup = FollowerSetup(attach, self.epoch_path, self.check_order, written)
        taken: list = []

        def make() -> ReplicaRuntime:
            taken.append(self.broker.take_held())
            try:
                return ReplicaRuntime(ropts, log=lambda m: self.log(f"[slave] {m}"), follower=setup, held=taken[0],
                                      loop=self.proc.role_loop())
            except BaseException:
                self.broker.detach()        # no runtime runs the follower it was given
                raise
        runtime = self._switch(make)
        self.following = master
        self.log(f"following {master} from offset {runtime.recovery.end_offset} "
                 f"({'the log this process holds: no recovery' if taken[0] is not None else 'its files recovered again'}), "
                 f"epochs {list(rm.epoch_cache.entries)}")

    # ------------------------------------------------------------------ the SyncStateSet

    def _on_master_loop(self, fn: Callable[[], object]) -> object:
        """``fn`` (a BrokerCore master_* step) on the loop thread, where the cores change."""
        return self.proc.call(fn)

    async def _maintain_sss(self, client: ControllerClient, info: dict) -> None:
        """checkSyncStateSetAndDoReport: the metadata's SyncStateSet, then the policy's check
        (ReplicasManager.check_sync_state_set, reference/failover/sss_policy.py) on the
        master's own acks; a proposal goes to the controller and its answer back to the core."""
        rm, opts = self.rm, self.opts

        def names(metadata: dict) -> frozenset[str]:
            return frozenset(broker_name(b) for b in metadata["sync_state_set"])

        def master_of(metadata: dict) -> str | None:
            return None if metadata["master_id"] == NO_MASTER else broker_name(metadata["master_id"])
        broker = self.broker
        tracer = self.tracer

        def traced(decide: Callable[[], object]) -> Callable[[], object]:
            """A SyncStateSet step on the loop thread, with its labels written in the same step."""
            def step():
                if tracer is None:
                    return decide()
                tracer.drain()
                sss_epoch = rm.sss_epoch
                out = decide()
                if rm.sss_epoch != sss_epoch:
                    tracer.role_step("ChangeSyncStateSet")
                for e in out if isinstance(out, tuple) else ():
                    if e.action != "Resend":      # a resent proposal is the same spec proposal
                        tracer.role_step(e.action, member=e.member)
                return out
            return step
        # the core's steps under the role lock, the controller's calls outside it: a demotion never
        # waits on a proposal's answer (a partition may hold it for a call timeout)
        async with self._roles:
            if rm.role != MASTER or self.runtime is None:
                return
            broker.peers = self._others()
            self._on_master_loop(traced(lambda: broker.master_sync_state_set(master_of(info), info["master_epoch"],
                                                                             names(info), info["sss_epoch"])))
            now_ms = int(time.monotonic() * 1000)
            proposals = self._on_master_loop(traced(lambda: broker.master_check_sync_state_set(now_ms)))
            epochs = rm.master_epoch, rm.sss_epoch
        for e in proposals:
            assert isinstance(e, bfx.ProposeSyncStateSet), e
            reply = await asyncio.wait_for(client.alter(opts.group, opts.broker_id, epochs[0], epochs[1],
                                                        {broker_id_of(n) for n in e.sss}), CONTROLLER_CALL_TIMEOUT_S)
            accepted = reply["code"] == SUCCESS and reply["info"] is not None
            now = reply["info"] if accepted else \
                (await asyncio.wait_for(client.get_replica_info(opts.group), CONTROLLER_CALL_TIMEOUT_S))["info"]
            if now is None:
                continue
            async with self._roles:
                if rm.role != MASTER or self.runtime is None or rm.master_epoch != epochs[0]:
                    self.log(f"AlterSyncStateSet {sorted(e.sss)} answered {reply['code']} after a role change: "
                             "left to the next metadata sync")
                    return
                self._on_master_loop(traced(lambda: broker.master_alter_answered(accepted, master_of(now),
                                                                                 now["master_epoch"], names(now),
                                                                                 now["sss_epoch"])))
            self.log(f"{e.action} {e.member}: SyncStateSet {sorted(rm.sss)} (sssEpoch {rm.sss_epoch})" if accepted else
                     f"AlterSyncStateSet {sorted(e.sss)} ({e.action} {e.member}) refused: {reply['code']} "
                     f"{reply.get('reason')}")

    # ------------------------------------------------------------------ the controller

    async def _heartbeats(self, client: ControllerClient) -> None:
        """BrokerHeartbeat on its own timer, beside the controller calls of ``_tick`` (a role change
        waits on those), so a broker changing role never looks dead to the controller."""
        opts = self.opts
        while client.error is None and not self.stopping:
            try:
                # read on the loop thread, where the cores change: one consistent report
                report = await asyncio.wait_for(asyncio.wrap_future(self.proc.submit(self.broker.heartbeat_report)),
                                                CONTROLLER_CALL_TIMEOUT_S)
            except asyncio.TimeoutError:
                continue          # our own loop busy (a role change): the controller connection is fine
            try:
                reply = await asyncio.wait_for(client.heartbeat(opts.group, opts.broker_id, epoch=report.epoch,
                                                                max_offset=report.max_offset,
                                                                confirm_offset=report.confirm_offset,
                                                                address=opts.address), CONTROLLER_CALL_TIMEOUT_S)
            except (ControllerClientError, asyncio.TimeoutError) as err:
                # this task ends here: so must the connection, or the broker stops heartbeating while
                # its calls still work, and the controller counts it dead for good (a partition that held
                # the controller's answers past CONTROLLER_CALL_TIMEOUT_S did this: issue 38).  Closed,
                # the next call fails and the node's loop connects again, with a new heartbeat task.
                if client.error is None:
                    self.log(f"heartbeat failed: {type(err).__name__}: {err}; reconnecting")
                    await client.close()
                return
            if reply["code"] == CONTROLLER_NOT_LEADER:
                # several controllers: this one cannot reach the group's owner (or lost its lease);
                # drop it, and the node's loop moves to the next
                self.log(f"heartbeat answered {reply['code']}: {reply.get('reason')}; moving to another controller")
                await client.close()
                return
            await asyncio.sleep(opts.heartbeat_interval_ms / 1000)

    async def _tick(self, client: ControllerClient) -> None:
        opts, rm = self.opts, self.rm
        if self.runtime_failure is not None:
            raise SlaveStopped(self.runtime_failure)
        reply = await asyncio.wait_for(client.get_replica_info(opts.group), CONTROLLER_CALL_TIMEOUT_S)
        if reply["code"] == CONTROLLER_NOT_LEADER:
            raise ControllerClientError(f"{reply['code']}: {reply.get('reason')}")
        info = reply["info"]
        if info is None:
            return
        if info["master_id"] == NO_MASTER:
            reply = await asyncio.wait_for(client.elect(opts.group), CONTROLLER_CALL_TIMEOUT_S)   # brokerElect
            info = reply["info"] or info
        if (problem := metadata_past_bounds(info)) is not None:
            # the controller is network input: a group larger than a master can serve is refused here,
            # with a log line, never by the cores' assertions (MasterCore.change_sync_state_set)
            self.log(f"controller metadata refused: {problem}")
            return
        addresses = {int(b): parse_node_address(a) for b, a in info.get("addresses", {}).items()}
        others = tuple(broker_name(b) for b in sorted(addresses) if b != opts.broker_id)
        if (problem := self.broker.peers_problem(others)) is not None:
            self.log(f"controller metadata refused: {problem}")
            return
        self.addresses = addresses
        async with self._roles:
            self.metadata = info
            change = rm.role_named(broker_name(info["master_id"]) if info["master_id"] != NO_MASTER else None,
                                   info["master_epoch"])
            if change == MASTER:
                await asyncio.to_thread(self._become_master, info)
            elif change == SLAVE:
                await asyncio.to_thread(self._become_slave, info)
            if rm.role == SLAVE and rm.master_id is not None and self.following is None:
                await asyncio.to_thread(self._follow)       # its log's recovery takes a while

    async def _sss_checks(self, client: ControllerClient) -> None:
        """checkSyncStateSetAndDoReport on its own timer, as ReplicasManager schedules it apart from the
        metadata sync: a master the controller cannot hear still checks its SyncStateSet and sends its
        proposal (the spec's Shrink/ExpandSyncStateSet need no reachability; only the controller's
        AlterSyncStateSet does), so a proposal may reach the controller long after it was made."""
        while client.error is None and not self.stopping:
            if self.metadata is not None:
                try:
                    await self._maintain_sss(client, self.metadata)
                except (ControllerClientError, asyncio.TimeoutError) as err:
                    self.log(f"SyncStateSet report failed: {type(err).__name__}: {err}")
            await asyncio.sleep(self.opts.heartbeat_interval_ms / 1000)

    async def run(self) -> None:
        opts = self.opts
        controllers = (opts.controller, *opts.other_controllers)
        at = 0
        deadline = time.monotonic() + CONTROLLER_CONNECT_TIMEOUT_S
        client = heartbeats = sss_checks = None
        self._roles = asyncio.Lock()
        self._start_loop()
        try:
            while not self.stopping:
                for task in (heartbeats, sss_checks):
                    if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
                        raise task.exception()     # a core's assertion in a timer task stops the node, as in _tick
                host, port = controllers[at % len(controllers)]
                if client is None or client.error is not None:
                    try:
                        client = await ControllerClient.connect(host, port, secret=opts.peer_secret)
                        reply = await asyncio.wait_for(client.register(opts.group, opts.broker_id,
                                                                       address=opts.address), CONTROLLER_CALL_TIMEOUT_S)
                        if reply["code"] != SUCCESS:     # not registered: another controller, or later
                            raise ControllerClientError(f"register answered {reply['code']}: {reply['reason']}")
                        self.log(f"registered with the controller {host}:{port}")
                        for task in (heartbeats, sss_checks):     # the last connection's, if still running
                            if task is not None:
                                task.cancel()
                        heartbeats = asyncio.create_task(self._heartbeats(client))
                        sss_checks = asyncio.create_task(self._sss_checks(client))
                    except PeerAuthError as err:        # retrying cannot help: the secret is the input's
                        raise ConfigError(f"--peer-secret-file: the controller {host}:{port} refused this node: "
                                          f"{err}") from None
                    except (OSError, ControllerClientError, asyncio.TimeoutError) as err:
                        if client is not None:
                            await client.close()
                        client = None
                        at += 1
                        if time.monotonic() > deadline and self.runtime is None:
                            raise OSError(f"controller {host}:{port}: {err}") from None
                        await asyncio.sleep(opts.heartbeat_interval_ms / 1000 / len(controllers))
                        continue
                try:
                    await self._tick(client)
                except (ControllerClientError, asyncio.TimeoutError) as err:
                    self.log(f"controller call failed: {err}; reconnecting")
                    await client.close()
                    client = None
                    at += 1
                await asyncio.sleep(opts.heartbeat_interval_ms / 1000)
        finally:
            for task in (heartbeats, sss_checks):
                if task is not None:
                    task.cancel()
            if client is not None:
                await client.close()
            self._stop_loop()


def _ports_free(opts: NodeOptions) -> None:
    """OSError (EADDRINUSE) now when a port another process holds is named: the node binds its ports
    only once the controller gives it a role, so it registered, was made master, then died (as a
    broker master that cannot listen, the caller's exit 3)."""
    import socket

    for port in (p for p in dict.fromkeys((opts.port, opts.ha_port)) if p != 0):     # in this order: the message
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # as the servers bind
            try:
                probe.bind((opts.host, port))
            except OSError as err:
                raise OSError(err.errno, f"cannot listen on {opts.host}:{port}: {err.strerror}") from None


def serve_node(opts: NodeOptions) -> int:
    """`ackorder broker node`: run until SIGTERM or SIGINT."""
    import signal

    from reference.real import netroute

    netroute.load()           # a malformed route map is said now (exit 2), not at the first connection
    _ports_free(opts)
    node = Node(opts, log=lambda m: print(m, flush=True))
    print(f"node {node.me} serving host={opts.host} port={opts.port} ha_port={opts.ha_port}", flush=True)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await node.run()
        except asyncio.CancelledError:
            pass
    asyncio.run(main())
    return 0
