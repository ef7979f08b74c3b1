"""A broker group under controller-driven failover over bytes: the ``BrokerCore``s that
``ackorder broker node`` runs (a ``MasterCore`` or a ``FollowerCore`` each, over segment files),
and the ``ControllerCore``, wired by a simulated network and disks.

One method per action of tla/AckOrderFailover.tla (the seeded simulator, drive.py, and the
Hypothesis machine, stateful_tests/failover_machine.py, drive them); ``abstract()`` maps the bytes
onto the spec's ``FState``.  The group decides nothing: the cores do; the group moves frames,
performs effects on files and answers the controller.  (Its environment's choices — a process
dies, power fails, a link drops, time passes — are the spec's environment actions.)

One concrete step may be several spec steps, because the cores act on their inputs at once:
an ACK that covers requests is ReplicaAck, then each Respond; a put with a slave waiting for
data is Put, then Transfer.  A method returns the labels joined by ``;`` in the order the cores
emitted them, and the refinement check (refine.spec_path) asks the twin for a path through
them.  Two choices make the spec's atomic actions the cores' own:

* frames are delivered the moment a core sends them, and the master's send window is one record
  or a few (``send_window_records``): a transfer header carries the master's confirmOffset of
  that instant, as the spec's Transfer reads it, and a slave whose ACKs wait gets no further
  data than the window (a lagging member);
* a slave's ACKs wait in the network until ReplicaAck delivers the latest.

Records are of one size (``RECORD_BYTES``) and every log is laid out alike (``segment_records``
to a segment, then the blank that pads it), so a byte offset names one record count on every
broker (``records_below``, which asserts each offset it maps falls between records).
"""
from __future__ import annotations

import functools

import attrs

from reference import effects as fx
from reference.commitlog import CommitLog
from reference.config import StoreConfig
from reference.failover import broker_effects as bfx
from reference.failover import effects as cfx
from reference.failover.broker import BrokerCore
from reference.failover.controller import CONTROLLER_BUG_NAMES, ControllerConfig, ControllerCore
from reference.failover.epochfile import EpochFileCache
from reference.failover.roles import MASTER, SLAVE
from reference.failover.sss_policy import SyncStateSetPolicy
from reference.master import MasterCore
from reference.record import END_FILE_MIN_BLANK_LENGTH, HEADER_SIZE, Record, scan_log, scan_segment
from reference.replica import ReplicaCore
from reference.status import PutStatus
from spec.failover.config import FailoverConfig
from spec.failover.state import CLIENT_TIMEOUT, FLUSH_SLAVE_TIMEOUT, PUT_OK, WAITING, FCounters, FRequest, FState

GROUP = "g"
HEARTBEAT_TIMEOUT_MS = 10_000
SSS_CHECK_INTERVAL_MS = 5_000        # checkSyncStateSetAndDoReport's period
SIM_MAX_NOT_CATCHUP_MS = 3 * SSS_CHECK_INTERVAL_MS     # haMaxTimeSlaveNotCatchup in the simulator
SIM_ALTER_TIMEOUT_MS = 1 << 62       # never: an unanswered alter is AlterSyncStateSet's, enabled while pending
MAX_REQUESTS = 100_000               # bound on the requests one run keeps
BODY_BYTES = 4
RECORD_BYTES = HEADER_SIZE + BODY_BYTES
SEGMENT_BYTES = 1 << 16             # the default: every run's log fits one segment
BLANK_ROOM_BYTES = 10               # a small segment's room after its last record: the blank that pads it
MAX_SEGMENTS = 4096                 # bound on a broker's segment files in one run (asserted)
NEVER_MS = 1 << 50
SIM_CONFIG = StoreConfig(mapped_file_size_commit_log=SEGMENT_BYTES, max_message_size=64,
                         broker_role="SYNC_MASTER", ack_policy="ALL_IN_SYNC",
                         ha_transfer_batch_size=RECORD_BYTES, ha_send_window_bytes=RECORD_BYTES,
                         ha_housekeeping_interval_ms=NEVER_MS)
MAX_PUMP = 10_000                   # effects one step may cause (a bound, asserted)
MAX_NOTICES = 64                    # the controller's past answers kept for StaleNotice (the newest)


@attrs.define
class ByteBroker:
    """One broker's process (``core``; None while down) and what survives it: its segment
    file (the page cache: a crash keeps it, a power loss keeps a prefix), its epoch file as
    written and as made durable, and the confirmOffset checkpoint."""
    name: str
    broker_id: int
    core: BrokerCore | None
    files: dict[int, bytearray] = attrs.Factory(dict)
    epoch_file: tuple = ()
    epoch_file_durable: tuple = ()
    confirm_checkpoint: int = 0
    reachable: bool = True
    alter_pending: bool = False
    proposal: frozenset = frozenset()   # the SyncStateSet its AlterSyncStateSet in flight proposes
    conn: int | None = None         # as a slave: its HA connection's id while linked
    acks: list = attrs.Factory(list)    # as a slave: its ACKs in flight to the master
    clock_ms: int = 0               # the master core's clock
    down_end: int = 0               # while down: where its log ended (the page cache past it is stale)
    segment_bytes: int = SEGMENT_BYTES

    @property
    def up(self) -> bool:
        return self.core is not None

    @property
    def rm(self):
        return None if self.core is None else self.core.rm

    @property
    def linked(self) -> bool:
        return self.conn is not None

    def fenced_out(self) -> bool:
        return self.core is not None and self.core.rm.fenced

    def records(self) -> list[Record]:
        """The whole records on disk, in order: each segment read from its start (a blank pads it to
        its end and the log goes on in the next), as recovery reads them — the log and, past its
        end, whatever a cut only in memory left there."""
        out: list[Record] = []
        start = 0
        while start in self.files:
            scan = scan_segment(bytes(self.files[start]), start)
            out += scan.records
            if not scan.ends_with_blank or scan.problem:
                break
            start += self.segment_bytes
        return out

    @property
    def log(self) -> list[int]:
        """The records the broker holds (drive.py draws a power loss's prefix from it)."""
        end = log_end(self)
        return [r.key for r in self.records() if r.end <= end]


def records_below(segment_bytes: int, offset: int, what: str) -> int:
    """The spec's offset of byte offset ``offset``: how many records of the group's one layout end at
    or below it.  Every log of the group is laid out alike — records of one size, as many to a
    segment as leave room for the blank that pads it (END_FILE_MIN_BLANK_LENGTH) — so an offset
    names the same record count on every broker, held or not (a checkpoint past a power loss's
    cut).  Every offset the abstraction maps must fall between records."""
    per_segment = (segment_bytes - END_FILE_MIN_BLANK_LENGTH) // RECORD_BYTES
    within = offset % segment_bytes
    assert within % RECORD_BYTES == 0 and within <= per_segment * RECORD_BYTES, \
        f"{what} {offset} falls inside a record (or inside a segment's padding)"
    return (offset // segment_bytes) * per_segment + within // RECORD_BYTES


def log_end(b: ByteBroker) -> int:
    """Where the broker's log ends, in bytes: its machine's end while up, recovery's when down."""
    core = b.core
    if core is None:
        return b.down_end
    if core.master is not None:
        return core.master.log_end_offset()
    if core.follower is not None:
        return core.follower.log_end_offset
    return core.rm.log_end_offset


def _action(method):
    """A spec action's method: no label of an earlier step may be left over (each ends in _done)."""
    @functools.wraps(method)
    def run(self, *args):
        assert not self.labels, f"labels left by an earlier step: {self.labels}"
        return method(self, *args)
    return run


@attrs.define
class ByteRequest:
    off: int                # records up to and including this one (the spec's offset)
    status: str
    epoch: int
    master: str


class FailoverGroup:
    def __init__(self, cfg: FailoverConfig, send_window_records: int = 1, segment_records: int | None = None) -> None:
        """``send_window_records``: how far a slave whose ACKs wait gets ahead of them (one record:
        its data waits with its ACKs; more: its data flows while its ACKs are late).
        ``segment_records``: a segment holds that many records and a blank (logs roll, a lagging
        slave is served from segments read back); None: every log fits one segment."""
        assert 1 <= send_window_records <= 64, send_window_records
        assert segment_records is None or 5 <= segment_records <= 1000, segment_records
        self.cfg = cfg
        self.segment_bytes = SEGMENT_BYTES if segment_records is None else \
            segment_records * RECORD_BYTES + BLANK_ROOM_BYTES
        self.store_cfg = attrs.evolve(SIM_CONFIG, ha_send_window_bytes=send_window_records * RECORD_BYTES,
                                      mapped_file_size_commit_log=self.segment_bytes)
        self.names = cfg.brokers
        self.ids = {b: k + 1 for k, b in enumerate(self.names)}
        self.by_id = {k + 1: b for k, b in enumerate(self.names)}
        self.broker_bugs = frozenset(b for b in cfg.bugs if b not in CONTROLLER_BUG_NAMES)
        self.now_ms = 0
        self.check_clock_ms = 0
        self.req_ids = 0
        self.conn_ids = 0
        self.controller = ControllerCore(ControllerConfig(controller_broker_heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
                                                          design="pipelined",
                                                          bugs=frozenset(cfg.bugs) & set(CONTROLLER_BUG_NAMES)),
                                         self.now_ms)
        self.brokers: dict[str, ByteBroker] = {}
        self.requests: list[ByteRequest] = []
        self.pc_lost: set[int] = set()
        self.counters = {a.name: 0 for a in attrs.fields(FCounters)}
        self.labels: list[str] = []         # the spec steps of the step being taken
        self.notices: list[cfx.ReplicaInfo] = []    # the controller's answers, oldest first (bounded)
        self.stale_notices = 0              # StaleNotice deliveries (refused, or the run fails)
        for b in sorted(self.names, key=lambda b: b != cfg.initial_master):
            core = BrokerCore.initial(b, cfg.initial_master, bugs=self.broker_bugs, policy=self._policy(b))
            broker = self.brokers[b] = ByteBroker(b, self.ids[b], core, segment_bytes=self.segment_bytes)
            if core.rm.role == MASTER:
                self._start_master(broker, None)
                core.resume_master()
                self._pump_master(broker)
                broker.epoch_file = broker.epoch_file_durable = core.rm.epoch_cache.entries
            reply = self._ask(self.controller.register_broker, GROUP, self.ids[b])
            assert reply.code == cfx.SUCCESS, reply

    # ------------------------------------------------------------------ plumbing: the controller

    @staticmethod
    def _policy(b: str) -> SyncStateSetPolicy:
        return SyncStateSetPolicy(b, max_not_catchup_ms=SIM_MAX_NOT_CATCHUP_MS, alter_timeout_ms=SIM_ALTER_TIMEOUT_MS)

    def _ask(self, request, *args):
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
        self.now_ms += HEARTBEAT_TIMEOUT_MS + 1
        for b in self.brokers.values():
            if b.up and b.reachable:
                self.req_ids += 1
                report = b.core.heartbeat_report()
                self.controller.broker_heartbeat(self.req_ids, GROUP, b.broker_id, self.now_ms, epoch=report.epoch,
                                                 max_offset=report.max_offset)
        for e in self.controller.take_effects():
            assert isinstance(e, cfx.Reply) and e.code == cfx.SUCCESS, e

    def _info(self) -> cfx.ReplicaInfo:
        self._heartbeats()
        reply = self._ask(self.controller.get_replica_info, GROUP)
        assert reply.code == cfx.SUCCESS, reply
        return self._noted(reply.info)

    def _noted(self, info: cfx.ReplicaInfo) -> cfx.ReplicaInfo:
        """An answer of the controller, kept: the network may deliver it again, late (StaleNotice)."""
        if not self.notices or self.notices[-1] != info:
            self.notices.append(info)
            del self.notices[:-MAX_NOTICES]
        return info

    # ------------------------------------------------------------------ plumbing: the machines' effects

    def _segment(self, b: ByteBroker, start: int) -> bytearray:
        assert start % self.segment_bytes == 0 and start < MAX_SEGMENTS * self.segment_bytes, start
        return b.files.setdefault(start, bytearray(self.segment_bytes))

    def _zero_from(self, b: ByteBroker, offset: int) -> None:
        """SegmentStore.zero_tail: the segment holding ``offset`` zeroed from it, later ones gone."""
        holding = offset - offset % self.segment_bytes
        for start in [start for start in b.files if start > holding]:
            del b.files[start]
        if holding in b.files:
            b.files[holding][offset - holding:] = bytes(self.segment_bytes - (offset - holding))

    def _perform_role(self, b: ByteBroker, effects) -> None:
        """BrokerCore's role-change and SyncStateSet effects (broker_effects.py)."""
        for e in effects:
            if isinstance(e, bfx.WriteEpochFile):
                b.epoch_file = tuple(e.entries)
                if e.durable:
                    b.epoch_file_durable = b.epoch_file
            elif isinstance(e, bfx.ProposeSyncStateSet):
                assert e.action != "Resend", "the simulator never gives up an alter: SIM_ALTER_TIMEOUT_MS"
                b.alter_pending, b.proposal = True, frozenset(e.sss)
                self.counters["sssProposal"] += 1
                self.labels.append(f"{e.action}({b.name},{e.member})")
            elif isinstance(e, (bfx.StartHaClient, bfx.StopHaClient, bfx.CloseConnections, bfx.ReportOffset,
                                bfx.HandshakeFailed, bfx.FsyncLog)):
                pass        # a role change stops one machine and starts the next (the group does it)
            elif isinstance(e, bfx.TruncateLog):
                raise AssertionError("a role change cuts no log: the follower's handshake does")
            else:
                raise AssertionError(f"unexpected effect {e!r}")

    def _pump_master(self, b: ByteBroker, core: MasterCore | None = None) -> None:
        """The master core's effects (``core``: one just stopped), in order: writes land in its
        file, answers become the requests' statuses, frames reach the slaves at once."""
        core = core or b.core.master
        for _ in range(MAX_PUMP):
            effects = core.take_effects()
            if not effects:
                return
            for e in effects:
                if isinstance(e, fx.WriteData):
                    seg = self._segment(b, e.start)
                    seg[e.position:e.position + len(e.data)] = e.data
                    core.write_done(e.start, e.position, len(e.data), b.clock_ms)
                elif isinstance(e, fx.CreateSegment):
                    self._segment(b, e.start)
                elif isinstance(e, fx.Fsync):
                    core.fsync_done(e.start, e.upto, b.clock_ms)
                elif isinstance(e, fx.ReadSegment):
                    core.segment_read(e.start, bytes(b.files[e.start]), b.clock_ms)
                elif isinstance(e, fx.Respond):
                    self._answered(b, e)
                elif isinstance(e, (fx.SendData, fx.SendEpochs)):
                    self._to_slave(b, e)
                elif isinstance(e, fx.CloseReplica):
                    slave = self._slave_on(b, e.conn)
                    if slave is not None:
                        self._unlink(slave, by_master=True)
                else:
                    raise AssertionError(f"unexpected master effect {e!r}")
        raise AssertionError("the master's effects did not settle")

    def _answered(self, b: ByteBroker, e: fx.Respond) -> None:
        r = self.requests[e.req_id - 1]
        assert r.master == b.name and r.status == WAITING, (r, e)
        # a put refused before its record reached the log is no step of the spec (no disk faults here)
        assert e.next_offset != 0, f"request {e.req_id} refused: {PutStatus(e.status).name}"
        if e.status == int(PutStatus.PUT_OK):
            r.status = PUT_OK
            self.labels.append(f"Respond({e.req_id})")
        else:
            r.status = FLUSH_SLAVE_TIMEOUT
            self.labels.append(f"Timeout({e.req_id})")

    def _slave_on(self, master: ByteBroker, conn: int) -> ByteBroker | None:
        return next((s for s in self.brokers.values() if s.conn == conn and s.up
                     and s.rm.master_id == master.name), None)

    def _to_slave(self, master: ByteBroker, e) -> None:
        slave = self._slave_on(master, e.conn)
        if slave is None:
            return                  # the connection is gone: the frame with it
        follower = slave.core.follower
        if isinstance(e, fx.SendEpochs):
            follower.epoch_reply(e.entries, e.log_end_offset, e.confirm_offset)
        else:
            before = follower.replica.index.count
            follower.on_data(e.offset, e.data, e.epoch, e.epoch_start, e.confirm_offset)
            self.labels += [f"Transfer({slave.name})"] * (follower.replica.index.count - before)
        self._pump_follower(slave)

    def _pump_follower(self, s: ByteBroker) -> None:
        for _ in range(MAX_PUMP):
            follower = s.core.follower if s.core is not None else None
            if follower is None:
                return
            effects = follower.take_effects()
            if not effects:
                return
            master = self.brokers.get(s.rm.master_id)
            for e in effects:
                if isinstance(e, fx.CreateSegment):
                    self._segment(s, e.start)
                elif isinstance(e, fx.WriteData):
                    seg = self._segment(s, e.start)
                    seg[e.position:e.position + len(e.data)] = e.data
                elif isinstance(e, fx.ZeroTail):
                    self._zero_from(s, e.start + e.position)
                elif isinstance(e, bfx.TruncateLog):
                    if e.on_disk:
                        self._zero_from(s, e.offset)
                elif isinstance(e, bfx.WriteEpochFile):
                    s.epoch_file = tuple(e.entries)
                    if e.durable:
                        s.epoch_file_durable = s.epoch_file
                elif isinstance(e, (bfx.FsyncLog, bfx.HandshakeFailed)):
                    pass
                elif isinstance(e, fx.RescanLog):
                    follower.rescanned(self._scan(s, e.upto))
                elif isinstance(e, fx.SendEpochQuery) and s.linked:
                    master.core.master.replica_epoch_query(s.conn, master.clock_ms)
                    self._pump_master(master)
                elif isinstance(e, fx.SendHandshake) and s.linked:
                    master.core.master.replica_handshake(s.conn, s.name, e.offset, e.chain, master.clock_ms,
                                                         e.records)
                    self._pump_master(master)
                elif isinstance(e, fx.SendAck) and s.linked:
                    s.acks.append(e)
                elif isinstance(e, fx.CloseMaster):
                    self._unlink(s, by_follower=True)
                elif isinstance(e, (fx.SendEpochQuery, fx.SendHandshake, fx.SendAck)):
                    pass            # no connection: nothing goes out
                else:
                    raise AssertionError(f"unexpected follower effect {e!r}")
        raise AssertionError("the follower's effects did not settle")

    def _scan(self, b: ByteBroker, upto: int | None = None):
        seg = self.segment_bytes

        def read(start: int) -> bytes:
            buf = bytes(b.files[start])
            if upto is None:
                return buf
            keep = max(0, min(seg, upto - start))
            return buf[:keep] + bytes(seg - keep)
        return scan_log(sorted(start for start in b.files if upto is None or start < upto), read, seg)

    @staticmethod
    def _follower_view(s: ByteBroker) -> tuple:
        """What a slave's follower holds as the spec sees it: its log end, epochs and confirmOffset."""
        follower = s.core.follower if s.core is not None else None
        if follower is None:
            return ()
        return follower.log_end_offset, follower.cache.entries, follower.confirm_offset

    def _unlink(self, s: ByteBroker, by_master: bool = False, by_follower: bool = False) -> None:
        """The slave's HA connection goes down, both ends."""
        if s.conn is None:
            return
        conn, s.conn = s.conn, None
        s.acks.clear()
        master = self.brokers.get(s.rm.master_id) if s.rm is not None and s.rm.master_id else None
        if master is not None and master.up and master.core.master is not None:
            master.core.master.replica_disconnected(conn)
            if not by_master:
                self._pump_master(master)
        if s.core is not None and s.core.follower is not None and not by_follower:
            s.core.follower.disconnected()
        if by_master or by_follower:
            self.counters["disconnect"] += 1
            self.labels.append(f"ReplicaDisconnect({s.name})")

    def _held_scan(self, b: ByteBroker):
        """The log the next machine starts from: the stopped machine's, in memory, or the files
        recovered; what lies beyond its end zeroed (disk.take_held)."""
        held = b.core.take_held()
        if held is None:
            scan = self._scan(b)
            self._zero_from(b, scan.end_offset)
            return scan
        if held.zero_beyond:
            self._zero_from(b, held.scan.end_offset)
        return held.scan

    def _start_master(self, b: ByteBroker, scan) -> None:
        core = b.core
        seg = self.segment_bytes
        log = CommitLog(seg, False) if scan is None else CommitLog.recovered(seg, False, scan)
        master = MasterCore(self.store_cfg, tuple(n for n in self.names if n != b.name), b.clock_ms, log=log)
        core.peers = tuple(n for n in self.names if n != b.name)
        core.attach_master(master)

    def _unlink_all(self, b: ByteBroker) -> None:
        """Every HA connection of ``b`` goes down: its own as a slave, its slaves' as a master."""
        if b.core is not None and b.core.master is not None:
            for s in self.brokers.values():
                if s is not b and s.linked and s.rm is not None and s.rm.master_id == b.name:
                    self._unlink(s)
        self._unlink(b)

    def _stop_machine(self, b: ByteBroker) -> None:
        """The role's machine stops (a role change): its connections close, what it learned stays."""
        core = b.core
        self._unlink_all(b)
        stopped = core.master
        core.detach()
        if stopped is not None:
            self._pump_master(b, stopped)       # its waiting requests' answers (BrokerCore.detach)

    def _done(self) -> str | None:
        """The labels of the step just taken, joined (every method that changes state ends here)."""
        labels, self.labels = self.labels, []
        return ";".join(labels) if labels else None


    # ------------------------------------------------------------------ producer and GroupTransferService

    @_action
    def put(self, b: str) -> str | None:
        broker = self.brokers[b]
        if not (broker.up and broker.rm.role == MASTER and broker.core.master is not None):
            return None
        assert len(self.requests) < MAX_REQUESTS
        rid = len(self.requests) + 1
        core = broker.core.master
        count = core.log.index.count
        broker.clock_ms += 1
        self.requests.append(ByteRequest(count + 1, WAITING, broker.rm.master_epoch, b))
        self.labels.append(f"Put({b})")
        core.put(rid, rid, rid.to_bytes(BODY_BYTES, "big"), broker.clock_ms)
        self._pump_master(broker)
        assert core.log.index.count == count + 1, "the put did not reach the page cache"
        return self._done()

    @_action
    def timeout(self, i: int) -> str | None:
        """Timeout(i): request i's deadline passes at its master's core (earlier ones with it)."""
        r = self.requests[i - 1]
        broker = self.brokers[r.master]
        if r.status != WAITING:
            return None
        core = broker.core.master if broker.up else None
        if core is None:
            return None
        deadline = next((d for d, req in core.repl_deadlines if req.req_id == i), None)
        if deadline is None:
            return None
        broker.clock_ms = max(broker.clock_ms, deadline)
        core.tick(broker.clock_ms)
        self._pump_master(broker)
        return self._done()

    # ------------------------------------------------------------------ HA

    def _master_of(self, slave: ByteBroker) -> ByteBroker | None:
        m = self.brokers.get(slave.rm.master_id) if slave.rm and slave.rm.master_id else None
        return m if m is not None and m.up and m.rm.role == MASTER and m.core.master is not None else None

    @_action
    def replica_connect(self, b: str) -> str | None:
        slave = self.brokers[b]
        if not (slave.up and slave.rm.role == SLAVE and not slave.fenced_out() and not slave.linked):
            return None
        master = self._master_of(slave)
        if master is None:
            return None
        core = slave.core
        if core.follower is None:
            scan = self._held_scan(slave)
            seg = self.segment_bytes
            core.attach_follower(ReplicaCore(b, seg) if scan.end_offset == 0 and not slave.files
                                 else ReplicaCore.recovered(b, seg, scan))
        if core.follower.state != "READY":
            return None
        self.conn_ids += 1
        slave.conn = self.conn_ids
        master.core.master.replica_connection_opened(slave.conn, master.clock_ms)
        mark, disconnects = len(self.labels), self.counters["disconnect"]
        held = self._follower_view(slave)
        core.follower.connect()
        self._pump_follower(slave)
        if b not in master.core.master.conns:
            # refused before TRANSFER (either end): no spec step — RocketMQ retries — unless the
            # follower changed what it holds before the refusal (a cut, the EPOCH_REPLY's
            # confirmOffset): then it is claimed as the spec's ReplicaConnect, for the check to judge
            # at this step (the spec's handshake never fails once it has cut)
            del self.labels[mark:]
            self.counters["disconnect"] = disconnects
            if self._follower_view(slave) == held:
                return None
        self.labels.insert(mark, f"ReplicaConnect({b})")    # before the frames its acceptance sent
        return self._done()

    @_action
    def replica_ack(self, b: str) -> str | None:
        slave = self.brokers[b]
        if not (slave.up and slave.linked and slave.acks):
            return None
        master = self._master_of(slave)
        if master is None or b not in master.core.master.conns:
            return None
        # HAConnection.ReadSocketService reads the last whole report in its buffer (the reports are
        # cumulative): the master takes the slave's latest, which says what it holds now
        last, slave.acks = slave.acks[-1], []
        before = master.core.master.conns[b].ack_offset
        if last.offset <= before:
            return None
        mark = len(self.labels)
        master.core.master.replica_ack(slave.conn, last.offset, master.clock_ms, last.records)
        self._pump_master(master)
        hc = master.core.master.conns.get(b)
        if hc is not None and hc.ack_offset > before:     # taken (a refused report closes the link)
            self.labels.insert(mark, f"ReplicaAck({b})")
        return self._done()

    @_action
    def replica_disconnect(self, b: str) -> str | None:
        slave = self.brokers[b]
        if not slave.linked:
            return None
        self._unlink(slave)
        self.counters["disconnect"] += 1
        self.labels.append(f"ReplicaDisconnect({b})")
        return self._done()

    # ------------------------------------------------------------------ SyncStateSet

    @_action
    def check_sync_state_set(self, m: str, advance_ms: int = SSS_CHECK_INTERVAL_MS) -> str | None:
        master = self.brokers[m]
        if not (master.up and master.rm.role == MASTER and master.core.master is not None):
            return None
        assert advance_ms >= 0, advance_ms
        self.check_clock_ms += advance_ms
        self._perform_role(master, master.core.master_check_sync_state_set(self.check_clock_ms))
        self._pump_master(master)
        return self._done()

    @_action
    def alter_sync_state_set(self, m: str) -> str | None:
        """AlterSyncStateSet(m), and the master's handling of the answer (as the node does:
        an accepted alter's SyncStateSet applied at once, ChangeSyncStateSet in the same step)."""
        master = self.brokers[m]
        if not (master.alter_pending and master.up and master.reachable):
            return None
        master.alter_pending = False
        rm = master.rm
        self._heartbeats()
        assert master.proposal == rm.remote_sss, (master.proposal, rm.remote_sss)     # what the node sends
        reply = self._ask(self.controller.alter_sync_state_set, GROUP, self.ids[m], rm.master_epoch, rm.sss_epoch,
                          frozenset(self.ids[x] for x in master.proposal))
        self.labels.append(f"AlterSyncStateSet({m})")
        if master.core.master is not None and rm.role == MASTER:
            info = self._noted(self._ask(self.controller.get_replica_info, GROUP).info)
            sss_epoch = rm.sss_epoch
            master.core.master_alter_answered(reply.code == cfx.SUCCESS, self.by_id.get(info.master_id),
                                              info.master_epoch,
                                              frozenset(self.by_id[x] for x in info.sync_state_set), info.sss_epoch)
            if rm.sss_epoch != sss_epoch:
                self.labels.append(f"ChangeSyncStateSet({m})")
            self._pump_master(master)
        return self._done()

    @_action
    def change_sync_state_set(self, m: str) -> str | None:
        master = self.brokers[m]
        if not (master.up and master.reachable and master.rm.role == MASTER and master.core.master is not None):
            return None
        return self._take_sss_notice(master, self._info())

    def _take_sss_notice(self, master: ByteBroker, info: cfx.ReplicaInfo) -> str | None:
        """The SyncStateSet of a controller answer, given to a master as the node gives it."""
        m = master.name
        sss = frozenset(self.by_id[x] for x in info.sync_state_set)
        sss_epoch = master.rm.sss_epoch
        master.core.master_sync_state_set(self.by_id.get(info.master_id), info.master_epoch, sss, info.sss_epoch)
        if master.rm.sss_epoch == sss_epoch:
            self._pump_master(master)
            return self._done()
        master.alter_pending = False
        self.labels.append(f"ChangeSyncStateSet({m})")
        self._pump_master(master)
        return self._done()

    # ------------------------------------------------------------------ elections and role changes

    @_action
    def elect_master(self) -> str | None:
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
        self.labels.insert(0, "ElectMaster")
        return self._done()

    @_action
    def change_role(self, b: str) -> str | None:
        """ChangeToMaster(b) / ChangeToSlave(b), as the node performs them (reference/real/node.py)."""
        broker = self.brokers[b]
        if not (broker.up and broker.reachable):
            return None
        return self._take_role_notice(broker, self._info())

    @_action
    def stale_notice(self, b: str, pick: int) -> str | None:
        """The environment: an answer of the controller reaches ``b`` again, late — delayed,
        duplicated or reordered behind newer ones — naming a master epoch older than the one ``b``
        knows, or its own epoch with a SyncStateSet epoch no newer than its own.  ``b`` handles it
        as the node handles every answer (role_named, then the master's SyncStateSet), and the
        cores' epoch guards (E5; ChangeSyncStateSet's) must refuse it: no spec step.  A core that
        takes it returns that step's labels, and the refinement check finds no such spec step.
        Refused, it changes nothing the spec sees; as at the node, a master's manager takes its
        core's acks and log end on the way (BrokerCore._sync), so its next heartbeat may be fresher."""
        broker = self.brokers[b]
        if not (broker.up and broker.reachable):
            return None
        rm = broker.rm
        # a slave holds no sssEpoch of its own (ChangeToSlave clears it): any answer of its epoch or older
        master = rm.role == MASTER and broker.core.master is not None
        stale = [n for n in self.notices if n.master_epoch < rm.master_epoch
                 or (n.master_epoch == rm.master_epoch and (not master or n.sss_epoch <= rm.sss_epoch))]
        if not stale:
            return None
        info = stale[pick % len(stale)]
        self.stale_notices += 1
        label = self._take_role_notice(broker, info)
        if label is not None or not master:
            return label
        return self._take_sss_notice(broker, info)

    def _take_role_notice(self, broker: ByteBroker, info: cfx.ReplicaInfo) -> str | None:
        """A controller answer's master and epoch, given to a broker as the node gives it."""
        b = broker.name
        master = self.by_id.get(info.master_id)
        core = broker.core
        if core.role_named(master, info.master_epoch) is None:
            return None
        if master == b:
            sss = frozenset(self.by_id[x] for x in info.sync_state_set)
            if not (core.rm.role == MASTER and core.master is not None):
                if core.master is not None or core.follower is not None:
                    self._stop_machine(broker)
                self._start_master(broker, self._held_scan(broker))
            self.labels.insert(0, f"ChangeToMaster({b})")
            self._perform_role(broker, core.change_to_master(info.master_epoch, sss, info.sss_epoch))
            broker.alter_pending = False
            self._pump_master(broker)
            return self._done()
        mark = len(self.labels)
        if core.stops_serving_for(master):
            self._stop_machine(broker)          # a demoted master's waiting requests: Timeout, after
        self.labels.insert(mark, f"ChangeToSlave({b})")
        self._perform_role(broker, core.change_to_slave(master, info.master_epoch))
        broker.alter_pending = False
        return self._done()

    # ------------------------------------------------------------------ failures

    def _die(self, b: ByteBroker) -> None:
        self._unlink_all(b)
        b.confirm_checkpoint = self._confirm_of(b)
        b.down_end = log_end(b)
        b.core = None
        b.alter_pending = False
        for r in self.requests:
            if r.status == WAITING and r.master == b.name:
                r.status = CLIENT_TIMEOUT

    @_action
    def broker_crash(self, b: str) -> str | None:
        broker = self.brokers[b]
        if not broker.up:
            return None
        self._die(broker)
        self.counters["brokerCrash"] += 1
        self.labels.insert(0, f"BrokerCrash({b})")
        return self._done()

    @_action
    def broker_power_loss(self, b: str, keep: int, lose_epoch_write: bool) -> str | None:
        """BrokerPowerLoss(b): the first ``keep`` records survive (and half of the next, torn);
        the epoch file as made durable."""
        broker = self.brokers[b]
        if not broker.up:
            return None
        end = log_end(broker)
        self._die(broker)
        held = [r for r in broker.records() if r.end <= end]
        keep = min(keep, len(held))
        self.pc_lost |= {r.key for r in held[keep:]}
        cut = held[keep - 1].end if keep else 0
        torn = RECORD_BYTES // 2 if keep < len(held) and held[keep].offset == cut else 0
        self._zero_from(broker, cut + torn)
        broker.down_end = cut
        if lose_epoch_write and broker.epoch_file != broker.epoch_file_durable and broker.epoch_file:
            broker.epoch_file = broker.epoch_file[:-1]
        broker.epoch_file_durable = broker.epoch_file
        self.counters["powerLoss"] += 1
        self.labels.insert(0, f"BrokerPowerLoss({b})")
        return self._done()

    @_action
    def broker_restart(self, b: str) -> str | None:
        broker = self.brokers[b]
        if broker.up or self.by_id.get(self.controller.groups[GROUP].master_id) == b:
            return None
        scan = self._scan(broker)
        self._zero_from(broker, scan.end_offset)        # recovery cuts a torn tail
        broker.core = BrokerCore(b, epoch_cache=EpochFileCache(broker.epoch_file), log_end_offset=scan.end_offset,
                                 bugs=self.broker_bugs, policy=self._policy(b), recovered=scan,
                                 checkpoint_confirm_offset=broker.confirm_checkpoint)
        broker.epoch_file = broker.epoch_file_durable = broker.rm.epoch_cache.entries
        self.labels.insert(0, f"BrokerRestart({b})")
        return self._done()

    @_action
    def cut_from_controller(self, b: str) -> str | None:
        broker = self.brokers[b]
        if not broker.reachable:
            return None
        broker.reachable = False
        self.counters["cutOff"] += 1
        self.labels.insert(0, f"CutFromController({b})")
        return self._done()

    @_action
    def reconnect_to_controller(self, b: str) -> str | None:
        broker = self.brokers[b]
        if broker.reachable:
            return None
        broker.reachable = True
        self.labels.insert(0, f"ReconnectToController({b})")
        return self._done()

    # ------------------------------------------------------------------ the abstraction

    def _confirm_of(self, b: ByteBroker) -> int:
        core = b.core
        if core is None:
            return b.confirm_checkpoint
        if core.master is not None and core.master.confirm is not None and core.rm.role == MASTER:
            return core.master.confirm
        if core.follower is not None:
            return core.follower.confirm_offset
        return core.rm.confirm_offset

    def _cache_of(self, b: ByteBroker, end: int, stale_end: int) -> tuple:
        core = b.core
        if core is None:
            return EpochFileCache(b.epoch_file).truncate_beyond(
                stale_end if "BugTruncateNotDurable" in self.cfg.bugs else end).entries
        return (core.follower.cache if core.follower is not None else core.rm.epoch_cache).entries

    def abstract(self) -> FState:
        g = self.controller.groups[GROUP]
        nb = self.cfg.no_broker
        records = {name: b.records() for name, b in self.brokers.items()}
        cols = zip(*(self._abstract_broker(self.brokers[b], nb, records) for b in self.names))
        (reachable, up, role, b_master, b_epoch, b_sss, b_sss_epoch, b_remote_sss, alter_pending, blog, epoch_cache,
         confirm, stale_tail, connected, ack, cursor) = cols
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

    def _abstract_broker(self, b: ByteBroker, nb: str, records: dict[str, list[Record]]) -> tuple:
        """One broker's column of every per-broker variable: its records (in its files, up to its
        machine's end) and every offset it holds counted in them."""
        mine = records[b.name]
        end = log_end(b)
        seg = self.segment_bytes
        keys = tuple(r.key for r in mine if r.end <= end)
        assert len(keys) == records_below(seg, end, f"{b.name}'s log end"), (b.name, end, keys)
        stale_records = [r for r in mine if r.offset >= end]
        stale = tuple(r.key for r in stale_records) if "BugTruncateNotDurable" in self.cfg.bugs else ()
        stale_end = stale_records[-1].end if stale_records else end
        cache = tuple((e, records_below(seg, o, f"{b.name}'s epoch {e} start"))
                      for e, o in self._cache_of(b, end, stale_end))
        confirm = records_below(seg, self._confirm_of(b), f"{b.name}'s confirmOffset")
        rm = b.rm
        if rm is None:
            return (b.reachable, False, SLAVE, nb, 0, frozenset(), 0, frozenset(), b.alter_pending, keys, cache,
                    confirm, stale, False, 0, 0)
        master = rm.role == MASTER
        m = self._master_of(b) if b.linked else None
        hc = m.core.master.conns.get(b.name) if m is not None else None
        ack = records_below(seg, hc.ack_offset, f"{b.name}'s ack at {m.name}") if hc is not None else 0
        return (b.reachable, True, rm.role, rm.master_id or nb, rm.master_epoch,
                rm.sss if master else frozenset(), rm.sss_epoch if master else 0,
                rm.remote_sss if master else frozenset(), b.alter_pending, keys, cache, confirm, stale,
                hc is not None, ack, hc.cursor_epoch if hc is not None else 0)
