"""A Hypothesis machine over the byte-level failover cores, joined as the node joins them: every
broker is a BrokerCore (reference/failover/broker.py) running a MasterCore or a FollowerCore.  The
slave follows a sequence of masters across elections, through link drops, process crashes (its
files recovered, its epoch file reloaded) and partial deliveries.  A new master is a SyncStateSet
member whose log is a byte prefix of the last one's followed by its own epoch's records, so a
follower that got further holds a diverged tail it must cut; or the slave itself is promoted
(BrokerCore.detach hands its log over in memory, ChangeToMaster starts the new epoch at its end)
and the old master, restarted on its own files and epochs, follows it; or the master is re-elected
while it serves.  The controller's part is played here: ElectMaster leaves the new master alone in
its SyncStateSet, and the master's own policy (BrokerCore.master_check_sync_state_set, on its
core's acks) proposes shrinks and expansions that the controller commits or refuses.

After every step: a follower in TRANSFER holds a prefix of its master's log, and its epoch entries
label that prefix as the master's do.  After ``settle`` (connect, deliver everything both ways): it
is in TRANSFER and holds the master's whole log.  The masters run SYNC_MASTER with ALL_IN_SYNC over
the ack view BrokerCore pushes, and the slave's ACKs travel late: a promoted slave (a member of the
controller's SyncStateSet) must hold every record any master answered PUT_OK
(AckedSurvivesFailover, over bytes), and another member elected holds them too (the rule keeps at
least them).  Bug switches bite here: BugTruncateNotDurable, BugTransferCursorNotReset and
BugNoAllAck by search; BugShrinkBeforeCommit and BugCommittedSssOnly by the programs below.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from reference import effects as fx
from reference.commitlog import CommitLog
from reference.failover import broker_effects as bfx
from reference.failover.broker import BrokerCore
from reference.failover.epochfile import EpochFileCache
from reference.failover.sss_policy import SyncStateSetPolicy
from reference.failover.truncation import TRANSFER
from reference.master import MasterCore
from reference.record import scan_log
from reference.replica import ReplicaCore
from reference.failover.roles import ack_members
from reference.status import PutStatus
from reference.tests.test_master_core import BASE

from collections import Counter

# SYNC_MASTER with ALL_IN_SYNC, as a node runs (the flush is not what this machine is about)
CFG = attrs.evolve(BASE, ha_transfer_batch_size=64, ha_send_window_bytes=256, broker_role="SYNC_MASTER",
                   ack_policy="ALL_IN_SYNC")
REACHED: Counter = Counter()       # what the runs of this process reached (a test asserts they do)
SEG = CFG.mapped_file_size_commit_log
MAX_RECORDS = 24
NOT_CATCHUP_MS = 100       # haMaxTimeSlaveNotCatchup of every master here


class Master:
    """A MasterCore whose effects are performed in memory; its frames for the slave are queued."""

    def __init__(self, records: list[tuple[int, int]], epochs: tuple[tuple[int, int], ...] | None,
                 files: dict[int, bytearray] | None = None, bugs: frozenset[str] = frozenset(), scan=None) -> None:
        """A master that puts ``records``; or, with ``files``, one whose log is those files, as
        ``scan`` says (the log a promoted slave held) or recovered."""
        if files is None:
            self.core = MasterCore(CFG, ("s",), 0, log=CommitLog(SEG, False, ghost=True))
        else:
            if scan is None:
                scan = scan_log(sorted(files), lambda start: bytes(files[start]), SEG)
            self.core = MasterCore(CFG, ("s",), 0, log=CommitLog.recovered(SEG, False, scan))
        self.files: dict[int, bytearray] = files if files is not None else {}
        self.bugs = bugs
        # the members its PUT_OKs wait for: roles.ack_members, as the node pushes them (none under BugNoAllAck)
        self.core.change_sync_state_set(("s",), ack_members("m", frozenset({"m", "s"}), frozenset(), bugs=bugs))
        self.keys: dict[int, int] = {}             # request id -> key
        self.acked: set[int] = set()               # keys answered PUT_OK
        self.outbox: list = []
        self.records: list[tuple[int, int]] = []
        self.req = 0
        for key, size in records:
            self.put(key, size)
        if epochs is not None:
            self.begin(epochs)

    def begin(self, epochs) -> None:
        self.core.begin_epoch(epochs, 0, self.bugs)
        self.core.set_confirm_view(frozenset({"s"}), frozenset({"s"}), 0)
        self.pump()

    def put(self, key: int, size: int) -> None:
        self.req += 1
        self.keys[self.req] = key
        self.core.put(self.req, key, bytes([key % 251]) * size, 0)
        self.records.append((key, size))
        self.pump()

    @property
    def end(self) -> int:
        return self.core.log.committed

    def data(self, start: int, end: int) -> bytes:
        out = bytearray()
        for seg in range(start - start % SEG, end, SEG):
            buf = self.files.get(seg, bytearray(SEG))
            out += buf[max(start, seg) - seg: min(end, seg + SEG) - seg]
        return bytes(out)

    def pump(self) -> None:
        for _ in range(10_000):
            effects = self.core.take_effects()
            if not effects:
                return
            for e in effects:
                if isinstance(e, fx.WriteData):
                    seg = self.files.setdefault(e.start, bytearray(SEG))
                    seg[e.position: e.position + len(e.data)] = e.data
                    self.core.write_done(e.start, e.position, len(e.data), 0)
                elif isinstance(e, fx.ReadSegment):
                    self.core.segment_read(e.start, bytes(self.files[e.start]), 0)
                elif isinstance(e, (fx.SendData, fx.SendEpochs, fx.CloseReplica)):
                    self.outbox.append(e)
                elif isinstance(e, fx.Respond) and e.status == int(PutStatus.PUT_OK):
                    self.acked.add(self.keys[e.req_id])
        raise AssertionError("the master's effects did not settle")


class FollowerMachine(RuleBasedStateMachine):
    bugs: frozenset[str] = frozenset()

    @initialize()
    def start(self) -> None:
        self.epoch, self.next_key = 1, 1
        self.now_ms = 0
        self.processes = 0
        # the controller's metadata: the SyncStateSet (the slave "s" a member from the start: it and the
        # master hold nothing yet), its epoch, and a proposal in flight
        self.sss_epoch, self.pending = 1, None
        self._elect(Master([], None, bugs=self.bugs), "m", (), frozenset({"m", "s"}))
        self.acked: set[int] = set()               # every PUT_OK of every master (the group's promise)
        self.files: dict[int, bytearray] = {}     # the follower's segment files
        self.epoch_file: tuple = ()                # its epoch file, as last written
        self._slave_process(None)
        self.conn = 0
        self.linked = False
        self.cut = False                           # a cut since the last delivery
        self.armed = False                         # crash at the next cut (crash_at_the_next_cut)
        self.closes: list[str] = []                # why the slave dropped its links
        self.inbox: list = []                      # the slave's ACKs in flight to the master

    # --- the follower's effects, performed on its files; its frames go to the master -------------

    def _zero_from(self, offset: int) -> None:
        """SegmentStore.zero_tail: the segment holding ``offset`` zeroed from it, later ones gone."""
        holding = offset - offset % SEG
        for start in [s for s in self.files if s > holding]:
            del self.files[start]
        if holding in self.files:
            self.files[holding][offset - holding:] = bytes(SEG - (offset - holding))

    def _elect(self, master: Master, name: str, epochs: tuple, sss: frozenset[str]) -> None:
        """ChangeToMaster of ``master`` (named ``name``) through a BrokerCore, as the node does it:
        its epoch starts at its log end, after ``epochs``, and its ack view is the SyncStateSet's."""
        self.sss = sss
        broker = BrokerCore(name, epoch_cache=EpochFileCache(epochs), log_end_offset=master.core.log.wrote,
                            bugs=self.bugs, policy=SyncStateSetPolicy(name, max_not_catchup_ms=NOT_CATCHUP_MS),
                            checkpoint_confirm_offset=0)
        broker.peers = ("s",)
        broker.attach_master(master.core)
        self._change_to_master(broker, master)
        self.master, self.master_name, self.master_broker = master, name, broker

    def _change_to_master(self, broker: BrokerCore, master: Master) -> list:
        """The metadata names ``broker`` master in ``self.epoch`` with ``self.sss``; the epoch file
        entries written (one write, ending with the new epoch at the log end)."""
        assert broker.me in self.sss, (broker.me, self.sss)
        self.pending = None
        effects = broker.change_to_master(self.epoch, self.sss, self.sss_epoch)
        written = [e.entries for e in effects if isinstance(e, bfx.WriteEpochFile)]
        assert [w[-1] for w in written] == [(self.epoch, master.core.log.wrote)], written
        assert master.core.sync_state_set == ack_members(broker.me, self.sss, frozenset(), bugs=self.bugs), \
            "the ack view the node pushes"
        master.pump()
        return written

    def _slave_process(self, scan) -> None:
        """The slave's process starts (or restarts): a BrokerCore from its recovered log and its
        epoch file, named slave of the current master, its FollowerCore attached — the node's
        sequence (Node.__init__, _become_slave, _follow)."""
        self.processes += 1
        self.broker = BrokerCore(f"x{self.processes}", epoch_cache=EpochFileCache(self.epoch_file),
                                 log_end_offset=0 if scan is None else scan.end_offset, bugs=self.bugs,
                                 policy=SyncStateSetPolicy(f"x{self.processes}"), checkpoint_confirm_offset=0)
        self.broker.change_to_slave(self.master_name, self.epoch)
        self._follow(scan)

    def _held(self):
        """The log the slave's stopped machine held (BrokerCore.detach, take_held), as the next
        runtime takes it (disk.take_held: what lies beyond zeroed); without a cut only in
        memory it is what recovering the files gives, and the machine checks that it is."""
        held = self.broker.take_held()
        if held is None:                       # stopped in the middle of a cut: recover the files
            return self._scan(None)
        if held.zero_beyond:                      # beyond the end, whatever it is, goes (disk.take_held)
            self._zero_from(held.scan.end_offset)
        if "BugTruncateNotDurable" not in self.bugs:
            files = self._scan(None)
            assert (held.scan.end_offset, held.scan.record_count, held.scan.checkpoints, held.scan.tail_bytes) == \
                (files.end_offset, files.record_count, files.checkpoints, files.tail_bytes), \
                "the log a machine held is not the log its files hold"
        REACHED["held"] += 1
        return held.scan

    def _follow(self, scan) -> None:
        """A ReplicaRuntime starts over ``scan`` (a torn tail cut and zeroed), the broker's
        FollowerCore attached over it."""
        if scan is not None:
            self._zero_from(scan.end_offset)
        self.follower = self.broker.attach_follower(ReplicaCore("s", SEG) if scan is None else
                                                    ReplicaCore.recovered("s", SEG, scan))

    def _scan(self, upto: int | None):
        def read(start: int) -> bytes:
            buf = bytes(self.files.get(start, bytes(SEG)))
            if upto is None:
                return buf
            keep = max(0, min(SEG, upto - start))
            return buf[:keep] + bytes(SEG - keep)
        return scan_log([s for s in self.files if upto is None or s < upto], read, SEG)

    def _follower_pump(self) -> None:
        for _ in range(10_000):
            effects = self.follower.take_effects()
            if not effects:
                return
            for e in effects:
                if isinstance(e, fx.CreateSegment):
                    self.files.setdefault(e.start, bytearray(SEG))
                elif isinstance(e, fx.WriteData):
                    seg = self.files.setdefault(e.start, bytearray(SEG))
                    seg[e.position: e.position + len(e.data)] = e.data
                elif isinstance(e, fx.ZeroTail):
                    self._zero_from(e.start + e.position)
                elif isinstance(e, bfx.TruncateLog):
                    self.cut = True
                    REACHED["cut"] += 1
                    if e.on_disk:
                        self._zero_from(e.offset)
                elif isinstance(e, bfx.WriteEpochFile):
                    self.epoch_file = e.entries
                elif isinstance(e, fx.RescanLog):
                    REACHED["rescan"] += 1
                    self.follower.rescanned(self._scan(e.upto))
                elif isinstance(e, fx.SendEpochQuery) and self.linked:
                    self.master.core.replica_epoch_query(self.conn, 0)
                elif isinstance(e, fx.SendHandshake) and self.linked:
                    self.master.core.replica_handshake(self.conn, "s", e.offset, e.chain, 0, e.records)
                elif isinstance(e, fx.SendAck) and self.linked:
                    self.inbox.append(e)             # in flight to the master (deliver_acks)
                elif isinstance(e, fx.CloseMaster):
                    self.closes.append(e.reason)
                    self._unlink(by_follower=True)
            self.master.pump()
        raise AssertionError("the follower's effects did not settle")

    def _unlink(self, by_follower: bool = False) -> None:
        if self.linked:
            self.linked = False
            self.master.core.replica_disconnected(self.conn)
            self.master.pump()
            self.master.outbox.clear()
            self.inbox.clear()
            if not by_follower:
                self.follower.disconnected()

    def _deliver(self, n: int) -> None:
        self.cut = False
        for _ in range(n):
            if not self.linked or not self.master.outbox:
                return
            e = self.master.outbox.pop(0)
            if e.conn != self.conn:
                continue
            if isinstance(e, fx.SendEpochs):
                self.follower.epoch_reply(e.entries, e.log_end_offset, e.confirm_offset)
            elif isinstance(e, fx.SendData):
                self.follower.on_data(e.offset, e.data, e.epoch, e.epoch_start, e.confirm_offset)
            elif isinstance(e, fx.CloseReplica):
                self.linked = False
                self.master.outbox.clear()
                self.follower.disconnected()
            self._follower_pump()
            if self.cut:                # a burst ends at a cut (and an armed crash happens right then)
                if self.armed:
                    self.armed = False
                    REACHED["crash_after_cut"] += 1
                    self.follower_crash()
                return

    # --- rules -----------------------------------------------------------------------------------

    @rule(size=st.sampled_from((10, 40, 40, 80)))   # few sizes: records of two masters often align
    def put(self, size: int) -> None:
        if len(self.master.records) < MAX_RECORDS:
            self.master.put(self.next_key, size)
            self.next_key += 1

    @rule()
    def connect(self) -> None:
        if not self.linked and self.follower.state == "READY":
            self.conn += 1
            self.linked = True
            self.master.core.replica_connection_opened(self.conn, 0)
            self.follower.connect()
            self._follower_pump()

    @rule(n=st.integers(1, 8))
    def deliver(self, n: int) -> None:
        self._deliver(n)

    @rule(n=st.integers(1, 4))
    def deliver_acks(self, n: int) -> None:
        for _ in range(n):
            if not (self.linked and self.inbox):
                return
            e = self.inbox.pop(0)
            self.master.core.replica_ack(self.conn, e.offset, 0, e.records)
            self.master.pump()

    @rule()
    def link_drop(self) -> None:
        self._unlink()

    @rule()
    def follower_crash(self) -> None:
        """kill -9 of the slave: its files are recovered (a torn tail cut and zeroed), its epoch
        file loaded and truncated beyond the recovered end."""
        self._unlink()
        self._slave_process(self._scan(None))

    @rule()
    def crash_at_the_next_cut(self) -> None:
        """The chaos harness's step (reference/real/failover_chaos.crash_after_cut): kill the slave
        right after its next handshake cuts its log, before new data overwrites what was cut."""
        self.armed = True

    @rule(keep=st.integers(0, MAX_RECORDS))
    def failover(self, keep: int) -> None:
        """A SyncStateSet member is elected: its log is a byte prefix of the master's, cut after a
        record (a padding the master wrote after it is the member's only if it got the next
        record too), and its own epoch starts at its end."""
        self._unlink()
        self.acked |= self.master.acked
        # an elected member holds every record ever acknowledged (ALL_IN_SYNC waited for it)
        last_acked = max((k + 1 for k, (key, _) in enumerate(self.master.records) if key in self.acked), default=0)
        k = min(max(keep, last_acked), len(self.master.records))
        files = self.master.files
        ends: list[int] = []
        scan_log(sorted(files), lambda start: bytes(files[start]), SEG,
                 on_record=lambda offset, header, end, key, chains: ends.append(end))
        cut = ends[k - 1] if k else 0
        holding = cut - cut % SEG
        prefix = {start: bytearray(buf) for start, buf in files.items() if start <= holding}
        if holding in prefix:
            prefix[holding][cut - holding:] = bytes(SEG - (cut - holding))
        REACHED["failover"] += 1
        if self.follower.replica.received_end > cut:
            REACHED["follower_ahead_of_the_new_master"] += 1
        new = Master([], None, files=prefix, bugs=self.bugs)
        new.records = self.master.records[:k]
        end = new.core.log.wrote
        assert end == cut, (end, cut)
        self.epoch += 1
        self.sss_epoch += 1
        epochs = tuple(EpochFileCache(self.master.core.epochs.entries).truncate_beyond(end).entries)
        # ElectMaster: the SyncStateSet is the new master alone; the slave rejoins by expansion
        self._elect(new, f"m{self.epoch}", epochs, frozenset({f"m{self.epoch}"}))
        # the slave learns the new master from the metadata: its follower stops (what it learned is
        # the broker's role state), and a new one starts over its files recovered (Node._become_slave)
        assert self.broker.stops_serving_for(self.master_name)
        self.broker.detach()
        assert not self.broker.change_to_slave(self.master_name, self.epoch) == (), "ChangeToSlave was refused"
        self._follow(self._held())

    @rule()
    def promote_the_slave(self) -> None:
        """The slave is elected (it is in the SyncStateSet): its files recovered become a master's log
        and its epoch file gains the new epoch at its end; the old master, restarted, follows it with
        its own files and epochs — whatever it wrote past the slave's end is a diverged tail.  Only a
        slave following the master is a member: its log is a prefix of the master's."""
        if not (self.linked and self.follower.state == TRANSFER and "s" in self.sss):
            return                       # ElectMaster takes a member of the controller's SyncStateSet
        self._unlink()
        keys: list[int] = []
        scan = scan_log(sorted(self.files), lambda start: bytes(self.files[start]), SEG,
                        on_record=lambda offset, header, end, key, chains: keys.append(key))
        self._zero_from(scan.end_offset)
        old = self.master
        self.acked |= old.acked
        lost = self.acked - set(keys)
        assert not lost, f"AckedSurvivesFailover: the promoted slave lacks acknowledged records {sorted(lost)[:5]}"
        REACHED["promoted"] += 1
        self.epoch += 1
        if old.end > scan.end_offset:
            REACHED["old_master_ahead_of_the_promoted_slave"] += 1
        # ChangeToMaster through the slave's BrokerCore, as the node does it (Node._become_master): the
        # follower stops, a MasterCore over its files is attached, and the new epoch starts at their end
        broker = self.broker
        assert broker.stops_serving_for(broker.me)
        broker.detach()
        end = broker.rm.log_end_offset
        # the follower's end is its files' — or, while a segment's padding is still arriving, the last
        # record's: recovery takes a padding's header for the segment's end, the parser its last byte
        arriving = end < scan.end_offset == end - end % SEG + SEG and self.follower.received_end > end
        assert end == scan.end_offset or arriving, (end, scan.end_offset, self.follower.received_end)
        epochs = tuple(tuple(e) for e in EpochFileCache(self.epoch_file).truncate_beyond(end).entries)
        assert broker.rm.epoch_cache.entries == epochs, \
            "what the follower held in memory is not what its epoch file says"
        self.master = Master([], None, files=self.files, bugs=self.bugs, scan=self._held())
        broker.peers = ("s",)
        broker.attach_master(self.master.core)
        self.sss, self.sss_epoch = frozenset({broker.me}), self.sss_epoch + 1      # ElectMaster
        written = self._change_to_master(broker, self.master)
        assert written == [epochs + ((self.epoch, end),)], (written, epochs)
        self.master_name, self.master_broker = broker.me, broker
        # its records: a prefix of the old master's (the slave held what it was sent), for later failovers
        self.master.records = old.records[: scan.record_count]
        self.files = {start: bytearray(buf) for start, buf in old.files.items()}
        old_scan = self._scan(None)
        self._zero_from(old_scan.end_offset)
        self.epoch_file = tuple(old.core.epochs.entries)
        self._slave_process(old_scan)

    @precondition(lambda self: self.linked and self.follower.state == TRANSFER)   # what it is about
    @rule()
    def reelect(self) -> None:
        """The master is elected again while it serves (the controller missed its heartbeats for
        a while): a new epoch from its log end, in one step, and a connected slave stays
        connected — its next batches must carry the new label (BugTransferCursorNotReset: not)."""
        self.epoch += 1
        REACHED["reelected"] += 1
        # ElectMaster re-elects it: the SyncStateSet is the master alone again (the slave rejoins)
        self.sss, self.sss_epoch = frozenset({self.master_name}), self.sss_epoch + 1
        self._change_to_master(self.master_broker, self.master)

    @rule(dt_ms=st.sampled_from((0, 60, 120)))
    def check_sync_state_set(self, dt_ms: int) -> None:
        """The master's periodic checkSyncStateSetAndDoReport (BrokerCore.master_check_sync_state_set)
        on its own acks: a proposal goes to the controller (answer_alter)."""
        self.now_ms += dt_ms
        for proposal in self.master_broker.master_check_sync_state_set(self.now_ms):
            if proposal.action != "Resend":
                REACHED[proposal.action] += 1
                self.pending = proposal
        self.master.pump()

    @precondition(lambda self: "s" not in self.sss and self.pending is None)
    @rule()
    def rejoin(self) -> None:
        """The slave catches up, and the master expands the SyncStateSet by it (the three steps in
        one: a new master starts alone in its set, and the search should not have to find them)."""
        self.settle()
        self.check_sync_state_set(0)
        if self.pending is not None and self.pending.action == "ExpandSyncStateSet":
            self.answer_alter(True)
            REACHED["rejoined"] += 1

    @rule(accept=st.booleans())
    def answer_alter(self, accept: bool) -> None:
        """The controller's answer: the proposal committed (sssEpoch + 1), or refused."""
        if self.pending is None:
            return
        if accept:
            self.sss, self.sss_epoch = frozenset(self.pending.sss), self.sss_epoch + 1
        self.pending = None
        self.master_broker.master_alter_answered(accept, self.master_broker.me, self.epoch, self.sss, self.sss_epoch)
        self.master.pump()

    @rule()
    def settle(self) -> None:
        for _ in range(2):
            self.connect()
            for _ in range(400):
                if not (self.linked and (self.master.outbox or self.inbox)):
                    break
                self._deliver(50)
                self.deliver_acks(50)
        assert self.follower.state == TRANSFER and self.linked, \
            f"settled, yet not following: {self.follower.state} (master log {self.master.end})"
        assert self.follower.replica.parsed_end == self.master.end, (self.follower.replica.parsed_end, self.master.end)

    # --- what must hold ----------------------------------------------------------------------------

    @invariant()
    def a_following_slave_holds_a_prefix_of_its_masters_log_labelled_as_the_master_labels_it(self) -> None:
        if not hasattr(self, "follower") or not (self.linked and self.follower.state == TRANSFER):
            return
        end = self.follower.replica.parsed_end
        assert end <= self.master.end, (end, self.master.end)
        mine = bytes(b for s in sorted(self.files) for b in self.files[s])[:end]
        assert mine == self.master.data(0, end), f"the slave's log differs from its master's below {end}"

        def labels(entries) -> list:
            kept = [e for e in entries if e[1] < end]
            return [e for k, e in enumerate(kept) if k + 1 == len(kept) or kept[k + 1][1] != e[1]]
        assert labels(self.follower.cache.entries) == labels(self.master.core.epochs.entries), \
            (self.follower.cache.entries, self.master.core.epochs.entries, end)


TestFollowerMachine = FollowerMachine.TestCase
TestFollowerMachine.settings = settings(max_examples=250, stateful_step_count=40, deadline=None, derandomize=True,
                                        suppress_health_check=list(HealthCheck))


def test_the_machine_reaches_diverged_tails_cuts_and_crashes_right_after_them():
    REACHED.clear()
    run_state_machine_as_test(FollowerMachine, settings=settings(max_examples=300, stateful_step_count=40, deadline=None,
                                                                 database=None, derandomize=True,
                                                                 suppress_health_check=list(HealthCheck)))
    # a diverged tail from either side (the draws, and which side they favour, depend on the constants
    # Hypothesis takes from the modules loaded: stateful_tests/constants_pool.py loads them all)
    diverged = REACHED["follower_ahead_of_the_new_master"] + REACHED["old_master_ahead_of_the_promoted_slave"]
    assert diverged > 0 and all(REACHED[k] > 0 for k in ("failover", "cut", "rescan", "crash_after_cut",
                                                          "promoted", "held", "reelected", "rejoined",
                                                          "ShrinkSyncStateSet")), REACHED


def _bug_machine():
    return type("FollowerMachine_BugTruncateNotDurable", (FollowerMachine,),
                {"bugs": frozenset({"BugTruncateNotDurable"})})


def test_a_cut_only_in_memory_comes_back_after_a_crash_and_the_slave_never_follows_again():
    """The program the search below finds, replayed: four records, the slave holds them all (none
    acknowledged yet: its ACKs are in flight); the new master kept two and wrote two in its epoch; the slave cuts (in memory only), crashes, and
    its recovery finds the cut records again under the new epoch's label."""
    for bugs, follows in ((frozenset(), True), (frozenset({"BugTruncateNotDurable"}), False)):
        m = type("M", (FollowerMachine,), {"bugs": bugs})()
        m.start()
        m.connect()
        for size in (40, 40, 40, 40):
            m.put(size)
        m.deliver(20)                   # the slave holds all four; its ACKs are still in flight
        assert m.follower.replica.parsed_end == 240 and not m.master.acked
        m.failover(2)                   # a member that holds two: none was acknowledged
        m.put(40)
        m.put(40)
        m.crash_at_the_next_cut()
        m.connect()
        m.deliver(1)
        assert REACHED["crash_after_cut"] and not m.armed
        if follows:
            m.settle()
        else:
            with pytest.raises(AssertionError, match="settled, yet not following"):
                m.settle()


@pytest.mark.full
def test_the_machine_finds_a_cut_only_in_memory():
    with pytest.raises(AssertionError):
        run_state_machine_as_test(_bug_machine(), settings=settings(max_examples=3000, stateful_step_count=60,
                                                                    deadline=None, database=None,
                                                                    report_multiple_bugs=False,
                                                                    suppress_health_check=list(HealthCheck)))


def test_a_cut_inside_a_segments_padding_is_refused_not_asserted():
    """Under BugTruncateNotDurable a crash brings back a tail whose padding spans the next cut point
    (the new master's end): the rescan ends past the point, and the slave refuses to follow."""
    m = _bug_machine()()
    m.start()
    m.connect()
    for size in (40, 80, 10, 40):       # the fourth rolls to the next segment: padding [190, 256)
        m.put(size)
    m.deliver(5)
    m.failover(2)
    m.crash_at_the_next_cut()
    m.connect()
    m.deliver(1)
    m.put(40)                           # the new master's end, 220, lies inside that padding
    m.connect()
    m._deliver(1)
    assert m.follower.state == "READY" and not m.linked, m.follower.state
    assert any("falls inside a record" in reason for reason in m.closes), m.closes
    with pytest.raises(AssertionError, match="settled, yet not following"):
        m.settle()


def test_a_put_ok_without_the_slave_is_lost_when_the_slave_is_promoted():
    """AckedSurvivesFailover over bytes: under ALL_IN_SYNC a PUT_OK waits for the slave's copy, so the
    promoted slave holds it; with the ack view the node pushes under BugNoAllAck (none) it does not."""
    for bugs, survives in ((frozenset(), True), (frozenset({"BugNoAllAck"}), False)):
        m = _program(bugs)              # the slave follows, holding nothing yet
        m.put(40)                       # not delivered: the slave has not got it
        _promote(m, survives)


def _program(bugs: frozenset[str]) -> FollowerMachine:
    m = type("M", (FollowerMachine,), {"bugs": bugs})()
    m.start()
    m.settle()                          # the slave follows, a member, holding all there is
    return m


def _promote(m: FollowerMachine, survives: bool) -> None:
    """The slave, which lacks the last put, is promoted: fine if nothing was acknowledged
    without it; else AckedSurvivesFailover fails."""
    assert (m.master.acked == set()) == survives, m.master.acked
    if survives:
        m.promote_the_slave()
    else:
        with pytest.raises(AssertionError, match="AckedSurvivesFailover"):
            m.promote_the_slave()


def test_a_re_elected_master_labels_a_connected_slaves_next_batches_with_its_new_epoch():
    """BugTransferCursorNotReset over bytes: the cursor fixed at connect keeps labelling the new
    epoch's records with the old one, and the slave's epoch file never names the new epoch."""
    for bugs, labelled in ((frozenset(), True), (frozenset({"BugTransferCursorNotReset"}), False)):
        m = type("M", (FollowerMachine,), {"bugs": bugs})()
        m.start()
        m.put(40)
        m.settle()
        m.reelect()
        m.put(40)
        m.deliver(8)
        if labelled:
            m.a_following_slave_holds_a_prefix_of_its_masters_log_labelled_as_the_master_labels_it()
            assert m.follower.cache.last_epoch() == m.epoch
        else:
            with pytest.raises(AssertionError):
                m.a_following_slave_holds_a_prefix_of_its_masters_log_labelled_as_the_master_labels_it()


@pytest.mark.full
def test_the_machine_finds_a_transfer_cursor_that_is_not_reset():
    machine = type("FollowerMachine_BugTransferCursorNotReset", (FollowerMachine,),
                   {"bugs": frozenset({"BugTransferCursorNotReset"})})
    with pytest.raises(AssertionError):
        run_state_machine_as_test(machine, settings=settings(max_examples=3000, stateful_step_count=60, deadline=None,
                                                             database=None, report_multiple_bugs=False,
                                                             suppress_health_check=list(HealthCheck)))


@pytest.mark.parametrize("bug", ["BugShrinkBeforeCommit", "BugCommittedSssOnly"])
def test_the_sync_state_set_policy_over_bytes_keeps_every_put_ok_on_an_electable_member(bug):
    """BrokerCore's SyncStateSet decisions over bytes, on the master core's own acks.  A shrink
    proposed but not yet committed leaves the slave electable: PUT_OKs must still wait for it
    (BugShrinkBeforeCommit: not).  An expansion proposed makes the slave electable once
    committed: PUT_OKs must wait for it from the proposal on (BugCommittedSssOnly: not)."""
    for bugs, survives in ((frozenset(), True), (frozenset({bug}), False)):
        m = _program(bugs)
        if bug == "BugShrinkBeforeCommit":
            m.put(40)                   # not delivered: the slave falls behind
            m.check_sync_state_set(0)
            m.check_sync_state_set(120)  # behind for longer than haMaxTimeSlaveNotCatchup
            assert m.pending is not None and m.pending.action == "ShrinkSyncStateSet", m.pending
            m.put(40)                   # the controller has not answered: the slave is still a member
        else:
            m.failover(0)               # a new master, alone in its SyncStateSet
            m.settle()                  # the slave follows it and catches up
            m.check_sync_state_set(0)
            assert m.pending is not None and m.pending.action == "ExpandSyncStateSet", m.pending
            m.put(40)                   # not delivered: the slave has not got it
            m.answer_alter(True)        # the expansion is committed: the slave is electable
        assert "s" in m.sss
        _promote(m, survives)
