"""Each benchmark scenario at a tiny size, to prove it runs end to end on real
processes (no timing assertions: speed is measured by `ackorder bench`)."""

import json

from cli.main import build_parser


def test_bench_all_tiny_writes_docs(tmp_path):
    from spark_fuzz.tests.sessions import stop_shared

    stop_shared()            # the sim scenario starts local[1] and local[2] sessions of its own
    args = build_parser().parse_args(["bench", "all", "--producers", "1,4", "--count", "40",
                                      "--tsp-producers", "4", "--tsp-count", "40", "--campaign-seeds", "8",
                                      "--rss-gib", "0.005", "--rss-size", "4096", "--cpu-count", "40",
                                      "--docs", str(tmp_path / "docs"), "--json", str(tmp_path / "all.json")])
    assert args.func(args) == 0
    results = json.loads((tmp_path / "all.json").read_text())
    ack = results["ack"]
    assert {(r["mode"], r["producers"]) for r in ack["rows"]} == {(m, p) for m in ("BLOCKING", "DECOUPLED")
                                                                for p in (1, 4)}
    assert all(r["statuses"] == {"PUT_OK": 40} for r in ack["rows"] + ack["sync_flush_sync_master"])
    gc = results["groupcommit"]
    per_message = [r for r in gc["rows"] if r["mode"] == "fsync_per_message"]
    assert all(r["fsyncs_per_msg"] == 1.0 for r in per_message)       # the baseline really fsyncs each message
    assert gc["disk"]["fdatasyncs_per_s"] > 0
    tsp = {r["mode"]: r for r in results["tsp"]["rows"]}
    assert set(tsp) == {"pool_off", "pool_on", "pool_on_fixed"}
    assert all(r["statuses"] == {"PUT_OK": 40} for r in tsp.values())
    assert results["sim"]["checked"]["steps"] == results["sim"]["unchecked"]["steps"] > 0
    assert results["sim"]["local[1]"]["seeds"] == results["sim"]["local[2]"]["seeds"] == 8
    text = (tmp_path / "docs" / "benchmarks.md").read_text()
    rss = results["rss"]
    assert rss["written_gib"] >= 0.005 and rss["master_peak_rss_mib"] > 0 and rss["replica_peak_rss_mib"] > 0
    cpu = results["cpu"]
    assert [r["mode"] for r in cpu["rows"]] == ["after sync_master_decoupled", "after sync_flush_group_commit"]
    assert all(r["cpu_us_per_msg"]["master"] >= 0 for r in cpu["rows"]) and "tottime" in cpu["profile"]   # /proc ticks: 10 ms
    assert "## The ratios" in text and "## What bounds these figures" in text
    assert all(f"## `{name}`" in text for name in ("ack", "groupcommit", "tsp", "sim", "rss", "cpu"))
    for name in ("ack", "groupcommit", "tsp", "sim", "rss", "cpu"):
        assert (tmp_path / "docs" / "benchmarks" / f"{name}.png").stat().st_size > 1000


def test_bad_producers_are_refused(tmp_path):
    from cli.main import main

    assert main(["bench", "ack", "--producers", "1,x"]) == 2
