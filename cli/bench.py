"""`ackorder bench SCENARIO [--json FILE] [--plot FILE.png]` and `ackorder bench all`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.argtypes import natural_float, natural_int, output_file, positive_float, positive_int
from cli import errors
from cli.ui import console as make_console

SCENARIOS = ("ack", "groupcommit", "tsp", "goals", "sim", "rss", "cpu", "all", "traces", "tlcsim", "tlcbugs", "controller",
             "loris", "rolechange")
ALL = ("ack", "groupcommit", "tsp", "goals", "sim", "rss", "cpu")
EVENT_COST_SEEDS = 300          # sim: campaign seeds (at most) and steps of a long run (at most) whose events' time is split
EVENT_COST_STEPS = 100_000
DOCS = Path(__file__).resolve().parents[1] / "docs"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks on real processes, files and fsync (ratios, side by side)")
    p.add_argument("scenario", choices=SCENARIOS)
    p.add_argument("--producers", default="1,4,16,64,256", help="producer counts (comma-separated)")
    p.add_argument("--log-mib", default="16,256,1024",
                   help="rolechange: log sizes in MiB (comma-separated); each is written to real files first")
    p.add_argument("--count", type=positive_int, default=3_000, help="messages per measurement point")
    p.add_argument("--size", type=positive_int, default=256, help="message body bytes")
    p.add_argument("--delay-ms", type=natural_float, default=2.0, help="slave delay each way (ack)")
    p.add_argument("--pool", type=positive_int, default=4, help="send_message_thread_pool_nums (ack)")
    p.add_argument("--tsp-producers", default="4,64", help="producer counts of the tsp scenario")
    p.add_argument("--tsp-count", type=positive_int, default=1_000,
                   help="messages per tsp point at most (the pool-on points are slow by design)")
    p.add_argument("--goal-runs", type=positive_int, default=3,
                   help="goals: runs whose median is each goal's figure (every point of both trees once a run)")
    p.add_argument("--campaign-seeds", type=int, default=2_000,
                   help="seeds of the fuzz-campaign part of sim (400 steps each, the default campaign; 0: none, "
                        "and no long/short comparison)")
    p.add_argument("--machine-examples", type=int, default=60,
                   help="sim: programs per Hypothesis machine for its steps per CPU-second (default 60, the ci "
                        "profile's; --quick 15; 0: none)")
    p.add_argument("--compare-bugs", default=",".join(_compare_bugs_default()), metavar="BUG,BUG,...",
                   help="sim: bug switches whose bugs found per CPU-hour are compared, long mode against short "
                        "mode, on the same step budget ('none': no comparison)")
    p.add_argument("--sim-steps", default="10000,100000",
                   help="run lengths of the checked simulator (sim; comma-separated; --full adds 1000000)")
    p.add_argument("--sim-seeds", default="0,9",
                   help="the seeds every sim point runs (comma-separated; 0 crashes its master about once "
                        "per 1,000 steps, 9 about once per 10,000)")
    p.add_argument("--baseline-max-steps", type=positive_int, default=100_000,
                   help="sim: the longest run the --baseline tree makes (its checked cost may grow with the run)")
    p.add_argument("--full", action="store_true", help="sim: also a 1,000,000-step checked run")
    p.add_argument("--trace-events", default="10000,100000,300000",
                   help="simulator events of the traces checked (traces; comma-separated; a run takes a few "
                        "percent more spec steps)")
    p.add_argument("--trace-split-max-events", type=natural_int, default=20_000,
                   help="traces: runs of at most this many events are also checked split into per-process files "
                        "(those have no checkpoints: TLC checks them whole)")
    p.add_argument("--trace-tlc-jobs", type=positive_int, default=1,
                   help="traces: TLC processes at once, each a batch of a trace's segments (default 1)")
    p.add_argument("--trace-tlc-max-events", type=natural_int, default=100_000,
                   help="traces: runs of more events are checked by the twin only (TLC's cost per step grows "
                        "with the position in the trace; 0: no limit)")
    p.add_argument("--trace-real-messages", type=int, default=300,
                   help="messages through a real master and slave whose traces are checked (traces; 0: none)")
    p.add_argument("--sim-model", default="sync_both_all_large", help="the model TLC simulates (tlcsim)")
    p.add_argument("--sim-traces", type=positive_int, default=20_000, help="behaviours TLC simulates (tlcsim, tlcbugs)")
    p.add_argument("--sim-tasks", type=positive_int, default=8, help="TLC tasks on Spark (tlcsim, tlcbugs)")
    p.add_argument("--sim-depth", type=positive_int, default=40, help="behaviour length (tlcsim, tlcbugs)")
    p.add_argument("--rss-gib", type=positive_float, default=2.0, help="GiB written through master and slave (rss)")
    p.add_argument("--rss-size", type=positive_int, default=16 * 1024, help="message body bytes of the rss scenario")
    p.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                   help="a source tree to compare with (cpu, sim, goals: the same points run from it, side by side)")
    p.add_argument("--cpu-count", type=positive_int, default=20_000, help="messages per cpu point")
    p.add_argument("--quick", action="store_true",
                   help="controller: 1 and 20 groups, 100 ms heartbeats, 500 ms timeout (under a minute); "
                        "sim: a 200-seed campaign, a smaller long/short comparison, 15 programs per machine, "
                        "and docs/benchmarks.md left alone")
    p.add_argument("--store", choices=("file", "etcd", "both"), default=None,
                   help="controller: the old designs' metadata store (etcd: a 3-member etcd on loopback per point; "
                        "both: side by side; default both, --quick file); the cluster designs always use etcd")
    p.add_argument("--groups", default=None, metavar="N,N,...",
                   help="controller: broker group counts instead of the plan's (1,100,1000; --quick 1,20)")
    p.add_argument("--loris-attackers", type=positive_int, default=50,
                   help="loris: peers that each hold a connection by trickling one byte a second (default 50, "
                        "against --max-connections 50)")
    p.add_argument("--loris-seconds", type=positive_float, default=15.0,
                   help="loris: how long the producer tries, with and without the attackers (default 15)")
    p.add_argument("--json", type=output_file, metavar="FILE")
    p.add_argument("--plot", type=output_file, metavar="FILE.png")
    p.add_argument("--docs", type=Path, default=DOCS,
                   help="where `bench all` writes benchmarks.md and plots (`bench controller`: its section of it)")
    p.set_defaults(func=main)


def _producers(text: str, flag: str = "--producers") -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise errors.UsageError(f"{flag} {text!r}: expected comma-separated integers") from None
    if not values or min(values) < 1:
        raise errors.UsageError(f"{flag} {text!r}: expected positive integers")
    return values


def _compare_bugs_default() -> tuple[str, ...]:
    from spark_fuzz.bench import COMPARE_BUGS

    return COMPARE_BUGS


def _compare_bugs(text: str) -> tuple[str, ...]:
    from spec.config import ConfigError, resolve_bug

    if text.strip() == "none":
        return ()
    try:
        bugs = tuple(resolve_bug(b.strip()) for b in text.split(",") if b.strip())
    except ConfigError as err:
        raise errors.UsageError(f"--compare-bugs {text!r}: {err}") from None
    if not bugs:
        raise errors.UsageError(f"--compare-bugs {text!r}: expected bug switches or 'none'")
    return bugs


def _seeds(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise errors.UsageError(f"--sim-seeds {text!r}: expected comma-separated integers") from None
    if not values or min(values) < 0:
        raise errors.UsageError(f"--sim-seeds {text!r}: expected seeds (integers >= 0)")
    return values


def _sim_command(args: argparse.Namespace) -> str:
    """The command line a sim section says it was written by (`bench sim` or `bench all`)."""
    return (f"ackorder bench {args.scenario} --sim-steps {args.sim_steps} --sim-seeds {args.sim_seeds}"
            + (" --full" if args.full else "") + (f" --baseline {args.baseline}" if args.baseline else "")
            + f" --campaign-seeds {args.campaign_seeds} --machine-examples {args.machine_examples}"
            + f" --compare-bugs {args.compare_bugs}")


def run(name: str, args: argparse.Namespace, console) -> dict:
    from reference.bench import scenarios

    columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
    # The bar goes to stderr, and only to a terminal: stdout carries only the tables, and a usage
    # error is the one line on stderr.
    err = make_console(stderr=True)
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as bar, \
            scenarios.workdir() as work:
        task = bar.add_task(name)

        def step(text: str) -> None:
            bar.update(task, description=text)

        if name == "ack":
            return scenarios.ack(Path(work), _producers(args.producers), args.count, args.size, args.delay_ms,
                                 args.pool, step)
        if name == "groupcommit":
            return scenarios.groupcommit(Path(work), _producers(args.producers), args.count, args.size, step)
        if name == "goals":
            from reference.bench.goals import goals

            if args.baseline is not None and not (args.baseline / "reference" / "real" / "master_server.py").is_file():
                raise errors.UsageError(f"--baseline {args.baseline}: not a source tree of ackorder "
                                        "(no reference/real/master_server.py)")
            return goals(Path(work), args.count, args.goal_runs, args.baseline, args.tsp_count, args.size, step)
        if name == "tsp":
            return scenarios.tsp(Path(work), _producers(args.tsp_producers, "--tsp-producers"), min(args.count, args.tsp_count),
                                 args.size, 0.0, step)
        if name == "controller":
            import attrs

            from reference.bench.controller import FULL, QUICK, controller

            plan = QUICK if args.quick else FULL
            stores = plan.stores if args.store is None else ("file", "etcd") if args.store == "both" else (args.store,)
            groups = tuple(_producers(args.groups, "--groups")) if args.groups else plan.groups
            from reference.real.etcd_cluster import EtcdClusterError

            try:
                return controller(Path(work), attrs.evolve(plan, stores=stores, groups=groups), step)
            except EtcdClusterError as err:
                raise errors.EnvironmentFailure(str(err)) from None
        if name == "traces":
            from spark_fuzz.tlabench import trace_check_rates

            if args.trace_real_messages < 0:
                raise errors.UsageError(f"--trace-real-messages {args.trace_real_messages}: must be 0 or more")
            from tla.tracecheck import TraceCheckError

            try:
                return trace_check_rates(steps=tuple(_producers(args.trace_events, "--trace-events")),
                                         real_messages=args.trace_real_messages,
                                         split_max_events=args.trace_split_max_events, tlc_jobs=args.trace_tlc_jobs,
                                         tlc_max_events=args.trace_tlc_max_events or None, progress=step)
            except TraceCheckError as err:      # TLC gave no verdict: the machine's or TLC's, as trace-check says
                raise errors.EnvironmentFailure(str(err)) from None
        if name == "rolechange":
            from reference.bench.rolechange import MAX_LOG_MIB, rolechange

            sizes = _producers(args.log_mib, "--log-mib")
            if max(sizes) > MAX_LOG_MIB:
                raise errors.UsageError(f"--log-mib {args.log_mib}: at most {MAX_LOG_MIB} MiB a log (each is written "
                                        "to disk first)")
            return rolechange(Path(work), sizes, progress=step)
        if name == "tlcsim":
            from spark_fuzz.tlabench import simulation_rates

            return simulation_rates(args.sim_model, args.sim_traces, args.sim_tasks, args.sim_depth, progress=step)
        if name == "tlcbugs":
            from spark_fuzz.tlabench import bug_find_times

            return bug_find_times("local[2]", args.sim_traces, args.sim_tasks, args.sim_depth, progress=step)
        if name == "loris":
            from reference.bench.loris import MAX_ATTACKERS, loris

            if args.loris_attackers > MAX_ATTACKERS:
                raise errors.UsageError(f"--loris-attackers {args.loris_attackers}: at most {MAX_ATTACKERS}")
            if args.baseline is not None and not (args.baseline / "reference" / "real" / "master_server.py").is_file():
                raise errors.UsageError(f"--baseline {args.baseline}: not a source tree of ackorder "
                                        "(no reference/real/master_server.py)")
            return loris(Path(work), args.loris_attackers, args.loris_seconds, baseline=args.baseline, progress=step)
        if name == "rss":
            return scenarios.rss(Path(work), args.rss_gib, args.rss_size, progress=step)
        if name == "cpu":
            return scenarios.cpu(Path(work), args.cpu_count, args.size, args.delay_ms, args.baseline,
                                 args.docs / "benchmarks" / "master-profile.txt", step)
        from reference.bench.simrates import sim_rates

        lengths = _producers(args.sim_steps, "--sim-steps") + ([1_000_000] if args.full else [])
        if args.baseline is not None and not (args.baseline / "reference" / "sim" / "world.py").is_file():
            raise errors.UsageError(f"--baseline {args.baseline}: not a source tree of ackorder (no reference/sim/world.py)")
        seeds = _seeds(args.sim_seeds)
        compare = _compare_bugs(args.compare_bugs)
        if args.machine_examples < 0 or args.campaign_seeds < 0:
            raise errors.UsageError("--machine-examples and --campaign-seeds: must be 0 or more")
        result = sim_rates(tuple(lengths), seeds, args.baseline, args.baseline_max_steps, progress=step)
        if examples := (min(args.machine_examples, 15) if args.quick else args.machine_examples):
            from reference.bench.machinerates import machine_rates

            result["machines"] = machine_rates(examples, args.baseline, progress=step)
            result["ratios"].update(result["machines"]["ratios"])
        if args.campaign_seeds:
            from spark_fuzz.bench import COMPARE_FULL, COMPARE_QUICK, campaign_rates, mode_comparison

            seeds_n = min(args.campaign_seeds, 200) if args.quick else args.campaign_seeds
            result.update(campaign_rates(seeds_n, progress=step, baseline=args.baseline))
            result["ratios"].update({k: result[k] for k in ("local2_over_local1", "local1_over_plain_overhead",
                                                            "local[1]_after_over_before", "local[2]_after_over_before")
                                     if k in result})
            if compare:
                result["modes"] = mode_comparison(compare, COMPARE_QUICK if args.quick else COMPARE_FULL,
                                                  progress=step)
        from reference.bench.eventcost import event_costs
        from spark_fuzz.seeds import DEFAULT_STEPS

        # Where an event's time goes, beside what each goal allows: a campaign's seeds and the seeds' long runs.
        result["event_costs"] = event_costs(min(args.campaign_seeds, EVENT_COST_SEEDS), DEFAULT_STEPS, seeds,
                                            min(lengths[-1], EVENT_COST_STEPS), progress=step)
        result["command"] = _sim_command(args)
        return result


def table(result: dict) -> Table:
    name = result["scenario"]
    t = Table(title=f"bench {name}", title_justify="left")
    if name == "controller":
        from reference.bench.controller import COLUMNS, cell

        for col in COLUMNS.values():
            t.add_column(col)
        for r in result["rows"]:
            t.add_row(*(cell(k, r.get(k, "-")) for k in COLUMNS))      # a point that broke has its error only
        return t
    if name == "loris":
        for col in ("tree", "attackers", "attempts", "PUT_OK", "PUT_OK fraction", "first PUT_OK s", "outcomes",
                    "attacker connections", "closed at deadline", "evicted at limit"):
            t.add_column(col)
        for r in result["rows"]:
            t.add_row(r["tree"], str(r["attackers"]), str(r["attempts"]), str(r["put_ok"]), str(r["put_ok_fraction"]),
                      str(r["first_put_ok_s"]), " ".join(f"{k} {v}" for k, v in r["outcomes"].items()),
                      str(r["attacker_connections"]), str(r["closed_at_frame_deadline"]),
                      str(r["evicted_at_the_limit"]))
        return t
    if name in ("traces", "tlcsim", "tlcbugs", "rolechange"):
        rows = result["rows"] if name != "tlcsim" else [
            {"master": m, **result[m]} for m in ("local[1]", "local[2]")]
        for col in rows[0]:
            t.add_column(col)
        for r in rows:
            t.add_row(*(str(v) for v in r.values()))
        return t
    if name == "goals":
        trees = ("before", "after") if result["baseline"] else ("after",)
        for col in ("goal", *trees, "target", "met", "runs (after)"):
            t.add_column(col)
        for r in result["rows"]:
            t.add_row(r["goal"], *(str(r[tree]) for tree in trees), ("≥ " if r["higher_is_better"] else "≤ ")
                      + str(r["target"]), {True: "met", False: "not met", None: "-"}[r["met"]],
                      " ".join(str(v) for v in r["after_runs"]))
        return t
    if name == "rss":
        for col in ("written GiB", "seconds", "msgs/s", "master peak MiB", "slave peak MiB", "goal MiB"):
            t.add_column(col)
        t.add_row(str(result["written_gib"]), str(result["seconds"]), f"{result['msgs_per_s']:,}",
                  str(result["master_peak_rss_mib"]), str(result["replica_peak_rss_mib"]), str(result["goal_mib"]))
        return t
    if name == "sim":
        for col in ("tree", "seed", "run", "steps", "CPU s", "steps per CPU-s", "sim ms per CPU-s", "puts per CPU-s",
                    "load"):
            t.add_column(col)
        for r in result["rows"]:
            t.add_row(r["tree"], str(r["seed"]), r["kind"], f"{r['steps']:,}", str(r["cpu_s"]),
                      f"{r['steps_per_s']:,}", f"{r['sim_ms_per_s']:,}", f"{r['puts_per_s']:,}", str(r["load"]))
        from reference.bench.simrates import extra_rows

        for cells in extra_rows(result):
            t.add_row(*cells)
        return t
    cols = ["mode", "producers", "msgs/s", "avg ms", "p50 ms", "p99 ms", "statuses", "µs/msg m/s/load"]
    if name == "groupcommit":
        cols += ["fsyncs/msg", "batch", "of fsync bound"]
    for col in cols:
        t.add_column(col)
    for r in result["rows"]:
        cells = [r["mode"], str(r["producers"]), f"{r['msgs_per_s']:,.0f}", str(r["avg_ms"]), str(r["p50_ms"]),
                 str(r["p99_ms"]),
                 " ".join(f"{k} {v}" for k, v in r["statuses"].items()),
                 "/".join(str(v) for v in r["cpu_us_per_msg"].values())]
        if name == "groupcommit":
            cells += [str(r["fsyncs_per_msg"]), str(r["mean_batch"]), str(r["of_fsync_bound"])]
        t.add_row(*cells)
    return t


def event_cost_table(rows: list[dict]) -> Table:
    from reference.bench.eventcost import COLUMNS, cells

    t = Table(title="bench sim: where an event's CPU time goes (µs per event)", title_justify="left")
    for col in COLUMNS:
        t.add_column(col)
    for row in rows:
        t.add_row(*cells(row))
    return t


def main(args: argparse.Namespace) -> int:
    console = make_console()
    names = list(ALL) if args.scenario == "all" else [args.scenario]
    results = {}
    for name in names:
        results[name] = run(name, args, console)
        console.print(table(results[name]))
        if results[name].get("event_costs"):
            console.print(event_cost_table(results[name]["event_costs"]))
        if "ratios" in results[name]:
            console.print("ratios: " + json.dumps(results[name]["ratios"]))
    if args.json:
        args.json.write_text(json.dumps(results if args.scenario == "all" else results[names[0]], indent=2) + "\n")
    if args.plot and args.scenario != "all":
        from reference.bench.report import plot

        plot(results[names[0]], args.plot)
    if args.scenario == "sim" and not args.quick:
        from reference.bench.report import replace_section
        from reference.bench.simrates import SECTION, section

        console.print(f"wrote {replace_section(args.docs, SECTION, section(results['sim'], results['sim']['command']))}")
    # the docs: a whole run of the plan only (a run of some group counts or one store is a look, not the table)
    if args.scenario == "controller" and not args.quick and args.store is None and not args.groups:
        from reference.bench.controller import update_docs

        console.print(f"wrote {update_docs(results['controller'], args.docs)}")
    if args.scenario == "all":
        from reference.bench.report import write_docs

        console.print(f"wrote {write_docs(results, args.docs)}")
    return errors.OK
