"""Issue 39's runtime parts: fdatasync through io_uring (and its failures), the per-request
timeline and its breakdown, the slave's ACK lag and its bound, exact loop timers."""

import os
import re
import time

import pytest

from reference.bench.breakdown import TimelineError, breakdown
from reference.frames import Ack
from reference.real import timeline as timeline_mod
from reference.real.load import run_load
from reference.real.loop import Loop
from reference.real.options import ReplicaOptions
from reference.real.replica_server import ReplicaRuntime
from reference.real.uring import FsyncRing
from reference.tests.realproc import start_master, start_replica, wait_for_line
from reference.tests.test_real_runtime import SMALL, procs  # noqa: F401  (the fixture)


def _kernel_io_uring() -> str | None:
    """Why this kernel (or sandbox) has no io_uring, probed with liburing itself rather than through
    FsyncRing, so that a defect in FsyncRing can never pass for a kernel without it; None: it has."""
    from reference.real import uring

    if uring.liburing is None:
        return "the liburing package is not installed"
    ring = uring.liburing.Ring()
    try:
        rc = uring.liburing.io_uring_queue_init(4, ring, 0)
    except OSError as err:
        return f"io_uring_setup: {err}"
    if rc < 0:
        return f"io_uring_setup: {os.strerror(-rc)}"
    uring.liburing.io_uring_queue_exit(ring)
    return None


NO_IO_URING = _kernel_io_uring()
needs_io_uring = pytest.mark.skipif(NO_IO_URING is not None, reason=f"this kernel has no io_uring ({NO_IO_URING}): "
                                    "the master runs its flush thread, which the engine=thread tests cover")


def _turns(loop: Loop, until, limit_s: float = 5.0) -> None:
    deadline = time.monotonic() + limit_s
    while not until():
        assert time.monotonic() < deadline, "nothing happened"
        loop.run_once(50, lambda key, mask: None)


# ------------------------------------------------------------------ io_uring


@needs_io_uring
def test_an_fsync_on_the_ring_answers_done_and_closes_its_descriptors(tmp_path):
    loop = Loop()
    ring = FsyncRing(loop)
    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x" * 4096)
    copies = [os.dup(fd), os.dup(fd), os.open(tmp_path, os.O_RDONLY)]
    answers = []
    ring.submit(copies, [True, True, False], lambda: answers.append("done"), lambda err: answers.append(err))
    _turns(loop, lambda: answers)
    assert answers == ["done"]
    for c in copies:                 # each closed once every fsync of the job finished
        with pytest.raises(OSError):
            os.fstat(c)
    os.close(fd)
    ring.close()
    loop.close()


@needs_io_uring
def test_a_failed_fsync_on_the_ring_answers_its_error_once_for_the_whole_job(tmp_path):
    loop = Loop()
    ring = FsyncRing(loop)
    r, w = os.pipe()                 # fsync on a pipe: EINVAL from the kernel, as a disk's EIO would come
    good = os.open(tmp_path, os.O_RDONLY)
    answers = []
    ring.submit([r, good], [True, False], lambda: answers.append("done"), lambda err: answers.append(err))
    _turns(loop, lambda: answers)
    assert len(answers) == 1 and isinstance(answers[0], OSError) and answers[0].errno == 22, answers
    os.close(w)
    ring.close()
    loop.close()


@pytest.mark.parametrize("engine", ["auto", "thread"])
def test_a_failed_fsync_never_acks_on_either_engine(tmp_path, procs, engine):  # noqa: F811
    from reference.status import PutStatus
    from reference.tests.test_real_runtime import put

    master = start_master(tmp_path / "m", "--flush-disk-type", "SYNC_FLUSH", "--inject-fsync-eio-after", "5",
                          "--sync-flush-timeout-ms", "300", "--flush-engine", engine, *SMALL)
    procs.append(master)
    statuses = [PutStatus(put(master.port, k, b"m" * 64).status) for k in range(1, 12)]
    ok = [i for i, s in enumerate(statuses) if s is PutStatus.PUT_OK]
    assert ok and ok == list(range(len(ok))) and len(ok) <= 5
    assert PutStatus.FLUSH_DISK_TIMEOUT in statuses and statuses[-1] is PutStatus.SERVICE_NOT_AVAILABLE
    wait_for_line(master, r"fsync failed")
    master.terminate()
    stats = re.search(r"^stats .*", master.output(), re.M).group(0)
    on_ring = int(re.search(r"fsyncs_io_uring=(\d+)", stats).group(1)) if "fsyncs_io_uring" in stats else 0
    # auto takes the ring wherever the kernel has io_uring (and says so where it has not); thread never does
    assert (on_ring > 0) == (engine == "auto" and NO_IO_URING is None), stats
    if engine == "auto" and NO_IO_URING is not None:
        assert "io_uring unavailable" in master.output()


# ------------------------------------------------------------------ the timeline


def test_a_master_and_its_slave_write_timelines_that_break_a_request_down(tmp_path, procs):  # noqa: F811
    master = start_master(tmp_path / "m", "--flush-disk-type", "SYNC_FLUSH", "--broker-role", "SYNC_MASTER",
                          "--replicas", "r1", "--ack-mode", "DECOUPLED", "--timeline", str(tmp_path / "m.tl"), *SMALL)
    procs.append(master)
    replica = start_replica(tmp_path / "r1", master, "r1", "--mapped-file-size-commit-log", str(64 * 1024),
                            "--timeline", str(tmp_path / "r1.tl"), "--inject-ack-lag-ms", "20")
    procs.append(replica)
    wait_for_line(master, r"slave r1 connected")
    since = time.monotonic_ns()
    result = run_load(("127.0.0.1", master.port), 4, 200, 64)
    assert result.statuses == {"PUT_OK": 200}
    assert result.latency_ms["p50"] >= 20                  # every PUT_OK waited for an ACK held 20 ms
    assert replica.terminate() == 0 and master.terminate() == 0
    out = breakdown(tmp_path / "m.tl", tmp_path / "r1.tl", since, flush_leg=True, replica_leg=True)
    assert out["requests"] == 200 // timeline_mod.SAMPLE_EVERY
    phases = {k: v["avg"] for k, v in out["phases_ms"].items()}
    assert phases["slave's ACK out"] >= 20 > phases["slave"]        # the hold is the ACK's, not the slave's
    assert all(v >= 0 for k, v in phases.items() if not k.startswith("network")), phases   # (two processes' marks)
    assert out["broker_ms"]["avg"] >= 20


def test_a_malformed_timeline_names_the_file_and_line(tmp_path):
    bad = tmp_path / "t"
    bad.write_text("# ackorder timeline v1\narrive,8,-1,100\nnot a mark\n")
    with pytest.raises(TimelineError, match=r"t:3: expected kind,request,offset,ns"):
        breakdown(bad)


def test_the_timeline_stops_marking_at_its_bound_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(timeline_mod, "MAX_MARKS", 3)
    t = timeline_mod.Timeline(tmp_path / "t")
    for offset in range(5):
        t.mark("ack", offset=offset)
    t.mark_all("sent", [0, 8, 16])
    t.write()
    text = (tmp_path / "t").read_text()
    assert text.startswith("# ackorder timeline v1 marks=3 dropped=5 ") and len(text.splitlines()) == 4


@pytest.mark.parametrize("flag, value, says", [("--timeline", "{dir}", "is a directory"),
                                               ("--timeline", "/nonexistent/t", "does not exist"),
                                               ("--inject-ack-lag-ms", "-1", "0..10000")])
def test_a_bad_timeline_or_ack_lag_is_one_line_and_exit_2(tmp_path, flag, value, says):
    import subprocess
    import sys

    role = ["replica", "--master", "127.0.0.1:1", "--name", "r1"] if flag == "--inject-ack-lag-ms" else ["master"]
    done = subprocess.run([sys.executable, "-m", "cli", "broker", *role, "--dir", str(tmp_path / "d"), flag,
                           value.format(dir=tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


# ------------------------------------------------------------------ the slave's ACK lag


def test_held_acks_past_the_bound_coalesce_into_the_newest(tmp_path, monkeypatch):
    """What a master feeds is bounded: past MAX_LAGGED_ACKS held ACKs, the newest takes the last one's place
    (ACKs are cumulative) and leaves no later than it would have."""
    from reference.real import replica_server

    monkeypatch.setattr(replica_server, "MAX_LAGGED_ACKS", 2)
    rt = ReplicaRuntime(ReplicaOptions(directory=tmp_path, name="r1", master=("127.0.0.1", 1), ack_lag_ms=50),
                        log=lambda msg: None)
    try:
        for offset in (100, 200, 300, 400):
            rt._hold_ack(Ack(offset, 1))
        assert [f.offset for _, f in rt._lagged_acks] == [100, 400]
        rt._send_lagged_acks()           # no connection: they answered data of a connection that is gone
        assert not rt._lagged_acks
    finally:
        rt.close_role()


def test_a_timer_due_at_a_fraction_of_a_ms_fires_once_that_moment_passed(monkeypatch):
    """--inject-ack-lag-ms is exact: a timer due at 10.5 ms fires at 10.6, where a loop comparing whole
    ms (floor(10.6) = 10) would have held it to 11."""
    from reference.real import loop as loop_mod

    clock_ns = [10_200_000]
    monkeypatch.setattr(loop_mod.time, "monotonic_ns", lambda: clock_ns[0])
    loop = Loop()
    fired = []
    loop.call_at(10.5, lambda: fired.append(clock_ns[0]))
    loop.run_once(0, lambda key, mask: None)
    assert not fired                              # 10.2 ms: not yet
    clock_ns[0] = 10_600_000
    loop.run_once(0, lambda key, mask: None)
    assert fired == [10_600_000]
    loop.close()


@needs_io_uring
def test_a_ring_that_fails_a_submission_closes_and_the_master_moves_to_its_thread(tmp_path, monkeypatch):
    """A failed io_uring_submit: the ring closes (no entry it queued can reach the kernel later against
    descriptors it no longer owns); the master logs it and fsyncs on its flush thread from then on.  The
    flush is planned once: with every fsync after the first failing by injection, the first put is still
    acknowledged and the second is not."""
    import threading

    from reference.config import StoreConfig
    from reference.real import uring
    from reference.real.master_server import MasterRuntime
    from reference.real.options import MasterOptions
    from reference.status import PutStatus
    from reference.tests.test_real_runtime import put

    def failing_submit(ring):
        raise OSError(11, "Resource temporarily unavailable")
    lines = []
    opts = MasterOptions(directory=tmp_path, config=StoreConfig(flush_disk_type="SYNC_FLUSH",
                                                                mapped_file_size_commit_log=1 << 20,
                                                                max_message_size=4096),
                         port=0, ha_port=0)
    runtime = MasterRuntime(opts, log=lines.append)
    ring = runtime.fsync_ring
    assert ring is not None
    runtime.store.fail_fsync_after = 1
    monkeypatch.setattr(uring.liburing, "io_uring_submit", failing_submit)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        assert put(runtime.port, 1, b"x" * 64).status == int(PutStatus.PUT_OK)
        assert put(runtime.port, 2, b"x" * 64).status != int(PutStatus.PUT_OK)     # the injected EIO
    finally:
        runtime.stop()
        thread.join(10)
    assert runtime.fsync_ring is None and runtime.stats["io_uring_failures"] == 1 and ring.closed
    assert any("io_uring failed" in line and "flush thread" in line for line in lines), lines
    assert runtime.stats["fsyncs"] == 1 and runtime.stats["fsyncs_io_uring"] == 0


@needs_io_uring
def test_closing_a_ring_waits_for_the_fsyncs_in_flight(tmp_path):
    """A role that closes with an fsync in flight (a node's role change): the ring finishes it before it
    is torn down (tearing it down would cancel one not yet started), answers nobody, closes the fds."""
    loop = Loop()
    ring = FsyncRing(loop)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"y" * 65536)
    copies = [os.dup(fd), os.open(tmp_path, os.O_RDONLY)]
    answers = []
    ring.submit(copies, [True, False], lambda: answers.append("done"), answers.append)
    ring.close()
    assert ring.finished_at_close == 1 and answers == []
    for c in copies:
        with pytest.raises(OSError):
            os.fstat(c)
    os.close(fd)
    loop.close()


@needs_io_uring
def test_a_short_submission_closes_the_ring_after_what_the_kernel_took(tmp_path, monkeypatch):
    """The kernel took one entry of a two-fsync job: the ring cannot run the job, so it closes and says
    so, but only once that entry finished (it holds one of the caller's descriptors, which the caller
    closes next)."""
    from reference.real import uring
    from reference.real.uring import RingUnavailable

    real_submit = uring.liburing.io_uring_submit

    def short(ring):
        real_submit(ring)          # both reach the kernel; the ring is told one did, and must wait for it
        return 1
    loop = Loop()
    ring = FsyncRing(loop)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    copies = [os.dup(fd), os.open(tmp_path, os.O_RDONLY)]
    monkeypatch.setattr(uring.liburing, "io_uring_submit", short)
    with pytest.raises(RingUnavailable, match="1 of 2 submitted"):
        ring.submit(copies, [True, False], lambda: None, lambda err: None)
    assert ring.closed and ring.finished_at_close == 1
    for c in [*copies, fd]:
        os.close(c)                # still the caller's: the ring closed none of them
    loop.close()
