"""`ackorder broker master|replica` and `ackorder load`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from reference.config import add_store_flags
from cli import errors
from cli.ui import console as make_console


def add_parsers(sub: argparse._SubParsersAction) -> None:
    broker = sub.add_parser("broker", help="run a real master or slave (files, fsync, TCP on 127.0.0.1)")
    roles = broker.add_subparsers(dest="role", required=True)
    master = roles.add_parser("master", help="the master store")
    master.add_argument("--dir", required=True, help="data directory (commitlog/ inside)")
    master.add_argument("--host", default="127.0.0.1", help="listen address (default loopback only)")
    master.add_argument("--port", type=int, default=10911, help="producer port (0: any free port)")
    master.add_argument("--ha-port", type=int, default=10912, help="slave (HA) port (0: any free port)")
    master.add_argument("--replicas", default="", help="comma-separated slave names (the SyncStateSet)")
    master.add_argument("--inject-fsync-eio-after", type=int, default=None, metavar="N",
                        help="fault injection: every fdatasync after the first N fails with EIO")
    master.add_argument("--inject-write-fault-after", type=int, default=None, metavar="N",
                        help="fault injection: every page-cache write after the first N fails")
    master.add_argument("--inject-write-fault", choices=("eio", "enospc", "short"), default="eio",
                        help="how an injected write fails (default eio; short: half the bytes, then EIO)")
    add_store_flags(master)
    master.set_defaults(func=_master)
    replica = roles.add_parser("replica", help="a slave")
    replica.add_argument("--dir", required=True)
    replica.add_argument("--master", required=True, metavar="HOST:PORT", help="the master's HA address")
    replica.add_argument("--name", required=True, help="this slave's name (a member of --replicas)")
    replica.add_argument("--mapped-file-size-commit-log", type=int, default=16 * 1024 * 1024)
    replica.set_defaults(func=_replica)

    load = sub.add_parser("load", help="send messages to a master and report throughput and latency")
    load.add_argument("--target", required=True, metavar="HOST:PORT")
    load.add_argument("--producers", type=int, default=4)
    load.add_argument("--count", type=int, default=10_000)
    load.add_argument("--size", type=int, default=128, help="message body bytes")
    load.add_argument("--first-key", type=int, default=1)
    load.add_argument("--json", type=Path, metavar="FILE")
    load.add_argument("--allow-errors", action="store_true",
                      help="exit 0 when every request got an answer, even an error status (default: only "
                           "when every answer is PUT_OK)")
    load.set_defaults(func=_load)


def _master(args) -> int:
    from reference.real.master_server import serve_master
    return serve_master(args)


def _replica(args) -> int:
    from reference.real.replica_server import serve_replica
    return serve_replica(args)


def _load(args) -> int:
    from reference.real.load import run_load

    console = make_console()
    host, _, port = args.target.rpartition(":")
    if not port.isdigit() or args.producers < 1 or args.count < 1 or args.size < 1:
        raise errors.UsageError("--target HOST:PORT, and positive --producers, --count, --size")
    result = run_load((host or "127.0.0.1", int(port)), args.producers, args.count, args.size, args.first_key)
    table = Table(title=f"load: {args.producers} producers, {args.count} messages of {args.size} bytes",
                  title_justify="left", show_header=False)
    for key, value in result.to_json().items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return load_verdict(console, result, args.count, args.allow_errors)


def load_verdict(console, result, count: int, allow_errors: bool) -> int:
    """Exit 0 only when every request was answered PUT_OK (or, with --allow-errors, answered)."""
    ok = result.statuses.get("PUT_OK", 0)
    unanswered = count - result.sent
    if unanswered:
        console.print(f"[bold red]{unanswered:,} of {count:,} requests got no answer[/] (connection lost)")
        return errors.VIOLATION
    if ok < count and not allow_errors:
        console.print(f"[bold red]{count - ok:,} of {count:,} requests were answered with an error status[/] "
                      f"(--allow-errors accepts that)")
        return errors.VIOLATION
    return errors.OK
