"""Campaigns on a real local[2] SparkSession: the ledger, resume, partitioning
independence, bad input, and every bug switch found with a reproducer."""

import json
import shutil

import pytest

from spark_fuzz import ledger
from spark_fuzz.campaign import CampaignSpec, run_campaign
from spark_fuzz.seeds import Job, derive_seed, load_matrix, run_job, signature
from cli.main import build_parser
from spec.config import BUG_NAMES, ConfigError
from tla.manifest import expected_violations

STEPS = 150
EXPECTED = {bug: expected_violations(bug) for bug in BUG_NAMES}
BUG_SEEDS = 300          # the make-test version; the full campaign of 10,000 seeds is a benchmark


def ledger_rows(out, summary):
    return ledger.read_ledger(out, summary["campaign"]).to_pylist()


def test_campaign_writes_one_row_per_seed(spark, tmp_path):
    spec = CampaignSpec(seeds=24, out=tmp_path, steps=STEPS, batch_seeds=10)
    summary = run_campaign(spark, spec)
    rows = ledger_rows(tmp_path, summary)
    assert sorted(r["index"] for r in rows) == list(range(24))
    assert all(r["seed"] == derive_seed(summary["campaign"], r["index"]) for r in rows)
    assert summary["seeds"] == 24 and sum(summary["outcomes"].values()) == 24
    assert summary["outcomes"] == {"ok": 24}, summary["reproducers"]
    written = json.loads((tmp_path / "summary.json").read_text())
    assert {"seeds", "steps", "seconds", "seeds_per_second", "steps_per_second", "outcomes",
            "reproducers"} <= written.keys()
    assert len(ledger.complete_batches(tmp_path, summary["campaign"])) == 3


def test_the_session_started_off_the_main_thread_is_the_main_threads_active_one(spark):
    """spark_session starts its session on a thread of its own; PySpark's pinned threads keep the JVM's
    active session per thread, so SparkSession.getActiveSession() on the main thread was None."""
    import threading

    from pyspark.sql import SparkSession

    from spark_fuzz.campaign import _started_off_the_main_thread

    assert threading.current_thread() is threading.main_thread()
    spark._get_j_spark_session_class(spark._jvm).clearActiveSession()
    assert SparkSession.getActiveSession() is None         # the main thread's, as a start thread left it
    assert _started_off_the_main_thread(lambda stopping: spark) is spark
    assert SparkSession.getActiveSession() is not None


def test_the_drivers_jvm_runs_with_c1_alone(spark):
    """spark_session's JVM options (standalone.JVM_OPTIONS) reach the driver's JVM, as its own
    runtime reports its arguments; a --conf of the same key would replace them (cli/fuzz.py)."""
    from spark_fuzz.standalone import JVM_OPTIONS, jvm_conf

    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert JVM_OPTIONS in arguments, arguments
    assert JVM_OPTIONS in spark.sparkContext.getConf().get("spark.executor.extraJavaOptions").split()
    assert set(jvm_conf()) == {"spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"}


def test_resume_runs_only_what_the_ledger_lacks(spark, tmp_path):
    spec = CampaignSpec(seeds=12, out=tmp_path, steps=STEPS, batch_seeds=6, audit=False)
    first = run_campaign(spark, spec)
    # A driver killed while writing a batch leaves it without _SUCCESS: that batch is run again.
    torn = ledger.complete_batches(tmp_path, first["campaign"])[1]
    (torn / "_SUCCESS").unlink()
    more = run_campaign(spark, CampaignSpec(seeds=20, out=tmp_path, steps=STEPS, batch_seeds=6, resume=True,
                                            audit=False))
    assert more["seeds_run_now"] == 6 + 8
    rows = ledger_rows(tmp_path, more)
    assert sorted(r["index"] for r in rows) == list(range(20))      # each seed exactly once
    shutil.rmtree(torn)                                               # the stale batch is not counted


def test_rows_do_not_depend_on_partitioning(spark, tmp_path):
    a = run_campaign(spark, CampaignSpec(seeds=16, out=tmp_path / "a", steps=STEPS, batch_seeds=16, audit=False))
    b = run_campaign(spark, CampaignSpec(seeds=16, out=tmp_path / "b", steps=STEPS, batch_seeds=5, audit=False))
    key = lambda rows: sorted((r["index"], r["seed"], r["trace_hash"], r["outcome"]) for r in rows)  # noqa: E731
    assert key(ledger_rows(tmp_path / "a", a)) == key(ledger_rows(tmp_path / "b", b))
    plain = [run_job(Job(a["campaign"], i, (), None, STEPS)) for i in range(16)]
    assert key(plain) == key(ledger_rows(tmp_path / "a", a))


def test_config_matrix_entries_are_used_and_checked(spark, tmp_path):
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps([{"flush_disk_type": "SYNC_FLUSH", "replicas": 1},
                                  {"broker_role": "ASYNC_MASTER", "transient_store_pool_enable": True}]))
    summary = run_campaign(spark, CampaignSpec(seeds=6, out=tmp_path, steps=STEPS, matrix_path=matrix,
                                               audit=False))
    configs = [json.loads(r["config"]) for r in sorted(ledger_rows(tmp_path, summary), key=lambda r: r["index"])]
    assert all(c["flush_disk_type"] == "SYNC_FLUSH" and c["replicas"] == 1 for c in configs[0::2])
    assert all(c["broker_role"] == "ASYNC_MASTER" and c["transient_store_pool_enable"] for c in configs[1::2])


@pytest.mark.parametrize("content, problem", [
    ("[{\"flush_disk_type\": \"SYNC_FLUSH\"}, {\"no_such_knob\": 1}]", "entry 1: --config no_such_knob"),
    ("[{\"replicas\": \"many\"}]", "entry 0: --config replicas=many: expected an integer"),
    ("{\"a\": 1}", "expected a non-empty JSON list"),
    ("[{\"flush_disk_type\": \"SYNC_FLUSH\"},\n oops]", "line 2"),
    ("[3]", "entry 0: expected an object"),
])
def test_bad_matrix_names_the_place(tmp_path, content, problem):
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    assert str(path) in str(err.value) and problem in str(err.value)


def test_signature_names_the_breaking_action_and_the_last_fault():
    assert signature("NoAckBeforeFlush", ["Put", "ReplicaAck", "Respond"]) == "NoAckBeforeFlush at Respond"
    assert signature("AckedSurvivesCrash", ["Put", "FlushFail", "Put", "Respond", "MasterMachineCrash"]) == \
        "AckedSurvivesCrash at MasterMachineCrash after FlushFail"
    assert signature("X", []) == "X"


@pytest.mark.parametrize("bug", BUG_NAMES)
def test_campaign_finds_bug_with_a_reproducer(spark, tmp_path, bug):
    spec = CampaignSpec(seeds=BUG_SEEDS, out=tmp_path, steps=STEPS, bug=bug, batch_seeds=100, max_failures=1)
    summary = run_campaign(spark, spec)
    found = set(summary["outcomes"]) - {"ok"}
    assert found & EXPECTED[bug], f"{bug}: {summary['outcomes']} in {summary['seeds']} seeds"
    rep = next(r for r in summary["reproducers"] if r["outcome"] in EXPECTED[bug])
    assert rep["reproduces"], rep
    # The one-line reproducer gives the same trace hash (exit 1 = violation, 3 = hash differs).
    parsed = build_parser().parse_args(rep["reproducer"].split()[1:])
    assert parsed.func(parsed) == 1
