"""`ackorder chaos`: argument parsing, a progress bar, the Jepsen-style summary
and the exit code over reference/real/chaos.py (and, with --power-loss,
reference/real/powerloss.py).  Exit 0: every acknowledged message survived;
1: a loss, a corruption or a duplicate, or a run that did not exercise what it was asked to (a
--transient-store-pool run that crossed no segment roll, a --pause-member-ms pause that dropped
nothing); 2: bad options; 3: the environment failed (a broker that would not start)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.progress import MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli import errors
from cli.argtypes import bug_name, natural_int, output_file, positive_float, positive_int
from cli.broker import guarded
from cli.ui import bar_column, console as make_console
from spec.config import BUG_NAMES
from spec.failover.config import FAILOVER_BUG_NAMES


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chaos", help="kill -9 a real master under load (and corrupt, inject I/O errors, "
                                     "cut the power); check every acknowledged message")
    # A flag of one mode only has no default here, so that naming it in another mode is refused, not ignored.
    p.add_argument("--kills", type=positive_int, default=None,
                   help="SIGKILLs of the master, or with --power-loss recorded runs (default 10)")
    p.add_argument("--replicas", type=natural_int, default=None, help="slaves (SYNC_MASTER when > 0; default 1)")
    p.add_argument("--corrupt", action="store_true", default=None,
                   help="corrupt the unacknowledged segment tail between restarts")
    p.add_argument("--io-errors", action="store_true", default=None,
                   help="inject write and fsync errors in some incarnations")
    p.add_argument("--power-loss", action="store_true",
                   help="record the store's file operations and check every crash state a power loss could "
                        "leave (ALICE/CrashMonkey style) instead of kill -9")
    p.add_argument("--transient-store-pool", action="store_true", default=None,
                   help="kill -9 and --power-loss: the master appends into the transient store pool's write buffer, "
                        "which commits copy to the segment files (seed 001); the run must cross a segment roll")
    p.add_argument("--failover", action="store_true",
                   help="a controller and three broker nodes (SYNC_MASTER, ALL_IN_SYNC); kill -9 the master, "
                        "check every acknowledged message on the new one, report the failover time")
    p.add_argument("--failovers", type=positive_int, default=None, help="--failover: masters killed (default 10)")
    p.add_argument("--failover-bug", action="append", default=None, metavar="NAME", type=bug_name(FAILOVER_BUG_NAMES),
                   help="--failover: run the nodes with a seeded broker-side defect (BugTruncateNotDurable, "
                        "BugNoAllAck, ...)")
    p.add_argument("--settle-timeout-s", type=positive_float, default=None,
                   help="--failover: how long a restarted broker may take to rejoin the SyncStateSet (default 30)")
    p.add_argument("--slow-member-lag-ms", type=natural_int, default=None, metavar="N",
                   help="--failover: b3's link is slow (DATA to it leaves N ms late); the other slave is killed, then "
                        "the master, so b3 must take over (--failovers 1)")
    p.add_argument("--pause-member-ms", type=natural_int, default=None, metavar="N",
                   help="--failover: each round first stops a slave with SIGSTOP for N ms (a GC pause), long enough "
                        "for the master to drop it from the SyncStateSet, then resumes it and waits for it to rejoin")
    p.add_argument("--controllers", type=positive_int, default=None, metavar="N",
                   help="--failover: N > 1 controllers over a 3-member etcd (`controller --etcd`); each round also "
                        "kills a controller, the etcd leader, a follower, or a controller and the leader, and the "
                        "run checks etcd's history for two masters in one epoch (default 1: one controller)")
    from reference.failover.shards import SHARD_BUG_NAMES
    p.add_argument("--controller-bug", action="append", default=None, metavar="NAME", type=bug_name(SHARD_BUG_NAMES),
                   help="--failover --controllers N: run the controllers with a seeded defect a run can catch "
                        "(BugNoTakeoverGrace: a moved shard deposes a live master; BugActAfterLeaseExpired: a "
                        "paused owner acts on after its lease); the run must then fail")
    p.add_argument("--peer-secret-file", type=Path, default=None, metavar="FILE",
                   help="--failover: the controller and the nodes authenticate every connection between them "
                        "with this secret (mode 600)")
    p.add_argument("--failover-trace", type=output_file, default=None, metavar="FILE",
                   help="--failover: every process records its spec steps; write the run's history, merged, to FILE "
                        "as one AckOrderFailover trace (check it with ackorder trace-check FILE)")
    p.add_argument("--nemesis", default=None, metavar="KINDS",
                   help="--failover: every link between the processes goes through a fault proxy, and instead of the "
                        "kill rounds a fault drawn from the seed every --nemesis-interval-s for --duration-s, healed "
                        "after its window and checked: a comma-separated list of kill, partition, isolate-master, "
                        "bridge, one-way, pause, delay, drop (or all)")
    p.add_argument("--nemesis-interval-s", type=positive_float, default=None, metavar="S",
                   help="--nemesis: mean load between a heal's checks and the next fault (default 3)")
    p.add_argument("--duration-s", type=positive_float, default=None, metavar="S",
                   help="--nemesis: how long the run lasts (default 60)")
    p.add_argument("--unavailable-ms", type=positive_int, default=None, metavar="MS",
                   help="--nemesis: no PUT_OK for longer than this is an unavailability window (default 1000)")
    p.add_argument("--report", type=Path, default=None, metavar="DIR",
                   help="--nemesis: write report.md, report.html, report.json and latency.png (latency over time, "
                        "the fault windows shaded) to DIR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--producers", type=positive_int, default=8)
    p.add_argument("--size", type=positive_int, default=200, help="message body bytes")
    p.add_argument("--segment-bytes", type=positive_int, default=None,
                   help="small, so that runs cross segment rolls (default 256 KiB; with --power-loss 8 KiB)")
    p.add_argument("--messages", type=positive_int, default=None, help="--power-loss: messages per recorded run "
                                                                       "(default 150)")
    p.add_argument("--fsync-delay-ms", type=natural_int, default=None, metavar="N",
                   help="--power-loss: each fdatasync takes N ms more (default 2: a disk's, not tmpfs's, so that an "
                        "acknowledgement sent before its fsync is seen before it)")
    p.add_argument("--max-load-s", type=positive_float, default=None,
                   help="kill -9 and --failover: longest load before a kill (seconds, default 1; at least 0.2 is used)")
    p.add_argument("--bug", action="append", default=None, type=bug_name(BUG_NAMES), metavar="NAME",
                   help="run the master with a seeded defect (to see the checks bite), either spelling")
    p.add_argument("--dir", type=Path, default=None, help="kill -9 and --failover: keep the nodes' data and logs here")
    p.add_argument("--json", type=output_file, metavar="FILE", help="write the full report as JSON")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from reference.real.chaos import ChaosAborted

    try:
        return guarded("chaos", lambda: _main(args))
    except ChaosAborted as err:
        print(f"ackorder chaos: {errors.one_line(err)}", file=sys.stderr)
        return 3


# The flags each mode takes beyond the common ones (seed, producers, size, segment bytes, load, dir, json),
# and their defaults.
MODE_FLAGS = {
    "kill -9": {"kills": 10, "replicas": 1, "corrupt": False, "io_errors": False, "bug": [], "max_load_s": 1.0,
                "dir": None, "transient_store_pool": False},
    # records each run in a temporary directory; fsync_delay_ms: PowerLossOptions' default
    "--power-loss": {"kills": 10, "messages": 150, "bug": [], "fsync_delay_ms": None, "transient_store_pool": False},
    "--failover": {"failovers": 10, "failover_bug": [], "settle_timeout_s": 30.0, "slow_member_lag_ms": 0,
                   "pause_member_ms": 0, "max_load_s": 1.0, "dir": None, "peer_secret_file": None, "failover_trace": None,
                   "controllers": 1, "controller_bug": [], "nemesis": None, "nemesis_interval_s": 3.0,
                   "duration_s": 60.0, "unavailable_ms": 1000, "report": None},
}


def _mode_name(mode: str) -> str:
    return "the kill -9 run" if mode == "kill -9" else mode


def with_mode_defaults(args: argparse.Namespace) -> str:
    """The mode the flags name; its flags' defaults filled in; a usage error for a flag of another mode
    (before, such a flag was ignored and the run went on as if it had not been given)."""
    if args.power_loss and args.failover:
        raise errors.UsageError("--power-loss and --failover: one mode at a time")
    mode = "--power-loss" if args.power_loss else "--failover" if args.failover else "kill -9"
    for flag in dict.fromkeys(f for flags in MODE_FLAGS.values() for f in flags):
        if flag not in MODE_FLAGS[mode] and getattr(args, flag) is not None:
            owners = " and ".join(_mode_name(m) for m, flags in MODE_FLAGS.items() if flag in flags)
            raise errors.UsageError(f"--{flag.replace('_', '-')}: a flag of {owners}, not of {_mode_name(mode)}")
    for flag, default in MODE_FLAGS[mode].items():
        if getattr(args, flag) is None:
            setattr(args, flag, default)
    return mode


def _main(args: argparse.Namespace) -> int:
    mode = with_mode_defaults(args)
    if mode == "--power-loss":
        return _power_loss(args)
    if mode == "--failover":
        return _failover(args)
    from reference.real.chaos import ChaosOptions, run_chaos

    opts = ChaosOptions(kills=args.kills, replicas=args.replicas, corrupt=args.corrupt, io_errors=args.io_errors,
                        seed=args.seed, producers=args.producers, size=args.size,
                        segment_bytes=args.segment_bytes or ChaosOptions.segment_bytes_default(),
                        max_load_s=max(args.max_load_s, 0.2), directory=args.dir, keep=args.dir is not None,
                        bugs=tuple(args.bug), transient_store_pool=args.transient_store_pool)
    console = make_console()
    report = _with_progress(console, "kill -9", opts.kills, lambda progress: run_chaos(opts, progress))
    out = report.to_json()
    title = (f"ackorder chaos: {opts.kills} kills, {opts.replicas} slave(s)"
             + (", corrupt tails" if opts.corrupt else "") + (", I/O errors" if opts.io_errors else "")
             + (", transient store pool" if opts.transient_store_pool else ""))
    return _summary(console, args, title, out, ("acked", "lost", "corrupt", "duplicated", "resurrected_corrupt",
                                                "recovery_disagrees", "recovered_regions", "replica_checks",
                                                "replicas_reseeded", "segments_rolled", "seconds", "faults"), report.valid,
                    out["unexercised"])


def _summary(console, args: argparse.Namespace, title: str, out: dict, keys: tuple[str, ...], valid: bool,
             unexercised: str | None = None) -> int:
    """The summary table, the --json report and the verdict's exit code."""
    table = Table(title=title, title_justify="left", show_header=False)
    for key in keys:
        table.add_row(key, json.dumps(out[key]) if isinstance(out[key], dict) else str(out[key]))
    console.print(table)
    if unexercised:
        console.print(f"[red]not exercised:[/] {unexercised}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return _verdict(console, valid)


def _with_progress(console, label: str, total: int, run):
    """``run(progress)`` under a rich progress bar; ``progress(done, what happens now)``."""
    columns = [TextColumn(label), bar_column(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}")]
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=total)
        return run(lambda done, text: bar.update(task, completed=done, description=text))


def _verdict(console, valid: bool) -> int:
    if valid:
        console.print("[bold green]Everything looks good! ヽ(‘ー`)ノ[/]")
        return 0
    console.print("[bold red]Analysis invalid! (ﾉಥ益ಥ）ﾉ ┻━┻[/]")
    return 1


def _power_loss(args: argparse.Namespace) -> int:
    from reference.real.powerloss import PowerLossOptions, explore_power_loss

    opts = PowerLossOptions(runs=args.kills, seed=args.seed, producers=args.producers, size=args.size,
                            messages=args.messages, bugs=tuple(args.bug), transient_store_pool=args.transient_store_pool,
                            **({"segment_bytes": args.segment_bytes} if args.segment_bytes else {}),
                            **({"fsync_delay_ms": args.fsync_delay_ms} if args.fsync_delay_ms is not None else {}))
    console = make_console()
    report = _with_progress(console, "power loss", opts.runs, lambda progress: explore_power_loss(opts, progress))
    out = report.to_json()
    table = Table(title=f"ackorder chaos --power-loss: {opts.runs} recorded runs", title_justify="left",
                  show_header=False)
    for key, value in out.items():
        if key not in ("violations", "options"):
            table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    console.print(table)
    for v in out["violations"][:10]:
        console.print(f"[red]violation:[/] {v}")
    if out["unexercised"]:
        console.print(f"[red]not exercised:[/] {out['unexercised']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return _verdict(console, report.valid)


def _failover(args: argparse.Namespace) -> int:
    from reference.real.failover_chaos import FailoverChaosOptions, run_failover_chaos
    from reference.real.nemesis import parse_nemeses

    nemesis = parse_nemeses(args.nemesis) if args.nemesis is not None else ()
    if not nemesis:
        for flag in ("nemesis_interval_s", "duration_s", "unavailable_ms", "report"):
            if getattr(args, flag) != MODE_FLAGS["--failover"][flag]:
                raise errors.UsageError(f"--{flag.replace('_', '-')}: a flag of --nemesis")
    elif args.failovers != MODE_FLAGS["--failover"]["failovers"]:
        raise errors.UsageError("--failovers with --nemesis: the run lasts --duration-s")
    if args.report is not None and args.report.exists() and not args.report.is_dir():
        raise errors.UsageError(f"--report {args.report}: exists and is not a directory")

    opts = FailoverChaosOptions(failovers=args.failovers, seed=args.seed, producers=args.producers, size=args.size,
                                max_load_s=max(args.max_load_s, 0.2), directory=args.dir,
                                keep=args.dir is not None, failover_bugs=tuple(args.failover_bug),
                                settle_timeout_s=args.settle_timeout_s, slow_member_lag_ms=args.slow_member_lag_ms,
                                pause_member_ms=args.pause_member_ms, peer_secret_file=args.peer_secret_file,
                                failover_trace=args.failover_trace, controllers=args.controllers,
                                controller_bugs=tuple(args.controller_bug), nemesis=nemesis,
                                nemesis_interval_s=args.nemesis_interval_s, duration_s=args.duration_s,
                                unavailable_ms=args.unavailable_ms, report_dir=args.report,
                                **({"segment_bytes": args.segment_bytes} if args.segment_bytes else {}))
    console = make_console()
    if nemesis:
        return _nemesis(console, args, opts)
    report = _with_progress(console, "failover", opts.failovers, lambda progress: run_failover_chaos(opts, progress))
    out = report.to_json()
    return _summary(console, args, f"ackorder chaos --failover: {opts.failovers} master kills, 3 nodes, "
                    "SYNC_MASTER ALL_IN_SYNC" + (f", {opts.controllers} controllers over a 3-member etcd"
                                                 if opts.controllers > 1 else ""), out,
                    ("failovers", "acked", "lost", "corrupt", "diverged", "not_rejoined", "stuck", "failover_ms_p50",
                     "failover_ms_p99", "failover_ms_max", "truncations", "consumed", "consumed_lost",
                     "read_above_confirm", "consumer_bad_records", "resends", "seconds", "statuses",
                     *(("trace_steps", "trace_rejected") if args.failover_trace else ()),
                     *(("control_kills", "two_masters", "epochs_back") if opts.controllers > 1 else ()),
                     "live_masters_deposed"),
                    report.valid)


def _nemesis(console, args: argparse.Namespace, opts) -> int:
    from reference.real.failover_chaos import run_failover_chaos

    seconds = int(opts.duration_s)
    report = _with_progress(console, "nemesis", seconds, lambda progress: run_failover_chaos(opts, progress))
    out = report.to_json()
    control = "one controller" if opts.controllers == 1 else f"{opts.controllers} controllers over a 3-member etcd"
    code = _summary(console, args, f"ackorder chaos --failover --nemesis {','.join(opts.nemesis)}: 3 nodes, {control}, "
                    "every link through the fault proxy, SYNC_MASTER ALL_IN_SYNC", out,
                    ("faults", "failovers", "acked", "lost", "corrupt", "diverged", "stuck", "failover_ms_p50",
                     "failover_ms_p99", "unavailable_windows", "unavailable_max_s", "truncations", "consumed",
                     "consumed_lost", "read_above_confirm", "consumer_bad_records", "epoch_violations",
                     "controller_violations", "controller_polls", "member_checks", "checks",
                     *(("two_masters", "epochs_back") if opts.controllers > 1 else ()), "resends",
                     "seconds", "statuses", *(("trace_steps", "trace_rejected") if args.failover_trace else ())),
                    report.valid, out["unexercised"])
    table = Table(title="per nemesis", title_justify="left")
    columns = ("faults", "acked", "lost", "failovers", "failover_ms_p50", "failover_ms_p99", "unavailable_windows",
               "unavailable_max_s", "not_settled")
    table.add_column("nemesis")
    for c in columns:
        table.add_column(c.replace("_", " "), justify="right")
    for kind, row in out["per_nemesis"].items():
        table.add_row(kind, *(str(row[c]) for c in columns))
    console.print(table)
    if opts.report_dir is not None:
        console.print(f"report: {opts.report_dir / 'report.md'}, report.html, latency.png")
    return code
