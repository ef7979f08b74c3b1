"""A failover campaign on a real local[2] SparkSession: the correct reference
refines the failover spec over 120 seeds (0 violations, the determinism audit
passes, the report's counts show elections, truncations and SSS changes), and a
seeded failover bug is found, shrunk into a reproducer that reproduces."""

import json
import subprocess
import sys

from spark_fuzz.campaign import CampaignSpec, run_campaign
from spark_fuzz.report import write_report


def test_a_clean_failover_campaign_finds_nothing_and_counts_failovers(spark, tmp_path):
    summary = run_campaign(spark, CampaignSpec(seeds=120, out=tmp_path, model="failover", batch_seeds=60))
    assert summary["outcomes"] == {"ok": 120}, summary["outcomes"]
    assert summary["audit"]["mismatches"] == []
    for count in ("election", "truncations", "sssChanges", "brokerCrash", "powerLoss", "cutOff"):
        assert summary["faults"].get(count, 0) > 0, (count, summary["faults"])
    assert json.loads((tmp_path / "summary.json").read_text())["model"] == "failover"
    write_report(tmp_path, summary)
    report = (tmp_path / "report.md").read_text()
    assert "## Failover spec actions taken" in report and "| ElectMaster | " in report
    assert "tla/AckOrder.tla" not in report, "a failover campaign shows the write path's coverage"


def test_a_failover_bug_is_found_and_its_reproducer_reproduces(spark, tmp_path):
    summary = run_campaign(spark, CampaignSpec(seeds=120, out=tmp_path, model="failover",
                                               bug="BugConfirmNotClamped", batch_seeds=120))
    assert set(summary["outcomes"]) - {"ok"} == {"ConfirmWithinLog"}, summary["outcomes"]
    rep = summary["reproducers"][0]
    assert rep["reproduces"] and "--failover" in rep["reproducer"], rep
    args = rep["reproducer"].split()[1:]
    done = subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "reproduced: ConfirmWithinLog" in done.stdout, done.stdout + done.stderr
