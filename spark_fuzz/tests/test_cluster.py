"""A campaign on a real standalone cluster (a master and two workers started
from the pyspark package on 127.0.0.1): the same rows as local[2], and a
worker killed mid-campaign costs nothing — every seed is counted once."""

import threading
import time

import pytest

from spark_fuzz import ledger
from spark_fuzz.campaign import CampaignSpec, run_campaign, spark_session
from spark_fuzz.standalone import StandaloneCluster
from spark_fuzz.tests import sessions

# Two standalone clusters at once would share two cores between six JVMs: one worker runs them.
pytestmark = pytest.mark.xdist_group("spark-standalone")

SEEDS, STEPS, BATCH = 160, 300, 20


def rows_of(out, summary):
    return sorted((r["index"], r["seed"], r["outcome"], r["trace_hash"])
                  for r in ledger.read_ledger(out, summary["campaign"]).to_pylist())


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


def test_standalone_cluster_matches_local_and_survives_a_lost_worker(tmp_path):
    spec = dict(seeds=SEEDS, steps=STEPS, batch_seeds=BATCH, audit=False)
    on_local = run_campaign(sessions.shared(), CampaignSpec(out=tmp_path / "local", **spec))
    sessions.stop_shared()              # else the cluster's getOrCreate would hand back the local[2] session

    with StandaloneCluster(workers=2) as cluster:
        spark = spark_session(cluster.url, {"spark.executor.memory": "512m", "spark.cores.max": "2"})
        try:
            out = tmp_path / "cluster"
            campaign = CampaignSpec(out=out, **spec).campaign_id([()])
            killer = Killer(cluster, out, campaign)
            killer.start()
            on_cluster = run_campaign(spark, CampaignSpec(out=out, **spec))
            killer.join(timeout=10)
        finally:
            spark.stop()
        pids = cluster.all_pids

    total_batches = SEEDS // BATCH
    assert killer.batches_before_kill is not None and killer.batches_before_kill < total_batches, \
        "the worker was not killed mid-campaign"
    assert on_cluster["seeds"] == SEEDS and sum(on_cluster["outcomes"].values()) == SEEDS
    cluster_rows = rows_of(out, on_cluster)
    assert [r[0] for r in cluster_rows] == list(range(SEEDS))          # every seed exactly once
    assert cluster_rows == rows_of(tmp_path / "local", on_local)       # same outcomes and traces as local[2]
    for pid in pids:                                                    # nothing left running
        try:
            with open(f"/proc/{pid}/stat") as stat:
                assert stat.read().split()[2] == "Z", f"pid {pid} still running"
        except FileNotFoundError:
            pass
