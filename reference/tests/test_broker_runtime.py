"""BrokerRuntime (reference/real/broker_runtime.py): one loop and one thread for a node's whole life.
Roles change on it — master, slave, master again — over real files and real TCP on 127.0.0.1: a
closed role's ports are closed and its timers do nothing, the log written as master is the log
the next master serves, and the thread is the same throughout."""

from __future__ import annotations

import socket
import threading
import time

import attrs
import pytest

from reference.config import StoreConfig
from reference.real.broker_runtime import BrokerRuntime, RoleFailed
from reference.real.disk import SegmentStore
from reference.real.master_server import MasterRuntime
from reference.real.options import MasterOptions, ReplicaOptions
from reference.real.replica_server import ReplicaRuntime
from reference.status import PutStatus
from reference.tests.test_real_runtime import put

CFG = attrs.evolve(StoreConfig(), flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=64 * 1024,
                   max_message_size=4096)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def proc():
    runtime = BrokerRuntime()
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    yield runtime, thread
    runtime.stop()
    thread.join(10)
    assert not thread.is_alive()


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_roles_change_on_one_loop_thread_and_the_log_goes_with_them(tmp_path, proc):
    runtime, thread = proc
    port, ha_port = _free_port(), _free_port()
    mopts = MasterOptions(directory=tmp_path, config=CFG, port=port, ha_port=ha_port)
    threads: list[threading.Thread] = []

    def master() -> MasterRuntime:
        threads.append(threading.current_thread())
        return MasterRuntime(mopts, log=lambda m: None, loop=runtime.role_loop())
    first = runtime.call(lambda: runtime.switch(master))
    assert [put(port, k, b"x" * 100).status for k in (1, 2, 3)] == [int(PutStatus.PUT_OK)] * 3

    # a slave of a master that is not there: it keeps trying to connect (its timers run)
    ropts = ReplicaOptions(directory=tmp_path, name="b1", master=("127.0.0.1", _free_port()),
                           segment_size=CFG.mapped_file_size_commit_log, heartbeat_interval_ms=50)

    def slave() -> ReplicaRuntime:
        threads.append(threading.current_thread())
        return ReplicaRuntime(ropts, log=lambda m: None, loop=runtime.role_loop())
    follower = runtime.call(lambda: runtime.switch(slave))
    assert follower.recovery.end_offset == first.core.log.committed > 0, "the slave's log is not the master's"
    assert _refused(port) and _refused(ha_port), "the closed master's ports still accept"
    time.sleep(0.3)                      # the closed master's idle check and the slave's timers come due
    assert runtime.role is follower and first.loop.closed

    second = runtime.call(lambda: runtime.switch(master))
    assert follower.loop.closed and not second.loop.closed
    time.sleep(0.5)                      # the closed slave's reconnect and heartbeat timers come due: no-ops
    held = runtime.call(lambda: [key.data for key in runtime.loop.selector.get_map().values()])
    # (the serving master's io_uring eventfd, where the kernel has io_uring: one, the first master's went with it)
    ring = ["fsync-ring"] if second.fsync_ring is not None else []
    assert sorted(map(str, held)) == ["None", *ring, "producer", "slave"], f"a closed role left sockets: {held}"
    # the closed roles' recurring timers (the slave's heartbeat every 50 ms, its fsync tick, the first
    # master's idle check) died with them: only the serving master's idle check is left
    deadline = time.monotonic() + 5
    while (timers := runtime.call(lambda: len(runtime.loop._timers))) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)                  # each fires once more, does nothing, and is not set again
    assert timers == 1, f"{timers} timers: a closed role's timers still run"
    assert put(port, 4, b"y" * 100).status == int(PutStatus.PUT_OK)
    assert second.core.log.committed > first.core.log.committed
    assert set(threads) == {thread}, "a role was built off the process's loop thread"


def test_a_role_that_cannot_be_built_leaves_no_role_and_the_loop_serving(tmp_path, proc):
    runtime, _ = proc
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        mopts = MasterOptions(directory=tmp_path, config=CFG, port=busy, ha_port=_free_port())
        with pytest.raises(OSError):
            runtime.call(lambda: runtime.switch(lambda: MasterRuntime(mopts, log=lambda m: None,
                                                                      loop=runtime.role_loop())))
    assert runtime.role is None
    assert runtime.call(lambda: "still serving") == "still serving"


def test_a_failed_slave_ends_the_run_with_its_reason(tmp_path):
    runtime = BrokerRuntime()
    ropts = ReplicaOptions(directory=tmp_path, name="b1", master=("127.0.0.1", _free_port()),
                           segment_size=CFG.mapped_file_size_commit_log)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            runtime.run()
        except RoleFailed as err:
            failures.append(err)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    role = runtime.call(lambda: runtime.switch(lambda: ReplicaRuntime(ropts, log=lambda m: None,
                                                                        loop=runtime.role_loop())))
    runtime.loop.call_soon(lambda: role._fail("the disk is gone"))
    thread.join(10)
    assert not thread.is_alive() and [str(e) for e in failures] == ["the disk is gone"], failures


def test_a_role_closed_during_a_wake_up_does_nothing_more_in_it(tmp_path, proc):
    """A put that arrived in the wake-up whose queued calls change the role (its frame read just
    before them): the closed master must not take it, write it or ship it — the next role started
    over the log the master held, and a record written past it would be on disk unknown to it."""
    from reference.commitlog import held_log
    from reference.failover.broker import HeldLog
    from reference.real.loop import now_ms
    from reference.record import scan_log

    runtime, _ = proc
    port = _free_port()
    mopts = MasterOptions(directory=tmp_path, config=CFG, port=port, ha_port=_free_port())
    master = runtime.call(lambda: runtime.switch(lambda: MasterRuntime(mopts, log=lambda m: None,
                                                                          loop=runtime.role_loop())))
    assert put(port, 1, b"x" * 100).status == int(PutStatus.PUT_OK)
    ropts = ReplicaOptions(directory=tmp_path, name="b1", master=("127.0.0.1", _free_port()),
                           segment_size=CFG.mapped_file_size_commit_log)
    ends = {}

    def change():
        master.admission.arrive(10_000, 2, b"y" * 100, now_ms())     # read in this wake-up, not yet taken
        core = master.core

        def slave():
            ends["held"] = end = core.log_end_offset()
            return ReplicaRuntime(ropts, log=lambda m: None, loop=runtime.role_loop(),
                                  held=HeldLog(held_log(core.log.index, core.log.segments, end)))
        return runtime.switch(slave)
    runtime.call(change)
    time.sleep(0.3)
    assert master.core.log.wrote == ends["held"], "the closed master took a put after the role change"
    store = SegmentStore(tmp_path / "commitlog", CFG.mapped_file_size_commit_log)
    try:
        data = store.read(0, 0, CFG.mapped_file_size_commit_log)
    finally:
        store.close()
    assert scan_log([0], lambda start: data, CFG.mapped_file_size_commit_log).end_offset == ends["held"]


def test_the_stores_default_recovery_cuts_a_torn_tail_and_it_stays_cut(tmp_path):
    """Found by `ackorder mutate` (issue 36): `recover(keep_torn=True)` as the default passed every
    check, though a slave, a `broker node` and the controller's store recover with the default: no
    test tore the tail of a log those recover.  Two whole records, then half of a third: the
    default recovery keeps the two, zeroes the rest, and a second recovery agrees."""
    from reference.record import encode

    store = SegmentStore(tmp_path / "log", 4096)
    first, second, third = encode(1, b"a" * 40), encode(2, b"b" * 40), encode(3, b"c" * 40)
    store.write(0, 0, first + second + third[: len(third) // 2])
    store.close()
    again = SegmentStore(tmp_path / "log", 4096)
    scan = again.recover()
    assert (scan.end_offset, scan.record_count) == (len(first) + len(second), 2), scan
    again.close()
    third_look = SegmentStore(tmp_path / "log", 4096)
    assert third_look.recover().end_offset == len(first) + len(second)
    assert third_look.read_all()[0][len(first) + len(second):].strip(b"\0") == b""
    third_look.close()
