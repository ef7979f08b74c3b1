"""Each benchmark scenario at a tiny size, to prove it runs end to end on real
processes (no timing assertions: speed is measured by `ackorder bench`)."""

import json

import pytest

from cli.main import build_parser


def test_bench_all_tiny_writes_docs(tmp_path):
    from spark_fuzz.tests.sessions import stop_shared

    stop_shared()            # the sim scenario starts local[1] and local[2] sessions of its own
    args = build_parser().parse_args(["bench", "all", "--producers", "1,4", "--count", "40",
                                      "--tsp-producers", "4", "--tsp-count", "40", "--campaign-seeds", "8",
                                      "--machine-examples", "2", "--compare-bugs", "none",
                                      "--sim-steps", "300,1000", "--sim-seeds", "0",
                                      "--rss-gib", "0.005", "--rss-size", "4096", "--cpu-count", "40",
                                      "--goal-runs", "1",
                                      "--docs", str(tmp_path / "docs"), "--json", str(tmp_path / "all.json")])
    assert args.func(args) == 0
    results = json.loads((tmp_path / "all.json").read_text())
    ack = results["ack"]
    assert {(r["mode"], r["producers"]) for r in ack["rows"]} == {
        (m, p) for m in ("BLOCKING", "DECOUPLED", "DECOUPLED_SLAVE_LAG") for p in (1, 4)}
    lagged = [r for r in ack["rows"] if r["mode"] == "DECOUPLED_SLAVE_LAG"]
    assert all(r["rtt_ms"] >= 2 * ack["delay_ms_each_way"] and r["cpu_us_per_msg"]["proxy"] == 0 for r in lagged)
    assert all("slave_lag_over_proxy" in r for r in ack["ratios"])
    assert all(r["statuses"] == {"PUT_OK": 40} for r in ack["rows"] + ack["sync_flush_sync_master"])
    network = ack["network"]          # the bound probed by the same run: the proxy alone, an echo behind it
    assert network["through_proxy_ms"]["p50"] >= 2 * ack["delay_ms_each_way"] > network["direct_ms"]["p50"]
    assert all(r["nearer_bound"] in ("round trip", "CPU") and r["of_nearer_bound"] > 0 for r in ack["rows"])
    assert all(r["cpu_us_per_msg"]["proxy"] >= 0 for r in ack["rows"])
    gc = results["groupcommit"]
    per_message = [r for r in gc["rows"] if r["mode"] == "fsync_per_message"]
    assert all(r["fsyncs_per_msg"] == 1.0 for r in per_message)       # the baseline really fsyncs each message
    assert gc["disk"]["fdatasyncs_per_s"] > 0
    assert all(r["sync_latency_bound_ms"] > r["sync_latency_bound_ms"] - 2 * gc["disk"]["fdatasync_ms"]["p50"] >= 0
               and r["sync_latency_over_bound"] > 0 for r in gc["ratios"])
    tsp = {r["mode"]: r for r in results["tsp"]["rows"]}
    assert set(tsp) == {"pool_off", "pool_on", "pool_on_fixed"}
    assert all(r["statuses"] == {"PUT_OK": 40} for r in tsp.values())
    assert [(r["kind"], r["steps"]) for r in results["sim"]["rows"]] == [("checked", 300), ("checked", 1000),
                                                                        ("unchecked", 1000)]
    assert results["sim"]["local[1]"]["seeds"] == results["sim"]["local[2]"]["seeds"] == 8
    assert results["sim"]["plain"]["seeds"] == 8 and results["sim"]["local[1]"]["task_cpu_s"] > 0
    assert results["sim"]["local[2]"]["tree_cpu_s"] >= results["sim"]["local[2]"]["task_cpu_s"] * 0.9
    assert [r["machine"] for r in results["sim"]["machines"]["rows"]] == ["write-path", "failover"]
    costs = results["sim"]["event_costs"]
    assert [(r["workload"], r["seeds"], r["steps"]) for r in costs] == [("campaign", 8, 400), ("long", 1, 1000)]
    assert all(r["checked_us"] > r["unchecked_us"] > r["cores_us"] > 0 and r["step_us"] > r["twin_us"] > 0
               for r in costs), costs
    text = (tmp_path / "docs" / "benchmarks.md").read_text()
    rss = results["rss"]
    assert rss["written_gib"] >= 0.005 and rss["master_peak_rss_mib"] > 0 and rss["replica_peak_rss_mib"] > 0
    cpu = results["cpu"]
    assert [r["mode"] for r in cpu["rows"]] == ["after sync_master_decoupled", "after sync_flush_group_commit"]
    assert all(r["cpu_us_per_msg"]["master"] >= 0 for r in cpu["rows"]) and "tottime" in cpu["profile"]   # /proc ticks: 10 ms
    goals = results["goals"]          # issue 39's goals: every one computed, each beside its bound
    assert goals["runs"] == 1 and goals["baseline"] is None and len(goals["bounds"]) == 1
    assert all(r["after"] is not None and r["met"] in (True, False) for r in goals["rows"]), goals["rows"]
    assert {"async_flush_64", "group_commit_64", "slave_lag_64"} <= set(goals["breakdowns"])
    held = goals["breakdowns"]["slave_lag_64"]["phases_ms"]["slave's ACK out"]["avg"]
    assert held >= 4.0 > goals["breakdowns"]["decoupled_64"]["phases_ms"]["slave's ACK out"]["avg"]
    assert all("breakdown" in r and r["breakdown"]["requests"] > 0 for r in ack["rows"])
    assert "## The goals of issue 39" in text and "### Where a request's time goes" in text
    sim = text[text.index("## `sim`"):text.index("## `rss`")]    # the section `bench sim` writes, not a thinner one
    assert "Written by `ackorder bench all --sim-steps 300,1000" in sim and "### Where an event's time goes" in sim
    assert "## The ratios" in text and "## What bounds these figures" in text
    assert text.index("## Each figure beside its bound") < text.index("## The ratios")    # the bounds lead
    assert all(f"## `{name}`" in text for name in ("ack", "groupcommit", "tsp", "goals", "sim", "rss", "cpu"))
    for name in ("ack", "groupcommit", "tsp", "goals", "sim", "rss", "cpu"):
        assert (tmp_path / "docs" / "benchmarks" / f"{name}.png").stat().st_size > 1000


def test_the_nearer_bound_is_the_lower_of_the_round_trip_and_the_cpu():
    from reference.bench.bounds import nearer_bound

    by_rtt = nearer_bound(9_000, 64, 4.0, {"master": 10, "replica": 10, "load": 10, "proxy": 10}, cores=2)
    assert by_rtt["round_trip_bound_msgs_per_s"] == 16_000 and by_rtt["cpu_bound_msgs_per_s"] == 50_000
    assert by_rtt["nearer_bound"] == "round trip" and by_rtt["of_nearer_bound"] == 0.562
    by_cpu = nearer_bound(20_000, 256, 4.0, {"master": 40, "replica": 20, "load": 30, "proxy": 10}, cores=2)
    assert by_cpu["nearer_bound"] == "CPU" and by_cpu["cpu_bound_msgs_per_s"] == 20_000
    assert by_cpu["of_nearer_bound"] == 1.0


def test_bench_sim_runs_each_point_from_both_trees_side_by_side(tmp_path):
    """The structure of `ackorder bench sim --baseline` (never its timings): every point runs from the
    baseline tree right before the same point from this one, each in its own process."""
    from reference.bench.simrates import HERE, sim_rates

    result = sim_rates((200, 50), seeds=(3, 9), baseline=HERE, baseline_max_steps=100)
    assert [(r["tree"], r["seed"], r["kind"], r["steps"]) for r in result["rows"]] == [
        (t, 3, "checked", 50) for t in ("before", "after")] + [("after", 3, "checked", 200)] + [
        (t, 9, "checked", 50) for t in ("before", "after")] + [("after", 9, "checked", 200)] + [
        ("after", 3, "unchecked", 200), ("after", 9, "unchecked", 200)]     # the baseline stops at 100 steps
    assert all(r["steps_per_s"] > 0 and r["cpu_s"] >= 0 and r["sim_ms_per_s"] > 0 and r["puts_per_s"] > 0
               for r in result["rows"])
    assert set(result["ratios"]) >= {"after_seed3_200_over_50", "after_seed9_check_cost",
                                     "after_over_before_seed9_checked_50"}


def test_bench_sim_writes_its_section_of_the_docs(tmp_path):
    from cli.main import main

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "benchmarks.md").write_text("# Benchmarks\n\n## `sim`\n\nold figures\n\n## `rss`\n\nkept\n")
    assert main(["bench", "sim", "--sim-steps", "100,300", "--sim-seeds", "9", "--campaign-seeds", "0",
                 "--machine-examples", "2", "--docs", str(docs)]) == 0
    text = (docs / "benchmarks.md").read_text()
    assert "| after |  | machine steps/s: write-path (2 examples, ci) |" in text
    assert "| | machine steps/s, failover |" in text
    assert "old figures" not in text and "## `rss`\n\nkept" in text
    assert "| after | 9 | checked | 300 |" in text and "### What bounds the simulator" in text
    assert "### Where an event's time goes" in text and "| seed 9, 300 steps | 300 |" in text
    assert "| >= 150,000 unchecked steps/s (seed 9) | 6.67 µs |" in text


def test_what_each_goal_allows_per_event():
    """The campaign's allowance is the baseline's CPU per seed over the goal's factor, per event of this
    tree; the checker's is what this tree's unchecked event leaves of it."""
    from reference.bench.eventcost import budget_lines, budgets

    campaign = {"workload": "campaign", "first_seed": 1, "seeds": 10, "steps": 400, "events": 1000,
                "events_per_seed": 100.0, "unchecked_us": 100.0, "checked_us": 400.0, "checker_us": 300.0,
                "timed_unchecked_us": 110.0, "cores_us": 40.0, "timed_checked_us": 440.0, "step_us": 250.0,
                "twin_us": 120.0, "invariants_us": 50.0, "abstraction_us": 60.0, "step_rest_us": 20.0}
    result = {"before local[1]": {"seeds_per_s": 10.0}, "event_costs": [campaign]}
    b = budgets(result, 40_000, 150_000, 3.0)
    assert b == {"checked_us": 25.0, "unchecked_us": 6.67, "campaign_us": 333.33, "campaign_checker_us": 233.33}
    lines = budget_lines(result, {"checked": 40_000, "unchecked": 150_000, "campaign": 3.0})
    assert lines[-1].startswith("| campaign >= 3.0x the baseline's seeds/s | 333.33 µs, of which the checker "
                                "233.33 µs") and "the twin's actions alone: 120.0 µs" in lines[-1]
    assert "campaign_us" not in budgets({"event_costs": [campaign]}, 40_000, 150_000, 3.0)   # no baseline: no allowance


def test_bench_sim_refuses_a_baseline_that_is_no_source_tree(tmp_path):
    from cli.main import main

    assert main(["bench", "sim", "--quick", "--sim-steps", "10", "--baseline", str(tmp_path)]) == 2
    assert main(["bench", "sim", "--quick", "--sim-steps", "10,x"]) == 2
    assert main(["bench", "sim", "--quick", "--sim-steps", "10", "--sim-seeds", "-1"]) == 2
    assert main(["bench", "sim", "--quick", "--sim-steps", "10", "--compare-bugs", "BugNoSuchThing"]) == 2
    assert main(["bench", "sim", "--quick", "--sim-steps", "10", "--machine-examples", "-1"]) == 2


def test_bench_sim_compares_bugs_per_cpu_hour_long_against_short():
    """The structure of the long/short comparison (never its timings): both modes on one bug switch,
    each with its bugs per CPU-hour and the CPU-seconds to its first violation."""
    from spark_fuzz.bench import ComparePlan, mode_comparison
    from spark_fuzz.tests.sessions import stop_shared

    stop_shared()            # the comparison starts a session of its own
    result = mode_comparison(("BugAckOnWrote",), ComparePlan(20, 150, 2, 5_000))
    assert [(r["bug"], r["mode"], r["seeds"], r["steps_per_seed"]) for r in result["rows"]] == [
        ("BugAckOnWrote", "short", 20, 150), ("BugAckOnWrote", "long", 2, 5_000)]
    for r in result["rows"]:
        assert r["found"] == ["NoAckBeforeFlush"] and r["failing_seeds"] >= 1, r
        assert r["cpu_s"] > 0 and r["cpu_s_to_first"] > 0
        assert abs(r["bugs_per_cpu_hour"] * r["cpu_s"] / 3600 - 1) < 1e-2, r


def test_bad_producers_are_refused(tmp_path):
    from cli.main import main

    assert main(["bench", "ack", "--producers", "1,x"]) == 2


# every measured column of a `bench controller` row, set to 1 (the docs tests' rows)
CONTROLLER_ROW = {k: 1 for k in ("groups", "heartbeats_per_s", "alters_per_s", "alter_p50_ms", "alter_p99_ms",
                                 "records_per_fsync", "fsync_mean_ms", "elections", "election_p50_ms",
                                 "election_p99_ms", "beyond_timeout_p50_ms", "beyond_timeout_p99_ms",
                                 "elections_per_s", "heartbeat_p99_ms", "controller_cpu_s")}


def test_bench_controller_quick_reports_both_designs_side_by_side(tmp_path):
    """The structure of `ackorder bench controller --quick` (never its timings)."""
    from reference.bench.controller import QUICK, controller

    result = controller(tmp_path, QUICK)
    rows = result["rows"]
    assert [(r["design"], r["groups"]) for r in rows] == [(d, g) for g in QUICK.groups for d in QUICK.designs]
    for r in rows:
        assert r["heartbeats_per_s"] > 0 and r["alters_per_s"] > 0 and r["elections"] >= 1
        assert r["election_p50_ms"] >= QUICK.timeout_ms, "a master is replaced only after its heartbeat timeout"
        assert r["fsyncs"] >= 1 and r["records"] >= r["fsyncs"]
    serial = [r for r in rows if r["design"] == "serial"]
    assert all(r["records_per_fsync"] == 1.0 for r in serial), "the serial design has one record per fsync"
    assert set(result["ratios"]) >= {f"pipelined/serial alters_per_s at {max(QUICK.groups)} groups"}


def test_the_controller_section_is_replaced_in_place_and_kept_by_bench_all(tmp_path):
    from reference.bench.controller import SECTION, kept_section, update_docs

    row = dict(CONTROLLER_ROW)
    result = {"plan": {"heartbeat_interval_ms": 1000, "timeout_ms": 10_000, "steady_s": 10, "alter_interval_ms": 5000},
              "disk": {"fdatasyncs_per_s": 300}, "load_average": [1, 2], "cores": 2, "ratios": {"r": 1},
              "rows": [{"design": "serial", "store": "file", **row}]}
    (tmp_path / "benchmarks.md").write_text("# Benchmarks\n\n## `ack`\n\nA\n\n## What bounds these figures\n\nB\n\n"
                                            "## `chaos --failover`\n\nC\n")
    update_docs(result, tmp_path)
    once = (tmp_path / "benchmarks.md").read_text()
    update_docs(result, tmp_path)
    text = (tmp_path / "benchmarks.md").read_text()
    assert text == once and text.count(SECTION) == 1 and "| serial | file | 1 |" in text
    assert text.index("## What bounds") < text.index(SECTION), "a new section goes at the end"
    kept = kept_section(text)
    assert kept[0] == SECTION and any(line.startswith("| serial | file | 1 |") for line in kept)
    assert not any(line.startswith("## What bounds") for line in kept)
    assert "## `chaos --failover`" in kept and "C" in kept, "the real failover figures are kept by bench all"


def test_a_store_run_writes_its_subsection_and_a_default_run_keeps_it(tmp_path):
    from reference.bench.controller import SECTION, STORES_SECTION, kept_section, update_docs

    row = dict(CONTROLLER_ROW)
    common = {"disk": {"fdatasyncs_per_s": 300}, "load_average": [1, 2], "cores": 2, "ratios": {"r": 1}}
    plan = {"heartbeat_interval_ms": 1000, "timeout_ms": 10_000, "steady_s": 10, "alter_interval_ms": 5000,
            "groups": [100]}
    default = {**common, "plan": {**plan, "stores": ["file"]}, "rows": [{"design": "serial", "store": "file", **row}]}
    stores = {**common, "plan": {**plan, "stores": ["file", "etcd"]},
              "rows": [{"design": "pipelined", "store": s, **row} for s in ("file", "etcd")]}
    (tmp_path / "benchmarks.md").write_text("# Benchmarks\n\n## `ack`\n\nA\n\n## What bounds\n\nB\n")
    update_docs(default, tmp_path)
    update_docs(stores, tmp_path)
    once = (tmp_path / "benchmarks.md").read_text()
    update_docs(stores, tmp_path)
    assert (tmp_path / "benchmarks.md").read_text() == once
    update_docs(default, tmp_path)
    text = (tmp_path / "benchmarks.md").read_text()
    assert text == once, "a default run rewrites its part and keeps the etcd subsection as it was"
    assert text.count(SECTION) == 1 and text.count(STORES_SECTION) == 1 and "| pipelined | etcd | 1 |" in text
    assert text.index(SECTION) < text.index("| serial | file | 1 |") < text.index(STORES_SECTION)
    kept = kept_section(text)
    assert STORES_SECTION in kept and any(line.startswith("| pipelined | etcd | 1 |") for line in kept)


def test_bench_rolechange_compares_recovery_with_the_held_log_on_the_same_files(tmp_path):
    """The structure of `ackorder bench rolechange` (never its timings): each row is one real log,
    recovered and handed over in memory, and the two logs agree (asserted inside)."""
    from reference.bench.rolechange import rolechange

    result = rolechange(tmp_path, [1, 2], repeats=1)
    assert [r["log MiB"] for r in result["rows"]] == [1, 2]
    for r in result["rows"]:
        assert r["records"] > 0 and r["recovery ms"] > 0 and r["held log ms"] > 0, r
    assert set(result["ratios"]) == {"1 MiB", "2 MiB"}


def test_bench_rolechange_refuses_bad_sizes():
    from cli.main import main

    assert main(["bench", "rolechange", "--log-mib", "0"]) == 2
    assert main(["bench", "rolechange", "--log-mib", "16,5000"]) == 2      # past MAX_LOG_MIB: refused, nothing written


@pytest.mark.full
def test_bench_goals_runs_both_trees_each_run_and_takes_the_median_of_the_runs_ratios(tmp_path, monkeypatch):
    """The structure of `ackorder bench goals --baseline` (never its timings): each run measures every point
    from both trees, a point the tree before has no flag for only from this one, and a goal's figure is the
    median of its per-run ratios."""
    from reference.bench import goals as goals_mod
    from reference.bench.simrates import HERE

    keep = ("group_commit_64", "group_commit_thread_64", "fsync_per_message_64", "async_flush_64")
    monkeypatch.setattr(goals_mod, "POINTS", {k: v for k, v in goals_mod.POINTS.items() if k in keep})
    monkeypatch.setattr(goals_mod, "BREAKDOWN_POINTS", ("group_commit_64",))
    seen = []
    real = goals_mod._measure
    monkeypatch.setattr(goals_mod, "_measure", lambda work, tree, name, *a, timeline: seen.append(
        (tree is None, name, timeline)) or real(work, tree, name, *a, timeline=timeline))
    out = goals_mod.goals(tmp_path, count=30, runs=3, baseline=HERE, progress=lambda s: None)
    assert len(seen) == 3 * 7 + 1            # and once more with timelines, for the breakdown
    assert seen[:2] == [(False, "group_commit_64", False), (True, "group_commit_64", False)]
    assert seen[7:9] == [(True, "group_commit_64", False), (False, "group_commit_64", False)]   # run 2: after first
    assert (True, "group_commit_thread_64", True) in seen      # only this tree runs it: it keeps its timelines
    assert seen[-1] == (True, "group_commit_64", True) and out["breakdowns"]["group_commit_64"]["requests"] > 0
    rows = {r["goal"]: r for r in out["rows"]}
    per_message = rows["group commit / one fsync per message, 64 producers"]
    for tree in ("before", "after"):
        runs = per_message[f"{tree}_runs"]
        assert len(runs) == 3 and per_message[tree] == round(sorted(runs)[1], 3)
    thread = rows["the same, fdatasync on the flush thread (no io_uring)"]
    assert thread["before"] is None and thread["after"] is not None      # a flag the tree before has not
    decoupled = rows["DECOUPLED 64 / BLOCKING 64 throughput"]
    assert decoupled["after"] is None and decoupled["met"] is None       # points not measured: no figure
