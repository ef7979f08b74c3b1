"""`ackorder controller --port P [--dir D] [--design serial|pipelined]
[--store file|etcd --etcd-endpoints H:P,H:P,...]`: the real controller
(reference/real/controller_server.py).  Exit codes: 0 a clean stop
(SIGTERM, Ctrl-C), 2 a bad option, 3 the environment refused (port in use,
a directory that cannot be written, the metadata fsync failing; etcd
unreachable or without a majority, or a second controller writing the
same keys)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cli import errors
from cli.argtypes import bug_name, host, output_file
from spec.config import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    from reference.failover.controller import (
        CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS_DEFAULT,
        CONTROLLER_BUG_NAMES,
        DESIGNS,
        MAX_GROUPS_DEFAULT,
        MAX_PENDING_DEFAULT,
    )
    from cli.broker import add_peer_flags
    from reference.real.controller_server import MAX_CONNECTIONS
    from reference.real.metadata_store import ETCD_BUG_NAMES, ETCD_TIMEOUT_MS_DEFAULT

    p = sub.add_parser("controller", help="run a real controller: elections and SyncStateSets for many broker groups "
                                          "(metadata file with fsync, TCP on 127.0.0.1)")
    p.add_argument("--port", type=int, required=True, help="listen port (0: any free port)")
    p.add_argument("--host", type=host, default="127.0.0.1", help="listen address (default loopback only)")
    p.add_argument("--dir", type=Path, default=Path("ackorder-controller"),
                   help="metadata directory (controller.meta inside; default ./ackorder-controller)")
    p.add_argument("--design", choices=DESIGNS, default="pipelined",
                   help="serial: one metadata request at a time, one fsync each; pipelined: requests decided as "
                        "they come, records group-committed (default)")
    p.add_argument("--controller-broker-heartbeat-timeout-ms", type=int,
                   default=CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS_DEFAULT,
                   help="a broker not heard from for this long is not alive "
                        f"(default {CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS_DEFAULT}, controllerHeartBeatTimeoutMills)")
    p.add_argument("--max-groups", type=int, default=MAX_GROUPS_DEFAULT,
                   help="broker groups this controller serves; a registration of one more is answered "
                        f"CONTROLLER_LIMIT_REACHED (default {MAX_GROUPS_DEFAULT})")
    p.add_argument("--max-pending", type=int, default=MAX_PENDING_DEFAULT,
                   help="metadata requests waiting for their turn or their record's sync, all clients together; "
                        f"more are answered CONTROLLER_BUSY at once (default {MAX_PENDING_DEFAULT})")
    p.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS,
                   help=f"client connections at once (1..65536; default {MAX_CONNECTIONS}); more are refused, or take "
                        "the place of a peer whose frame is long unfinished")
    p.add_argument("--idle-timeout-ms", type=int, default=120_000,
                   help="close a connection that sent nothing for this long (default 120000)")
    p.add_argument("--store", choices=("file", "etcd"), default="file",
                   help="file: --dir/controller.meta with fdatasync (default); etcd: one key per broker group "
                        "under /ackorder/controller/, written by compare-and-set transactions")
    p.add_argument("--etcd-endpoints", metavar="HOST:PORT,...",
                   help="the etcd members' client addresses (with --store etcd); a failed request moves to the "
                        "next one")
    p.add_argument("--etcd-timeout-ms", type=int, default=ETCD_TIMEOUT_MS_DEFAULT,
                   help="how long a metadata write may retry across the endpoints before the controller gives "
                        f"up and stops with exit 3 (with --etcd: gives its shards up and keeps serving; default "
                        f"{ETCD_TIMEOUT_MS_DEFAULT})")
    from reference.failover.shards import LEASE_TTL_S_DEFAULT, MAX_SHARDS, SHARD_BUG_NAMES, SHARDS_DEFAULT
    p.add_argument("--etcd", metavar="HOST:PORT,...",
                   help="run as one of several controllers over this etcd (its own member first): the broker "
                        "groups are sharded over the live controllers, any controller serves any broker "
                        "(docs/controllers.md); needs --controller-id")
    p.add_argument("--controller-id", help="with --etcd: this controller's name, unique among them (1-64 of "
                                           "letters, digits, '-', '_', '.')")
    p.add_argument("--advertise", metavar="HOST:PORT",
                   help="with --etcd: where the other controllers reach this one (default --host and the bound port)")
    p.add_argument("--shards", type=int, default=SHARDS_DEFAULT,
                   help=f"with --etcd: shards the broker groups are hashed into, the same for every controller "
                        f"(1..{MAX_SHARDS}; default {SHARDS_DEFAULT})")
    p.add_argument("--lease-ttl-s", type=int, default=LEASE_TTL_S_DEFAULT,
                   help="with --etcd: this controller's etcd lease; its shards go to the others this long after it "
                        f"dies (1..60; default {LEASE_TTL_S_DEFAULT})")
    add_peer_flags(p)
    p.add_argument("--failover-trace", type=output_file, metavar="FILE",
                   help="append this controller's decisions to FILE as spec steps, for the failover trace of a "
                        "run (spec/failover/procmerge.py)")
    bugs = CONTROLLER_BUG_NAMES + ETCD_BUG_NAMES + SHARD_BUG_NAMES
    p.add_argument("--bug", action="append", default=[], type=bug_name(bugs), metavar="NAME",
                   help=f"switch a controller bug on (repeatable, either spelling): {', '.join(bugs)}")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from reference.failover.controller import ControllerConfig
    from reference.real.controller_server import ControllerOptions, serve_controller
    from reference.real.metadata_store import ETCD_BUG_NAMES
    from reference.real.peerauth import load_secret

    from reference.real import netroute
    from spec.config import ConfigError

    try:
        netroute.load()       # a malformed route map is said now (exit 2), not at the first forward
    except ConfigError as err:
        raise errors.UsageError(str(err)) from None
    if not 0 <= args.port <= 65535:
        raise errors.UsageError(f"--port {args.port}: a port is 0..65535 (0: any free port)")
    if args.dir.exists() and not args.dir.is_dir():
        raise errors.UsageError(f"--dir {args.dir}: exists and is not a directory")
    if args.etcd is not None:
        return _cluster(args)
    for flag in ("controller_id", "advertise"):
        if getattr(args, flag) is not None:
            raise errors.UsageError(f"--{flag.replace('_', '-')}: only with --etcd")
    from reference.failover.shards import SHARD_BUG_NAMES
    if bad := sorted(set(args.bug) & set(SHARD_BUG_NAMES)):
        raise errors.UsageError(f"--bug {', '.join(bad)}: a bug of several controllers, needs --etcd")
    endpoints = _etcd_endpoints(args)
    store_bugs = frozenset(b for b in args.bug if b in ETCD_BUG_NAMES)
    if store_bugs and args.store != "etcd":
        raise errors.UsageError(f"--bug {', '.join(sorted(store_bugs))}: a bug of the etcd store, needs --store etcd")
    try:
        config = ControllerConfig(controller_broker_heartbeat_timeout_ms=args.controller_broker_heartbeat_timeout_ms,
                                  design=args.design, max_groups=args.max_groups, max_pending=args.max_pending,
                                  bugs=frozenset(args.bug) - store_bugs)
        opts = ControllerOptions(directory=args.dir, config=config, host=args.host, port=args.port, store=args.store,
                                 etcd_endpoints=tuple(endpoints), etcd_timeout_ms=args.etcd_timeout_ms,
                                 store_bugs=store_bugs, max_connections=args.max_connections,
                                 idle_timeout_ms=args.idle_timeout_ms, failover_trace=args.failover_trace, frame_deadline_ms=args.frame_deadline_ms,
                                 partial_frame_budget_bytes=args.partial_frame_budget_bytes,
                                 peer_secret=load_secret(args.peer_secret_file) if args.peer_secret_file else None)
    except ConfigError as err:
        raise errors.UsageError(re.sub(r"\b(\w+) =", lambda m: "--" + m.group(1).replace("_", "-"), str(err))) from None
    try:
        return serve_controller(opts)
    except OSError as err:            # the machine's (a port in use, no permission) or the input's: os_error_exit
        place = f"{err.filename}: " if err.filename else ""
        failure = errors.EnvironmentFailure if errors.os_error_exit(err) == errors.ENVIRONMENT else errors.UsageError
        raise failure(f"{place}{err.strerror or err}") from None


def _etcd_endpoints(args: argparse.Namespace) -> list[tuple[str, int]]:
    from reference.real.metadata_store import parse_endpoints

    if args.store != "etcd":
        if args.etcd_endpoints is not None:
            raise errors.UsageError("--etcd-endpoints: only with --store etcd")
        return []
    if not args.etcd_endpoints:
        raise errors.UsageError("--store etcd: needs --etcd-endpoints HOST:PORT,... (the etcd members)")
    if args.etcd_timeout_ms <= 0:
        raise errors.UsageError(f"--etcd-timeout-ms {args.etcd_timeout_ms}: must be a positive number of ms")
    try:
        return parse_endpoints(args.etcd_endpoints)
    except ValueError as err:
        raise errors.UsageError(str(err)) from None


def _cluster(args: argparse.Namespace) -> int:
    """`--etcd`: one of several controllers over one etcd (reference/real/controller_cluster.py)."""
    from reference.failover.controller import ControllerConfig
    from reference.failover.shards import MAX_CONTROLLER_ID_BYTES, MAX_SHARDS, SHARD_BUG_NAMES, join_address
    from reference.real.controller_cluster import ClusterOptions, serve_cluster_controller
    from reference.real.metadata_store import parse_endpoints
    from reference.real.options import parse_address
    from reference.real.peerauth import load_secret

    if args.store != "file" or args.etcd_endpoints is not None:
        raise errors.UsageError("--etcd: several controllers keep their metadata in that etcd; "
                                "--store and --etcd-endpoints are the single controller's")
    if args.design != "pipelined" or args.failover_trace is not None:
        raise errors.UsageError("--etcd: --design serial and --failover-trace are the single controller's")
    if not args.controller_id or not re.fullmatch(r"[A-Za-z0-9_.-]{1,%d}" % MAX_CONTROLLER_ID_BYTES,
                                                  args.controller_id):
        raise errors.UsageError(f"--controller-id {args.controller_id!r}: needed with --etcd, 1-"
                                f"{MAX_CONTROLLER_ID_BYTES} of letters, digits, '-', '_', '.'")
    if not 0 <= args.port <= 65535:
        raise errors.UsageError(f"--port {args.port}: a port is 0..65535 (0: any free port)")
    if not 1 <= args.shards <= MAX_SHARDS:
        raise errors.UsageError(f"--shards {args.shards}: 1..{MAX_SHARDS}")
    if not 1 <= args.lease_ttl_s <= 60:
        raise errors.UsageError(f"--lease-ttl-s {args.lease_ttl_s}: 1..60 seconds")
    if args.etcd_timeout_ms <= 0:
        raise errors.UsageError(f"--etcd-timeout-ms {args.etcd_timeout_ms}: must be a positive number of ms")
    try:
        endpoints = parse_endpoints(args.etcd)
    except ValueError as err:
        raise errors.UsageError(str(err).replace("--etcd-endpoints", "--etcd")) from None
    try:
        advertise = None
        if args.advertise is not None:
            host_, port_ = parse_address(args.advertise, "--advertise")
            advertise = join_address(host_, port_)
        elif args.host in ("0.0.0.0", "::", ""):
            raise errors.UsageError(f"--host {args.host}: the other controllers cannot reach a wildcard address; "
                                    "give --advertise HOST:PORT")
        shard_bugs = frozenset(b for b in args.bug if b in SHARD_BUG_NAMES)
        config = ControllerConfig(controller_broker_heartbeat_timeout_ms=args.controller_broker_heartbeat_timeout_ms,
                                  max_groups=args.max_groups, max_pending=args.max_pending,
                                  bugs=frozenset(args.bug) - shard_bugs)
        opts = ClusterOptions(etcd_endpoints=tuple(endpoints), controller_id=args.controller_id, config=config,
                              host=args.host, port=args.port, advertise=advertise, shards=args.shards,
                              lease_ttl_s=args.lease_ttl_s, etcd_timeout_ms=args.etcd_timeout_ms, bugs=shard_bugs,
                              max_connections=args.max_connections, idle_timeout_ms=args.idle_timeout_ms,
                              frame_deadline_ms=args.frame_deadline_ms,
                              partial_frame_budget_bytes=args.partial_frame_budget_bytes,
                              peer_secret=load_secret(args.peer_secret_file) if args.peer_secret_file else None)
    except ConfigError as err:
        raise errors.UsageError(re.sub(r"\b(\w+) =", lambda m: "--" + m.group(1).replace("_", "-"), str(err))) from None
    try:
        return serve_cluster_controller(opts)
    except ConfigError as err:          # a shard count or controller id the running ones refuse
        raise errors.UsageError(str(err)) from None
    except OSError as err:
        place = f"{err.filename}: " if err.filename else ""
        failure = errors.EnvironmentFailure if errors.os_error_exit(err) == errors.ENVIRONMENT else errors.UsageError
        raise failure(f"{place}{err.strerror or err}") from None
