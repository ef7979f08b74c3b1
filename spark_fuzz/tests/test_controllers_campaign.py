"""A campaign of several controllers on a real local SparkSession: the runtime's shard tables
and cores over an in-memory etcd keep the controllers spec's properties over 120 seeds (the
determinism audit passes, the report counts lease expiries and crashes), and a seeded runtime
bug is found, its reproducer reproducing it through the CLI."""

import json
import subprocess
import sys

from spark_fuzz.campaign import CampaignSpec, run_campaign
from spark_fuzz.report import write_report


def test_a_clean_controllers_campaign_finds_nothing(spark, tmp_path):
    summary = run_campaign(spark, CampaignSpec(seeds=120, out=tmp_path, model="controllers", batch_seeds=60))
    assert summary["outcomes"] == {"ok": 120}, summary["outcomes"]
    assert summary["audit"]["mismatches"] == []
    assert summary["faults"].get("expire", 0) > 0 and summary["faults"].get("crash", 0) > 0, summary["faults"]
    assert json.loads((tmp_path / "summary.json").read_text())["model"] == "controllers"
    write_report(tmp_path, summary)
    report = (tmp_path / "report.md").read_text()
    assert "tla/AckOrder.tla" not in report and "AckOrderFailover.tla" not in report, report
    assert "## Controllers steps taken" in report and "**never taken**" not in report, report
    for count in ("election", "alter", "stale", "lose", "ours after a retry", "given back"):
        assert summary["faults"].get(count, 0) > 0, (count, summary["faults"])


def test_a_controllers_bug_is_found_and_its_reproducer_reproduces(spark, tmp_path):
    summary = run_campaign(spark, CampaignSpec(seeds=60, out=tmp_path, model="controllers",
                                               bug="BugNoTakeoverGrace", batch_seeds=60))
    assert set(summary["outcomes"]) - {"ok"} == {"ElectOnlyASilentMaster"}, summary["outcomes"]
    rep = summary["reproducers"][0]
    assert rep["reproduces"] and "--controllers" in rep["reproducer"], rep
    done = subprocess.run([sys.executable, "-m", "cli", *rep["reproducer"].split()[1:]], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "reproduced: ElectOnlyASilentMaster" in done.stdout, done.stdout + done.stderr
