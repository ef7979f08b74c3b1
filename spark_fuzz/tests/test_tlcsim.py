"""TLC's random simulation on Spark: one TLC per task with its own seed, rows in the fuzz ledger
with the branches TLC took, a bug model's property found, the same seeds on every run."""

from __future__ import annotations

import json

import pytest

from spark_fuzz import ledger
from spark_fuzz.tlcsim import SimCampaign, run_sim_campaign, task_seed

pytestmark = pytest.mark.tlc


def test_a_green_model_simulates_clean_with_coverage(spark, tmp_path):
    spec = SimCampaign(model="sync_flush", traces=200, tasks=4, depth=30, out=tmp_path)
    summary = run_sim_campaign(spark, spec)
    rows = ledger.read_ledger(tmp_path, summary["campaign"]).to_pylist()
    assert summary["outcomes"] == {"ok": 4} and len(rows) == 4
    assert sorted(r["seed"] for r in rows) == sorted(task_seed(spec.campaign_id(), i) for i in range(4))
    assert len({r["seed"] for r in rows}) == 4 and summary["traces"] == 200 and summary["steps"] > 200
    branches = json.loads(rows[0]["branches"])
    assert branches.get("Put/PutAppend", 0) > 0 and branches.get("Flush/FlushDurable", 0) > 0
    assert "Flush/FlushBehindHole" not in branches           # a correct spec never takes it


def test_a_bug_model_is_found_and_the_seeds_reproduce(spark, tmp_path):
    spec = SimCampaign(model="BugAckOnWrote", traces=40, tasks=2, depth=10, out=tmp_path)
    first = run_sim_campaign(spark, spec)
    assert set(first["outcomes"]) == {"NoAckBeforeFlush"} and first["first_violation_s"] is not None
    assert first["reproducers"][0]["reproducer"].startswith("ackorder tlc BugAckOnWrote --simulate ")
    again = run_sim_campaign(spark, spec)
    key = lambda s: sorted((r["seed"], r["outcome"], r["signature"]) for r in s["reproducers"])  # noqa: E731
    assert key(first) == key(again)


def test_a_task_keeps_nothing_in_the_temporary_directory(tmp_path, monkeypatch):
    """A campaign runs thousands of tasks on each worker: TLC's log goes with its task."""
    import tempfile

    from spark_fuzz.tlcsim import SimTask, run_task

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    row = run_task(SimTask(campaign="leak", index=0, model="sync_flush", traces=20, depth=10, timeout_s=120.0))
    assert row["outcome"] == "ok" and row["steps"] > 0, row
    assert not list(scratch.iterdir())
