"""Long-run campaigns (`ackorder fuzz --long`) on the shared local[2] session: one Spark task
per seed, a run that stops at its first violation and says at which step, each seed's own
CPU time, bugs found per CPU-hour in the summary and the report, and --resume."""

import json

from spark_fuzz import ledger
from spark_fuzz.campaign import CampaignSpec, read_history, run_campaign
from spark_fuzz.report import write_report
from tla.manifest import expected_violations

LONG_STEPS = 20_000          # the make-test size; the real thing is 1,000,000 per seed
BUG = "BugTimeoutAsOK"       # a seed finds it after a few hundred steps: far before the run's end


def rows_of(out, summary):
    return sorted(ledger.read_ledger(out, summary["campaign"]).to_pylist(), key=lambda r: r["index"])


def test_a_clean_long_campaign_runs_every_step_and_counts_its_cpu(spark, tmp_path):
    summary = run_campaign(spark, CampaignSpec(seeds=2, out=tmp_path, steps=LONG_STEPS, mode="long"))
    rows = rows_of(tmp_path, summary)
    assert summary["mode"] == "long" and summary["outcomes"] == {"ok": 2}, summary["reproducers"]
    assert all(r["steps"] >= LONG_STEPS and r["violation_step"] == 0 for r in rows), rows
    # one task per seed: each in a batch of two seeds split into two partitions, so two workers
    # (local[2] runs both at once) — and every seed's CPU time is its own, a fraction of a second
    # per thousand steps, never zero
    assert len(ledger.complete_batches(tmp_path, summary["campaign"])) == 1
    assert all(0 < r["cpu_s"] < r["steps"] / 100 for r in rows), [r["cpu_s"] for r in rows]
    assert abs(summary["cpu_seconds"] - sum(r["cpu_s"] for r in rows)) < 1e-2
    assert summary["bugs_found"] == 0 and summary["bugs_per_cpu_hour"] == 0.0
    assert summary["first_violation"] is None and summary["cpu_s_to_first_violation"] is None
    assert summary["audit"]["seeds"] == 0        # a clean long seed is not re-run


def test_a_long_campaign_stops_each_seed_at_its_violation_and_reports_per_cpu_hour(spark, tmp_path):
    short = run_campaign(spark, CampaignSpec(seeds=20, out=tmp_path, steps=150, bug=BUG, audit=False))
    summary = run_campaign(spark, CampaignSpec(seeds=2, out=tmp_path, steps=LONG_STEPS, bug=BUG, mode="long"))
    assert summary["campaign"] != short["campaign"]
    rows = rows_of(tmp_path, summary)
    found = [r for r in rows if r["outcome"] != "ok"]
    # (a seed whose configuration cannot time out — ASYNC_FLUSH and ASYNC_MASTER — runs clean to the end)
    assert found and {r["outcome"] for r in found} <= expected_violations(BUG), rows
    assert summary["bugs_found"] == 1
    for r in found:                     # stopped at the violation, far before the end, and says where
        assert 0 < r["violation_step"] == r["steps"] < LONG_STEPS, r
    for r in rows:
        assert r in found or (r["violation_step"] == 0 and r["steps"] >= LONG_STEPS), r
    cpu_hours = summary["cpu_seconds"] / 3600
    assert 0 < summary["cpu_seconds"] < 20 and abs(summary["bugs_per_cpu_hour"] * cpu_hours - 1) < 1e-2
    first = summary["first_violation"]
    assert first["index"] == found[0]["index"] and first["step"] == found[0]["violation_step"]
    assert abs(summary["cpu_s_to_first_violation"] - sum(r["cpu_s"] for r in rows[:first["index"] + 1])) < 1e-2
    assert summary["audit"]["seeds"] == len(found) and summary["audit"]["mismatches"] == []
    rep = summary["reproducers"][0]
    assert rep["reproduces"] and rep["shrunk_steps"] == first["step"], rep
    # Both modes in one --out: the history keeps each campaign's figure, and the report shows both.
    history = read_history(tmp_path)
    assert [h["mode"] for h in history] == ["short", "long"]
    assert all(h["bugs_found"] == 1 and h["bugs_per_cpu_hour"] > 0 for h in history), history
    write_report(tmp_path, summary)
    md = (tmp_path / "report.md").read_text()
    assert "## Bugs found per CPU-hour" in md and f"{summary['bugs_per_cpu_hour']:,.1f} bugs found per CPU-hour" in md
    assert f"| {short['campaign']} | short | {BUG} |" in md and f"| {summary['campaign']} | long | {BUG} |" in md
    assert "bugs found per CPU-hour" in (tmp_path / "report.html").read_text()
    assert json.loads((tmp_path / "summary.json").read_text())["mode"] == "long"


def test_a_long_campaign_resumes(spark, tmp_path):
    first = run_campaign(spark, CampaignSpec(seeds=1, out=tmp_path, steps=5_000, mode="long", audit=False))
    more = run_campaign(spark, CampaignSpec(seeds=3, out=tmp_path, steps=5_000, mode="long", audit=False,
                                            resume=True))
    assert first["campaign"] == more["campaign"] and more["seeds_run_now"] == 2
    assert [r["index"] for r in rows_of(tmp_path, more)] == [0, 1, 2]
    assert more["cpu_seconds"] > first["cpu_seconds"] > 0
