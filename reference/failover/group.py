"""A broker group under controller-driven failover, simulated step by step:
the reference's ``ControllerCore`` and one ``ReplicasManager`` per broker,
wired together at the granularity of the failover spec's actions.

Every method named after an action of tla/AckOrderFailover.tla performs that
action on the concrete parts (controller requests and replies, role changes,
the AutoSwitch handshake and its truncation, transfers, acks, crashes, power
loss, restarts, cuts between a broker and the controller) and returns the
spec's label, or None when the action is not enabled.  ``abstract()`` maps
the concrete state onto the spec's ``FState``; the refinement check
(reference/failover/refine.py) asks the twin whether each step is one of its
steps.  The group holds no protocol rule of its own: who may do what is
decided by the cores; the group only moves requests, replies, records and
the disks' contents between them (the simulator's network and disks).

Logs are in records (offset = number of records before), like the spec's;
a record is the id of the request that put it.  The controller's metadata
store is made durable at once (its own durability is tested in
reference/tests/test_controller_*.py).  Liveness: before every controller
request the virtual clock jumps past the heartbeat timeout and every broker
that is up and reachable heartbeats, so the controller's view of who is
alive is the spec's Alive(b) when it decides.
"""

from __future__ import annotations

import attrs

from reference.failover import broker_effects as bfx
from reference.failover import effects as cfx
from reference.failover.controller import CONTROLLER_BUG_NAMES, ControllerConfig, ControllerCore
from reference.failover.epochfile import EpochFileCache
from reference.failover.roles import MASTER, SLAVE, ReplicasManager
from reference.failover.sss_policy import SyncStateSetPolicy
from spec.failover.config import FailoverConfig
from spec.failover.state import CLIENT_TIMEOUT, FLUSH_SLAVE_TIMEOUT, PUT_OK, WAITING, FCounters, FRequest, FState

GROUP = "g"
HEARTBEAT_TIMEOUT_MS = 10_000
SSS_CHECK_INTERVAL_MS = 5_000        # checkSyncStateSetAndDoReport's period
SIM_MAX_NOT_CATCHUP_MS = 3 * SSS_CHECK_INTERVAL_MS     # haMaxTimeSlaveNotCatchup in the simulator
SIM_ALTER_TIMEOUT_MS = 1 << 62       # never: an unanswered alter is AlterSyncStateSet's, enabled while pending
MAX_REQUESTS = 100_000          # bound on the requests one run keeps


@attrs.define
class Broker:
    """One broker's process (``rm``; None while down) and what survives it: the log in
    the page cache, records a non-durable truncation left on disk, the epoch file as
    written (``epoch_file``) and as made durable (``epoch_file_durable``), and the
    confirmOffset checkpoint."""
    name: str
    broker_id: int
    rm: ReplicasManager | None
    log: list[int] = attrs.Factory(list)
    stale_tail: list[int] = attrs.Factory(list)
    epoch_file: tuple = ()
    epoch_file_durable: tuple = ()
    confirm_checkpoint: int = 0
    reachable: bool = True
    linked: bool = False            # this slave's HA connection to the master it follows is up
    alter_pending: bool = False     # an AlterSyncStateSet of this master is on its way to the controller

    @property
    def up(self) -> bool:
        return self.rm is not None

    def fenced_out(self) -> bool:
        """A restarted broker follows nobody until the controller names its role."""
        return self.rm is not None and self.rm.fenced


@attrs.define
class Request:
    off: int
    status: str
    epoch: int
    master: str


class FailoverGroup:
    def __init__(self, cfg: FailoverConfig) -> None:
        self.cfg = cfg
        self.names = cfg.brokers
        self.ids = {b: k + 1 for k, b in enumerate(self.names)}
        self.by_id = {k + 1: b for k, b in enumerate(self.names)}
        self.broker_bugs = frozenset(b for b in cfg.bugs if b not in CONTROLLER_BUG_NAMES)
        self.now_ms = 0
        # The controller's clock jumps past its heartbeat timeout before every request (see the
        # module doc); the masters' SyncStateSet checks run on a clock of their own, so how long
        # a member lags is the schedule's choice, not a side effect of controller traffic.
        self.check_clock_ms = 0
        self.req_ids = 0
        self.controller = ControllerCore(ControllerConfig(controller_broker_heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
                                                          design="pipelined",
                                                          bugs=frozenset(cfg.bugs) & set(CONTROLLER_BUG_NAMES)),
                                         self.now_ms)
        self.brokers: dict[str, Broker] = {}
        self.requests: list[Request] = []
        self.pc_lost: set[int] = set()
        self.counters = {a.name: 0 for a in attrs.fields(FCounters)}
        # Init: the initial master registers first (the controller makes it master of epoch 1).
        for b in sorted(self.names, key=lambda b: b != cfg.initial_master):
            rm = ReplicasManager.initial(b, cfg.initial_master, bugs=self.broker_bugs, policy=self._policy(b))
            broker = self.brokers[b] = Broker(b, self.ids[b], rm)
            self._perform(broker, () if rm.role == SLAVE else (bfx.WriteEpochFile(rm.epoch_cache.entries, True),))
            broker.epoch_file_durable = broker.epoch_file
            reply = self._ask(self.controller.register_broker, GROUP, self.ids[b])
            assert reply.code == cfx.SUCCESS, reply
        # The slaves' HA clients stay READY: each connects (and handshakes) in its ReplicaConnect.
        # Starting them here left them in HANDSHAKE with no reply to come, so no initial slave
        # could connect before a crash or a role change.

    # ------------------------------------------------------------------ plumbing

    @staticmethod
    def _policy(b: str) -> SyncStateSetPolicy:
        return SyncStateSetPolicy(b, max_not_catchup_ms=SIM_MAX_NOT_CATCHUP_MS, alter_timeout_ms=SIM_ALTER_TIMEOUT_MS)

    def _ask(self, request, *args):
        """One controller request; its metadata made durable at once; its reply."""
        self.req_ids += 1
        req_id = self.req_ids
        request(req_id, *args, now_ms=self.now_ms)
        reply = None
        for _ in range(8):
            effects = self.controller.take_effects()
            if not effects:
                break
            for e in effects:
                if isinstance(e, cfx.PersistMetadata):
                    self.controller.metadata_durable(e.token, self.now_ms)
                elif isinstance(e, cfx.Reply) and e.req_id == req_id:
                    reply = e
        assert reply is not None, f"no reply to request {req_id}"
        return reply

    def _heartbeats(self) -> None:
        """The clock jumps past the heartbeat timeout; the live, reachable brokers heartbeat."""
        self.now_ms += HEARTBEAT_TIMEOUT_MS + 1
        for b in self.brokers.values():
            if b.up and b.reachable:
                self.req_ids += 1
                rm = b.rm
                self.controller.broker_heartbeat(self.req_ids, GROUP, b.broker_id, self.now_ms,
                                                 epoch=rm.epoch_cache.last_epoch(), max_offset=rm.log_end_offset,
                                                 confirm_offset=rm.confirm_offset)
        for e in self.controller.take_effects():
            assert isinstance(e, cfx.Reply) and e.code == cfx.SUCCESS, e

    def _info(self) -> cfx.ReplicaInfo:
        self._heartbeats()
        reply = self._ask(self.controller.get_replica_info, GROUP)
        assert reply.code == cfx.SUCCESS, reply
        return reply.info

    def _perform(self, broker: Broker, effects) -> None:
        """A broker's runtime: the effects in order, on its log, disk and links."""
        for e in effects:
            if isinstance(e, bfx.TruncateLog):
                # The disk holds log + stale_tail; a cut only in memory moves the cut
                # records in front of what an earlier such cut left behind.
                cut = broker.log[e.offset:]
                del broker.log[e.offset:]
                broker.stale_tail = [] if e.on_disk else cut + broker.stale_tail
            elif isinstance(e, bfx.FsyncLog):
                pass                # the spec's power loss keeps any prefix: fsync is not modelled
            elif isinstance(e, bfx.WriteEpochFile):
                broker.epoch_file = tuple(e.entries)
                if e.durable:
                    broker.epoch_file_durable = broker.epoch_file
            elif isinstance(e, (bfx.ReportOffset, bfx.StartHaClient)):
                pass                # the report is ReplicaAck's; the client connects in ReplicaConnect
            elif isinstance(e, bfx.StopHaClient):
                self._unlink(broker)
            elif isinstance(e, bfx.CloseConnections):
                for s in e.slave_ids:
                    self._unlink(self.brokers[s])
            elif isinstance(e, bfx.HandshakeFailed):
                pass
            elif isinstance(e, bfx.ProposeSyncStateSet):
                # the request is on its way to the controller (AlterSyncStateSet takes it there)
                assert e.action != "Resend", "the simulator never gives up an alter: SIM_ALTER_TIMEOUT_MS"
                broker.alter_pending = True
                self.counters["sssProposal"] += 1
            else:
                raise AssertionError(f"unexpected effect {e!r}")
        if broker.rm is not None:
            broker.confirm_checkpoint = broker.rm.confirm_offset

    def _unlink(self, slave: Broker) -> None:
        """The HA connection between ``slave`` and the master it follows goes down, both ends."""
        if not slave.linked:
            return
        slave.linked = False
        for m in self.brokers.values():
            if m.up and m.rm.role == MASTER and slave.name in m.rm.connections:
                m.rm.slave_disconnected(slave.name)
        if slave.rm is not None:
            slave.rm.follower_disconnected()

    def _master_of(self, slave: Broker) -> Broker | None:
        """The broker a linked slave follows, when it is up and acting as master."""
        m = self.brokers.get(slave.rm.master_id) if slave.rm and slave.rm.master_id else None
        return m if m is not None and m.up and m.rm.role == MASTER else None

    # ------------------------------------------------------------------ producer and GroupTransferService

    def put(self, b: str) -> str | None:
        """Put(b): a producer's message at a broker that believes it is master."""
        broker = self.brokers[b]
        if not (broker.up and broker.rm.role == MASTER):
            return None
        assert len(self.requests) < MAX_REQUESTS
        rid = len(self.requests) + 1
        broker.log.append(rid)
        broker.stale_tail = broker.stale_tail[1:]
        epoch = broker.rm.put(len(broker.log))
        self.requests.append(Request(len(broker.log), WAITING, epoch, b))
        self._perform(broker, ())
        return f"Put({b})"

    def respond(self, i: int) -> str | None:
        """Respond(i) / Timeout(i): the master's GroupTransferService answers a waiting request."""
        r = self.requests[i - 1]
        broker = self.brokers[r.master]
        if r.status != WAITING or not broker.up:
            return None
        if broker.rm.can_respond(r.epoch, r.off):
            r.status = PUT_OK
            return f"Respond({i})"
        return None

    def timeout(self, i: int) -> str | None:
        r = self.requests[i - 1]
        broker = self.brokers[r.master]
        if r.status != WAITING or (broker.up and broker.rm.can_respond(r.epoch, r.off)):
            return None
        r.status = FLUSH_SLAVE_TIMEOUT
        return f"Timeout({i})"

    # ------------------------------------------------------------------ HA

    def replica_connect(self, b: str) -> str | None:
        """ReplicaConnect(b): the AutoSwitch handshake and the slave's crash-safe cut."""
        slave = self.brokers[b]
        if not (slave.up and slave.rm.role == SLAVE and not slave.fenced_out() and not slave.linked):
            return None
        master = self._master_of(slave)
        if master is None:
            return None
        rm = slave.rm
        if rm.client is None or rm.client.state != "READY":
            return None
        self._perform(slave, rm.start_following())
        reply = master.rm.slave_connected(b, rm.epoch_cache.entries, rm.log_end_offset)
        if reply is None:
            rm.follower_disconnected()
            return None
        self._perform(slave, rm.handshake_reply(reply))
        slave.linked = True
        self._perform(master, ())
        return f"ReplicaConnect({b})"

    def _link(self, b: str) -> tuple[Broker, Broker] | None:
        """(slave, master) when ``b`` is linked to a live master that holds its connection."""
        slave = self.brokers[b]
        if not (slave.up and slave.linked):
            return None
        master = self._master_of(slave)
        if master is None or b not in master.rm.connections:
            return None
        return slave, master

    def transfer(self, b: str) -> str | None:
        """Transfer(b): the next record to a linked slave, with its epoch label."""
        if (link := self._link(b)) is None:
            return None
        slave, master = link
        batch = master.rm.next_transfer(b, 1)
        if batch is None:
            return None
        assert batch.offset == len(slave.log), (batch, len(slave.log))
        slave.log.extend(master.log[batch.offset:batch.end])
        slave.stale_tail = slave.stale_tail[batch.end - batch.offset:]
        self._perform(slave, slave.rm.transfer_received(batch))
        return f"Transfer({b})"

    def replica_ack(self, b: str) -> str | None:
        """ReplicaAck(b): the slave reports what it holds; the master may move confirmOffset."""
        if (link := self._link(b)) is None:
            return None
        slave, master = link
        if master.rm.connections[b].ack_offset >= slave.rm.log_end_offset:
            return None
        self._perform(master, master.rm.slave_ack(b, slave.rm.log_end_offset))
        return f"ReplicaAck({b})"

    def replica_disconnect(self, b: str) -> str | None:
        slave = self.brokers[b]
        if not slave.linked:
            return None
        self._unlink(slave)
        self.counters["disconnect"] += 1
        return f"ReplicaDisconnect({b})"

    # ------------------------------------------------------------------ SyncStateSet

    def check_sync_state_set(self, m: str, advance_ms: int = SSS_CHECK_INTERVAL_MS) -> str | None:
        """ShrinkSyncStateSet(m, s) / ExpandSyncStateSet(m, s): ``advance_ms`` pass on the
        virtual clock, then master m's periodic check (checkSyncStateSetAndDoReport) runs the
        policy (reference/failover/sss_policy.py, the node's too) and proposes what it says."""
        master = self.brokers[m]
        if not (master.up and master.rm.role == MASTER):
            return None
        assert advance_ms >= 0, advance_ms
        self.check_clock_ms += advance_ms
        effects = master.rm.check_sync_state_set(self.check_clock_ms)
        self._perform(master, effects)
        proposal = next((e for e in effects if isinstance(e, bfx.ProposeSyncStateSet)), None)
        if proposal is None:
            return None
        return f"{proposal.action}({m},{proposal.member})"

    def alter_sync_state_set(self, m: str) -> str | None:
        """AlterSyncStateSet(m): the controller's compare-and-set; a refusal clears the proposal."""
        master = self.brokers[m]
        if not (master.alter_pending and master.up and master.reachable):
            return None
        master.alter_pending = False
        rm = master.rm
        self._heartbeats()
        reply = self._ask(self.controller.alter_sync_state_set, GROUP, self.ids[m], rm.master_epoch, rm.sss_epoch,
                          frozenset(self.ids[x] for x in rm.remote_sss))
        if reply.code != cfx.SUCCESS:
            rm.alter_refused()
            self._perform(master, ())
        return f"AlterSyncStateSet({m})"

    def change_sync_state_set(self, m: str) -> str | None:
        """ChangeSyncStateSet(m): the master learns the controller's SyncStateSet."""
        master = self.brokers[m]
        if not (master.up and master.reachable and master.rm.role == MASTER):
            return None
        info = self._info()
        if self.by_id.get(info.master_id) != m:
            return None
        sss = frozenset(self.by_id[x] for x in info.sync_state_set)
        if not master.rm.change_sync_state_set(info.master_epoch, sss, info.sss_epoch):
            return None
        master.alter_pending = False
        self._perform(master, ())
        return f"ChangeSyncStateSet({m})"

    # ------------------------------------------------------------------ elections and role changes

    def elect_master(self) -> str | None:
        """ElectMaster: the controller's inactive-broker scan."""
        before = len(self.controller.steps)
        self._heartbeats()
        self.controller.tick(self.now_ms)
        for e in self.controller.take_effects():
            if isinstance(e, cfx.PersistMetadata):
                self.controller.metadata_durable(e.token, self.now_ms)
        self.controller.take_effects()
        elections = [s for s in self.controller.steps[before:] if s.action == "ElectMaster"]
        assert len(elections) <= 1, elections
        if not elections:
            return None
        self.counters["election"] += 1
        return "ElectMaster"

    def change_role(self, b: str) -> str | None:
        """ChangeToMaster(b) / ChangeToSlave(b): the broker follows the controller's metadata."""
        broker = self.brokers[b]
        if not (broker.up and broker.reachable):
            return None
        info = self._info()
        master = self.by_id.get(info.master_id)
        if master is None or info.master_epoch <= broker.rm.master_epoch:
            return None
        rm = broker.rm
        if master == b:
            sss = frozenset(self.by_id[x] for x in info.sync_state_set)
            was_slave = rm.role == SLAVE
            if was_slave:
                self._unlink(broker)
            effects = rm.change_to_master(info.master_epoch, sss, info.sss_epoch)
            broker.alter_pending = False
            self._perform(broker, effects)
            return f"ChangeToMaster({b})"
        if rm.role == SLAVE and rm.master_id != master:
            self._unlink(broker)
        effects = rm.change_to_slave(master, info.master_epoch)
        broker.alter_pending = False
        self._perform(broker, effects)
        return f"ChangeToSlave({b})"

    # ------------------------------------------------------------------ failures

    def _die(self, broker: Broker) -> None:
        if broker.rm.role == MASTER:
            for s in self.brokers.values():
                if s is not broker and s.linked and s.rm is not None and s.rm.master_id == broker.name:
                    self._unlink(s)
        else:
            self._unlink(broker)
        broker.confirm_checkpoint = broker.rm.confirm_offset
        broker.rm = None
        broker.linked = broker.alter_pending = False
        for r in self.requests:
            if r.status == WAITING and r.master == broker.name:
                r.status = CLIENT_TIMEOUT

    def broker_crash(self, b: str) -> str | None:
        broker = self.brokers[b]
        if not broker.up:
            return None
        self._die(broker)
        self.counters["brokerCrash"] += 1
        return f"BrokerCrash({b})"

    def broker_power_loss(self, b: str, keep: int, lose_epoch_write: bool) -> str | None:
        """BrokerPowerLoss(b): the first ``keep`` records survive; the epoch file as made durable."""
        broker = self.brokers[b]
        if not broker.up:
            return None
        self._die(broker)
        keep = min(keep, len(broker.log))
        self.pc_lost |= set(broker.log[keep:])
        del broker.log[keep:]
        broker.stale_tail = []
        if lose_epoch_write and broker.epoch_file != broker.epoch_file_durable and broker.epoch_file:
            # The epoch file was written without fsync (BugEpochFileNotDurable): its newest
            # entry is lost with the power (the spec's ``last_lost``).
            broker.epoch_file = broker.epoch_file[:-1]
        broker.epoch_file_durable = broker.epoch_file
        self.counters["powerLoss"] += 1
        return f"BrokerPowerLoss({b})"

    def broker_restart(self, b: str) -> str | None:
        """BrokerRestart(b): recovery, the confirmOffset clamp; fenced until it learns its role."""
        broker = self.brokers[b]
        if broker.up or self.by_id.get(self.controller.groups[GROUP].master_id) == b:
            return None
        broker.log.extend(broker.stale_tail)
        broker.stale_tail = []
        broker.rm = ReplicasManager.recover(b, epoch_cache=EpochFileCache(broker.epoch_file),
                                            log_end_offset=len(broker.log),
                                            checkpoint_confirm_offset=broker.confirm_checkpoint,
                                            bugs=self.broker_bugs, policy=self._policy(b))
        # Recovery drops epoch entries past the log; the file is rewritten to match (and synced).
        broker.epoch_file = broker.epoch_file_durable = broker.rm.epoch_cache.entries
        return f"BrokerRestart({b})"

    def cut_from_controller(self, b: str) -> str | None:
        broker = self.brokers[b]
        if not broker.reachable:
            return None
        broker.reachable = False
        self.counters["cutOff"] += 1
        return f"CutFromController({b})"

    def reconnect_to_controller(self, b: str) -> str | None:
        broker = self.brokers[b]
        if broker.reachable:
            return None
        broker.reachable = True
        return f"ReconnectToController({b})"

    # ------------------------------------------------------------------ the abstraction

    def _recoverable(self, b: Broker) -> tuple:
        """A down broker's epoch cache as its recovery will load it: the file's entries that
        start within the log recovery finds (the spec drops the others at the power loss)."""
        end = len(b.log) + (len(b.stale_tail) if "BugTruncateNotDurable" in self.cfg.bugs else 0)
        return EpochFileCache(b.epoch_file).truncate_beyond(end).entries

    def abstract(self) -> FState:
        """The spec state this concrete state stands for (one field per TLA+ variable)."""
        g = self.controller.groups[GROUP]
        nb = self.cfg.no_broker
        (reachable, up, role, b_master, b_epoch, b_sss, b_sss_epoch, b_remote_sss, alter_pending, blog, epoch_cache,
         confirm, stale_tail, connected, ack, cursor) = zip(*(self._abstract_broker(self.brokers[b], nb)
                                                             for b in self.names))
        return FState(
            masterId=self.by_id.get(g.master_id, nb), masterEpoch=g.master_epoch,
            syncStateSet=frozenset(self.by_id[x] for x in g.sync_state_set), sssEpoch=g.sss_epoch,
            reachable=reachable, up=up, role=role, bMasterId=b_master, bEpoch=b_epoch, bSSS=b_sss,
            bSssEpoch=b_sss_epoch, bRemoteSSS=b_remote_sss, alterPending=alter_pending, blog=blog,
            epochCache=epoch_cache, confirm=confirm, staleTail=stale_tail, connected=connected, ack=ack,
            cursorEpoch=cursor,
            reqs=tuple(FRequest(r.off, r.status, r.epoch, r.master) for r in self.requests),
            inv_pcLost=frozenset(self.pc_lost),
            aux_ctrs=FCounters(**self.counters),
        )

    def _abstract_broker(self, b: Broker, nb: str) -> tuple:
        """One broker's column of every per-broker variable, in abstract()'s order (one pass
        over the broker: the mapping runs after every step of a checked run)."""
        rm = b.rm
        if rm is None:
            cache = self._recoverable(b)
            return (b.reachable, False, SLAVE, nb, 0, frozenset(), 0, frozenset(), b.alter_pending, tuple(b.log),
                    tuple(tuple(e) for e in cache), b.confirm_checkpoint, tuple(b.stale_tail), False, 0, 0)
        master = rm.role == MASTER
        m = self._master_of(b) if b.linked else None
        conn = m.rm.connections.get(b.name) if m is not None else None
        return (b.reachable, True, rm.role, rm.master_id or nb, rm.master_epoch,
                rm.sss if master else frozenset(), rm.sss_epoch if master else 0,
                rm.remote_sss if master else frozenset(), b.alter_pending, tuple(b.log),
                tuple(tuple(e) for e in rm.epoch_cache.entries), rm.confirm_offset, tuple(b.stale_tail),
                b.linked, conn.ack_offset if conn is not None else 0, conn.cursor_epoch if conn is not None else 0)

