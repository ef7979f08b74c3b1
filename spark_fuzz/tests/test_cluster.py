"""A real standalone cluster (a master and two workers started from the pyspark
package on 127.0.0.1), end to end, on ONE cluster because starting one costs
about 10 s: its lifecycle (ports picked, executors launched under the workers,
a worker lost like a machine, everything it spawned gone after stop), and a
campaign on it that gives the same rows as local[2] while a worker is killed
mid-campaign — every seed is counted once; and a mutation campaign on the worker left."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from spark_fuzz import ledger
from spark_fuzz.campaign import CampaignSpec, run_campaign, spark_session
from spark_fuzz.standalone import JVM_OPTIONS, StandaloneCluster
from spark_fuzz.standalone import _descendants as descendants_of, _proc_table
from spark_fuzz.tests import sessions

# Two standalone clusters at once would share two cores between six JVMs: one worker runs them.
pytestmark = pytest.mark.xdist_group("spark-standalone")

SEEDS, STEPS, BATCH = 160, 300, 20


def rows_of(out, summary):
    return sorted((r["index"], r["seed"], r["outcome"], r["trace_hash"])
                  for r in ledger.read_ledger(out, summary["campaign"]).to_pylist())


def _proc_stat() -> dict[int, tuple[str, int]]:
    """pid -> (state letter, pgid) for every process, read from /proc."""
    return {pid: (info.state, info.pgid) for pid, info in _proc_table().items()}


def _cmdline(pid: int) -> list[str]:
    """A process's arguments ([] once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


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


class Killer(threading.Thread):
    """Kills worker 0 once the first batch is in the ledger."""

    def __init__(self, cluster, out, campaign):
        super().__init__(daemon=True)
        self.cluster, self.out, self.campaign = cluster, out, campaign
        self.batches_before_kill = None

    def run(self):
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            done = len(ledger.complete_batches(self.out, self.campaign))
            if done >= 1:
                self.cluster.kill_worker(0)
                self.batches_before_kill = done
                return
            time.sleep(0.05)


def test_standalone_cluster_lifecycle_and_a_campaign_that_survives_a_lost_worker(tmp_path: Path) -> None:
    spec = dict(seeds=SEEDS, steps=STEPS, batch_seeds=BATCH, audit=False)
    on_local = run_campaign(sessions.shared(), CampaignSpec(out=tmp_path / "local", **spec))
    sessions.stop_shared()              # else the cluster's getOrCreate would hand back the local[2] session

    t0 = time.monotonic()
    with StandaloneCluster(workers=2, cores_per_worker=1, memory="1g", log_dir=tmp_path / "logs") as cluster:
        started_s = time.monotonic() - t0
        assert cluster.url.startswith("spark://127.0.0.1:")
        assert cluster.url != "spark://127.0.0.1:7077"  # port was picked, not fixed
        assert len(cluster.worker_pids) == 2
        assert set(cluster.all_pids) == {cluster.master_pid, *cluster.worker_pids}
        assert not any(_is_gone(pid) for pid in cluster.all_pids)

        spark = spark_session(cluster.url, {"spark.executor.memory": "512m", "spark.cores.max": "2"})
        try:
            sc = spark.sparkContext
            # If some other session were still active, getOrCreate would hand it back instead.
            assert sc.master == cluster.url
            # A Python map forces executors to start Python workers: the JVMs *and* the PYSPARK_PYTHON plumbing.
            assert sc.parallelize(range(100), 4).map(lambda x: x * x).sum() == 328350
            # Executor JVMs (and pyspark's daemon.py) run under the workers.
            spawned = set().union(*(set(descendants_of(p)) for p in cluster.worker_pids))
            assert spawned, "the job ran, so the workers must have launched executors"

            out = tmp_path / "cluster"
            campaign = CampaignSpec(out=out, **spec).campaign_id([()])
            killer = Killer(cluster, out, campaign)
            killer.start()
            on_cluster = run_campaign(spark, CampaignSpec(out=out, **spec))
            killer.join(timeout=10)
            spawned |= set().union(*(set(descendants_of(p)) for p in cluster.worker_pids[1:]))
            # Every JVM of the cluster (master, workers, executors) runs with C1 alone (JVM_OPTIONS).
            jvms = {p: _cmdline(p) for p in {cluster.master_pid, cluster.worker_pids[1], *spawned}}
            jvms = {p: c for p, c in jvms.items() if c and Path(c[0]).name == "java"}
            assert len(jvms) >= 3, jvms
            assert all(JVM_OPTIONS in c for c in jvms.values()), jvms
            mutation = _mutation_campaign(spark, tmp_path / "mutate")    # on the worker left
        finally:
            spark.stop()

        # A whole "machine" died mid-campaign: killed *and* reaped; the rest still up.
        with pytest.raises(ProcessLookupError):
            os.kill(cluster.worker_pids[0], 0)
        assert not _is_gone(cluster.worker_pids[1])
        assert not _is_gone(cluster.master_pid)
        started = cluster.all_pids

    assert mutation["killed_by"] == {"unit": 1, "fuzz": 1}, mutation
    total_batches = SEEDS // BATCH
    assert killer.batches_before_kill is not None and killer.batches_before_kill < total_batches, \
        "the worker was not killed mid-campaign"
    assert on_cluster["seeds"] == SEEDS and sum(on_cluster["outcomes"].values()) == SEEDS
    cluster_rows = rows_of(out, on_cluster)
    assert [r[0] for r in cluster_rows] == list(range(SEEDS))          # every seed exactly once
    assert cluster_rows == rows_of(tmp_path / "local", on_local)       # same outcomes and traces as local[2]

    # __exit__ ran stop(): every daemon, and everything they spawned, is gone.
    for pid in started:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    groups = set(started)
    leftovers = {pid for pid, (state, pgid) in _proc_stat().items() if pgid in groups and state != "Z"}
    assert not leftovers, f"processes left in the cluster's process groups: {leftovers}"
    assert not _wait_gone(spawned, timeout_s=5.0), "executor processes outlived the cluster"
    # stop() is idempotent and removes its temp dir; the requested logs stay.
    cluster.stop()
    assert not cluster.tmp_dir.exists()
    assert (tmp_path / "logs" / "master.log").is_file()
    print(f"cluster start {started_s:.1f} s (StandaloneCluster.start_duration_s={cluster.start_duration_s:.1f} s), "
          f"whole test {time.monotonic() - t0:.1f} s")


def _mutation_campaign(spark, out: Path) -> dict:
    """`ackorder mutate` on the cluster (issue 36): two mutants of the SyncStateSet policy, one the
    unit tests kill and one only the failover simulation kills, each judged by an executor."""
    from spark_fuzz.mutation.campaign import MutationSpec, run_mutation_campaign
    from spark_fuzz.mutation.killsuite import SuiteOptions
    from spark_fuzz.tests.test_mutation import KILLED_BY_FUZZ, KILLED_BY_UNIT, POLICY, _find

    only = (_find(*KILLED_BY_UNIT).mutant_id, _find(*KILLED_BY_FUZZ).mutant_id)
    return run_mutation_campaign(spark, MutationSpec(modules=(POLICY,), out=out, only=only,
                                                     suite=SuiteOptions(fuzz_seeds=4), batch=2))
