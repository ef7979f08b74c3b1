"""End-to-end test of ``spark_fuzz.standalone``: real JVMs, real sockets, no mocks.

One test on purpose: starting a cluster costs ~10 s, so the whole lifecycle
(start, run a job, lose a worker, stop, verify nothing leaked) is checked on
a single cluster.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from spark_fuzz.standalone import StandaloneCluster, session_builder_conf
from spark_fuzz.standalone import _descendants as descendants_of, _proc_table

# Two standalone clusters at once would share two cores between six JVMs: one worker runs them.
pytestmark = pytest.mark.xdist_group("spark-standalone")


def _proc_stat() -> dict[int, tuple[str, int]]:
    """pid -> (state letter, pgid) for every process, read from /proc."""
    return {pid: (info.state, info.pgid) for pid, info in _proc_table().items()}


def _descendants(pid: int) -> set[int]:
    """Current descendants of ``pid`` (executor JVMs, Python daemons, ...)."""
    return set(descendants_of(pid))


def _is_gone(pid: int) -> bool:
    """A pid is gone if it no longer exists, or only as a zombie awaiting its reaper."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return _proc_stat().get(pid, ("X", 0))[0] == "Z"


def _wait_gone(pids: set[int], timeout_s: float) -> set[int]:
    """Wait until every pid is gone; return the ones still alive at the deadline."""
    deadline = time.monotonic() + timeout_s
    alive = {p for p in pids if not _is_gone(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {p for p in alive if not _is_gone(p)}
    return alive


def test_cluster_runs_a_job_loses_a_worker_and_stops_clean(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, own_spark_sessions: None
) -> None:
    from pyspark.sql import SparkSession

    t0 = time.monotonic()
    with StandaloneCluster(workers=2, cores_per_worker=1, memory="1g",
                           log_dir=tmp_path / "logs") as cluster:
        started_s = time.monotonic() - t0
        assert cluster.url.startswith("spark://127.0.0.1:")
        assert cluster.url != "spark://127.0.0.1:7077"  # port was picked, not fixed
        assert len(cluster.worker_pids) == 2
        assert set(cluster.all_pids) == {cluster.master_pid, *cluster.worker_pids}
        for pid in cluster.all_pids:
            assert not _is_gone(pid)

        # The driver: pyspark launches its gateway JVM from SPARK_HOME and
        # ships PYSPARK_PYTHON to the executors, so the env must be set first.
        for key, value in cluster.spark_env().items():
            monkeypatch.setenv(key, value)
        builder = SparkSession.builder.master(cluster.url).appName("standalone-smoke")
        for key, value in {
            **session_builder_conf(),
            "spark.executor.memory": "512m",
            "spark.cores.max": "2",
        }.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            sc = spark.sparkContext
            # If some other session were still active, getOrCreate would hand
            # it back instead of connecting to our cluster.
            assert sc.master == cluster.url
            # A Python map forces executors to start Python workers: this
            # checks the JVMs *and* the PYSPARK_PYTHON plumbing.
            assert sc.parallelize(range(100), 4).map(lambda x: x * x).sum() == 328350
            # Executor JVMs (and pyspark's daemon.py) run under the workers.
            spawned = set().union(*(_descendants(p) for p in cluster.worker_pids))
            assert spawned, "the job ran, so the workers must have launched executors"
        finally:
            spark.stop()

        # A whole "machine" dies.
        victim = cluster.worker_pids[0]
        cluster.kill_worker(0)
        with pytest.raises(ProcessLookupError):
            os.kill(victim, 0)  # killed *and* reaped
        assert not _is_gone(cluster.worker_pids[1])
        assert not _is_gone(cluster.master_pid)

        started = cluster.all_pids
    # __exit__ ran stop(): every daemon, and everything they spawned, is gone.
    for pid in started:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    groups = set(started)
    leftovers = {
        pid for pid, (state, pgid) in _proc_stat().items() if pgid in groups and state != "Z"
    }
    assert not leftovers, f"processes left in the cluster's process groups: {leftovers}"
    assert not _wait_gone(spawned, timeout_s=5.0), "executor processes outlived the cluster"
    # stop() is idempotent and removes its temp dir; the requested logs stay.
    cluster.stop()
    assert not cluster.tmp_dir.exists()
    assert (tmp_path / "logs" / "master.log").is_file()

    print(f"cluster start {started_s:.1f} s "
          f"(StandaloneCluster.start_duration_s={cluster.start_duration_s:.1f} s), "
          f"whole test {time.monotonic() - t0:.1f} s")
