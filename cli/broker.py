"""`ackorder broker master|replica` and `ackorder load`: argument parsing and
exit codes over the library (reference/real/options.py, master_server.py,
replica_server.py, load.py).  A bad option or an environment that refuses
(port in use, a file where a directory should be, an fsync failing during
recovery) is one line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Callable

from rich.table import Table

from reference.config import add_store_flags
from reference.real.guard import FRAME_DEADLINE_MS_DEFAULT, PARTIAL_FRAME_BUDGET_BYTES_DEFAULT
from cli.argtypes import bug_name, host, output_file
from cli import errors
from cli.ui import console as make_console
from spec.config import ConfigError
from spec.failover.config import FAILOVER_BUG_NAMES


SECRET_HELP = ("a file (mode 600) holding the secret the HA and controller ports authenticate their peers with "
               "(a challenge-response: the secret never crosses the wire); the same on every broker and "
               "controller; optional on loopback, required with a --host other hosts can reach")


def add_peer_flags(parser: argparse.ArgumentParser) -> None:
    """The flags every server shares for its slow and unauthenticated peers (reference/real/guard.py,
    peerauth.py): the broker master's and the controller's."""
    parser.add_argument("--frame-deadline-ms", type=int, default=FRAME_DEADLINE_MS_DEFAULT,
                        help="close a connection whose frame is not finished this long after its first byte "
                             f"(a peer trickling bytes; default {FRAME_DEADLINE_MS_DEFAULT})")
    parser.add_argument("--partial-frame-budget-bytes", type=int, default=PARTIAL_FRAME_BUDGET_BYTES_DEFAULT,
                        help="memory for unfinished frames, all connections together; past it connections are "
                             f"closed, oldest unfinished frame first (default {PARTIAL_FRAME_BUDGET_BYTES_DEFAULT})")
    parser.add_argument("--peer-secret-file", metavar="FILE", help=SECRET_HELP)


def _secret(args) -> bytes | None:
    from reference.real.peerauth import load_secret

    return load_secret(args.peer_secret_file) if args.peer_secret_file is not None else None


def add_parsers(sub: argparse._SubParsersAction) -> None:
    broker = sub.add_parser("broker", help="run a real master or slave (files, fsync, TCP on 127.0.0.1)")
    roles = broker.add_subparsers(dest="role", required=True)
    master = roles.add_parser("master", help="the master store")
    master.add_argument("--dir", required=True, help="data directory (commitlog/ inside)")
    master.add_argument("--host", default="127.0.0.1", help="listen address (default loopback only)")
    master.add_argument("--port", type=int, default=10911, help="producer port (0: any free port)")
    master.add_argument("--ha-port", type=int, default=10912, help="slave (HA) port (0: any free port)")
    master.add_argument("--replicas", default="", help="comma-separated slave names (the SyncStateSet)")
    master.add_argument("--max-connections", type=int, default=1024,
                        help="producer and slave connections at once (1..65536, and within the open-files "
                             "limit); more are refused, or take the place of a peer whose frame is long "
                             "unfinished (default 1024)")
    master.add_argument("--idle-timeout-ms", type=int, default=120_000,
                        help="close a connection that sent nothing for this long (default 120000, "
                             "RocketMQ's serverChannelMaxIdleTimeSeconds)")
    master.add_argument("--inject-fsync-eio-after", type=int, default=None, metavar="N",
                        help="fault injection: every fdatasync after the first N fails with EIO")
    master.add_argument("--inject-write-fault-after", type=int, default=None, metavar="N",
                        help="fault injection: every page-cache write after the first N fails")
    master.add_argument("--inject-write-fault", choices=("eio", "enospc", "short"), default="eio",
                        help="how an injected write fails (default eio; short: half the bytes, then EIO)")
    master.add_argument("--inject-ha-lag-ms", type=int, default=0, metavar="N",
                        help="a slow link: DATA to --inject-ha-lag-to leaves N ms late, from this master's own loop "
                             "(`bench ack` puts the slave's round trip here instead of in a proxy's process)")
    master.add_argument("--inject-ha-lag-to", default=None, metavar="NAME",
                        help="the slave (one of --replicas) whose link --inject-ha-lag-ms slows")
    master.add_argument("--trace", type=output_file, default=None, metavar="FILE",
                        help="write this process's trace (NDJSON, the spec's vocabulary) for `ackorder trace-check`; "
                             "the store must start empty")
    master.add_argument("--flush-engine", choices=("auto", "thread"), default="auto",
                        help="how fdatasync runs: auto, through io_uring where this kernel allows it (else the "
                             "flush thread, with a log line); thread, on the flush thread always")
    master.add_argument("--timeline", type=output_file, default=None, metavar="FILE",
                        help="write each request's moments (arrive, written, fsync submitted and done, DATA sent, "
                             "ACK read, answer sent) to FILE when the master stops; `bench` reads it")
    add_peer_flags(master)
    add_store_flags(master)
    master.set_defaults(func=_master)
    replica = roles.add_parser("replica", help="a slave")
    replica.add_argument("--dir", required=True)
    replica.add_argument("--master", required=True, metavar="HOST:PORT", help="the master's HA address")
    replica.add_argument("--name", required=True, help="this slave's name (a member of --replicas)")
    replica.add_argument("--mapped-file-size-commit-log", type=int, default=16 * 1024 * 1024,
                         help="segment bytes, the same as the master's")
    replica.add_argument("--heartbeat-interval-ms", type=int, default=5_000,
                         help="report to the master at least this often (haSendHeartbeatInterval)")
    replica.add_argument("--trace", type=output_file, default=None, metavar="FILE",
                         help="write this slave's trace (merged with the master's by `ackorder trace-check`); "
                              "the store must start empty")
    replica.add_argument("--inject-ack-lag-ms", type=int, default=0, metavar="N",
                         help="a slow link back: each ACK leaves N ms after this slave queued it, from its own "
                              "loop (`bench ack` puts the slave's round trip here instead of in a proxy's process)")
    replica.add_argument("--timeline", type=output_file, default=None, metavar="FILE",
                         help="write when each DATA arrived and each ACK left to FILE when the slave stops "
                              "(`bench` lines it up with the master's)")
    replica.add_argument("--peer-secret-file", metavar="FILE", help=SECRET_HELP)
    replica.set_defaults(func=_replica)
    node = roles.add_parser("node", help="a broker that follows the controller (registers, heartbeats, takes "
                                         "the role it is given, truncates as a slave)")
    node.add_argument("--controller", required=True, metavar="HOST:PORT", help="the controller's address, or several controllers of one service (`controller --etcd`) "
                           "comma-separated: a failed call moves to the next")
    node.add_argument("--id", type=int, required=True, help="this broker's id in its group (1, 2, ...)")
    node.add_argument("--dir", required=True, help="data directory (commitlog/ and epochfile inside)")
    node.add_argument("--host", type=host, default="127.0.0.1", help="listen address (default loopback only)")
    node.add_argument("--port", type=int, required=True, help="producer port, while master")
    node.add_argument("--ha-port", type=int, required=True, help="HA port, while master")
    node.add_argument("--group", default="broker-a", help="broker group (brokerName; default broker-a)")
    node.add_argument("--heartbeat-interval-ms", type=int, default=1000,
                      help="heartbeat to the controller this often (brokerHeartbeatInterval, default 1000)")
    node.add_argument("--shrink-after-ms", type=int, default=15_000,
                      help="drop a SyncStateSet member with no HA connection for this long "
                           "(haMaxTimeSlaveNotCatchup, default 15000)")
    node.add_argument("--failover-bug", action="append", default=[], metavar="NAME", type=bug_name(FAILOVER_BUG_NAMES),
                      help="switch on a seeded broker-side failover defect (BugTruncateNotDurable, BugNoAllAck, ...)")
    node.add_argument("--inject-ha-lag-ms", type=int, default=0, metavar="N",
                      help="fault injection, a slow link: while master, DATA to --inject-ha-lag-to leaves N ms late")
    node.add_argument("--inject-ha-lag-to", type=int, default=None, metavar="ID",
                      help="the broker id whose link --inject-ha-lag-ms slows")
    node.add_argument("--peer-secret-file", metavar="FILE", help=SECRET_HELP)
    node.add_argument("--failover-trace", type=output_file, metavar="FILE",
                      help="append this node's spec steps to FILE, for the failover trace of a run "
                           "(spec/failover/procmerge.py)")
    add_store_flags(node)
    node.set_defaults(func=_node, flush_disk_type="SYNC_FLUSH", broker_role="SYNC_MASTER", ack_policy="ALL_IN_SYNC")

    load = sub.add_parser("load", help="send messages to a master and report throughput and latency")
    load.add_argument("--target", required=True, metavar="HOST:PORT")
    load.add_argument("--producers", type=int, default=4, help="synchronous producers (one request in flight each)")
    load.add_argument("--connections", type=int, default=None,
                      help="TCP connections the producers share (default one each; a RocketMQ client "
                           "multiplexes all its producers over one)")
    load.add_argument("--count", type=int, default=10_000)
    load.add_argument("--size", type=int, default=128, help="message body bytes")
    load.add_argument("--first-key", type=int, default=1)
    load.add_argument("--timeout-s", type=float, default=30.0, help="a producer gives up after this long")
    load.add_argument("--json", type=output_file, metavar="FILE")
    load.add_argument("--allow-errors", action="store_true",
                      help="exit 0 when every request got an answer, even an error status (default: only "
                           "when every answer is PUT_OK)")
    load.add_argument("--record", type=output_file, metavar="FILE",
                      help="write every PUT_OK (key, next_offset, size) to FILE, one JSON object per line")
    load.set_defaults(func=_load)


def guarded(command: str, body: Callable[[], int]) -> int:
    """Run a command; a bad option is one line and exit 2, an OSError one line and exit 2 or 3 by
    whose it is (``errors.os_error_exit``: a port in use or a failing disk is the machine's)."""
    try:
        return body()
    except ConfigError as err:
        print(f"ackorder {command}: error: {errors.one_line(err)}", file=sys.stderr)
        return errors.USAGE
    except OSError as err:
        print(errors.os_error_line(command, err), file=sys.stderr)
        return errors.os_error_exit(err)
    except KeyboardInterrupt:
        return errors.INTERRUPTED


def _master(args) -> int:
    def body() -> int:
        from reference.config import store_config_from_args
        from reference.real.master_server import serve_master
        from reference.real.options import MasterOptions, parse_replicas

        opts = MasterOptions(
            directory=args.dir, config=store_config_from_args(args), replicas=parse_replicas(args.replicas),
            host=args.host, port=args.port, ha_port=args.ha_port, max_connections=args.max_connections,
            idle_timeout_ms=args.idle_timeout_ms, frame_deadline_ms=args.frame_deadline_ms,
            partial_frame_budget_bytes=args.partial_frame_budget_bytes,
            inject_fsync_eio_after=args.inject_fsync_eio_after,
            inject_write_fault_after=args.inject_write_fault_after, inject_write_fault=args.inject_write_fault,
            trace=args.trace, peer_secret=_secret(args), ha_lag_ms=args.inject_ha_lag_ms,
            ha_lag_to=args.inject_ha_lag_to, timeline=args.timeline, flush_engine=args.flush_engine)
        if (opts.ha_lag_ms > 0) != (opts.ha_lag_to is not None) or \
                (opts.ha_lag_to is not None and opts.ha_lag_to not in opts.replicas):
            raise ConfigError(f"--inject-ha-lag-ms {opts.ha_lag_ms} --inject-ha-lag-to {opts.ha_lag_to}: a delay above "
                              "0 and one of --replicas go together")
        return serve_master(opts)
    return guarded("broker master", body)


def _replica(args) -> int:
    def body() -> int:
        from reference.real.options import ReplicaOptions, parse_address
        from reference.real.replica_server import serve_replica

        opts = ReplicaOptions(directory=args.dir, name=args.name, master=parse_address(args.master, "--master"),
                              segment_size=args.mapped_file_size_commit_log,
                              heartbeat_interval_ms=args.heartbeat_interval_ms, trace=args.trace,
                              peer_secret=_secret(args), timeline=args.timeline, ack_lag_ms=args.inject_ack_lag_ms)
        return _until_disk_fails("broker replica", lambda: serve_replica(opts))
    return guarded("broker replica", body)


def _until_disk_fails(command: str, serve: Callable[[], int]) -> int:
    """A slave whose own disk failed stops: one line, exit 3 (the environment failed)."""
    from reference.real.replica_server import SlaveStopped

    try:
        return serve()
    except SlaveStopped as err:
        print(f"ackorder {command}: {errors.one_line(err)}", file=sys.stderr)
        return errors.ENVIRONMENT


def _node(args) -> int:
    def body() -> int:
        from reference.config import store_config_from_args
        from reference.real.node import NodeOptions, serve_node
        from reference.real.options import parse_address

        controllers = [parse_address(a, "--controller") for a in args.controller.split(",")]
        if len(controllers) > 16 or len(set(controllers)) != len(controllers):
            raise ConfigError(f"--controller {args.controller!r}: 1-16 distinct HOST:PORT, comma-separated")
        opts = NodeOptions(directory=args.dir, controller=controllers[0], other_controllers=tuple(controllers[1:]),
                           broker_id=args.id, config=store_config_from_args(args), group=args.group,
                           host=args.host, port=args.port, ha_port=args.ha_port,
                           heartbeat_interval_ms=args.heartbeat_interval_ms, shrink_after_ms=args.shrink_after_ms,
                           failover_bugs=frozenset(args.failover_bug), ha_lag_ms=args.inject_ha_lag_ms,
                           ha_lag_to=args.inject_ha_lag_to, peer_secret=_secret(args),
                           failover_trace=args.failover_trace)
        return _until_disk_fails("broker node", lambda: serve_node(opts))
    return guarded("broker node", body)


def _load(args) -> int:
    def body() -> int:
        from reference.real.load import run_load
        from reference.real.options import parse_address

        target = parse_address(args.target, "--target")
        if args.connections is not None and args.connections < 1:
            raise ConfigError(f"--connections {args.connections}: must be positive")
        for flag in ("producers", "count", "size", "first_key"):
            if getattr(args, flag) < (1 if flag != "first_key" else 0):
                raise ConfigError(f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be positive")
        if not args.timeout_s > 0:
            raise ConfigError(f"--timeout-s {args.timeout_s}: must be positive")
        try:        # a name that does not exist is the input's (exit 2); a resolver that fails, the machine's
            socket.getaddrinfo(*target, type=socket.SOCK_STREAM)
        except socket.gaierror as err:
            raise OSError(err.errno, f"cannot connect to {args.target}: {err.strerror}") from None
        record = open(args.record, "w") if args.record else None
        try:
            result = run_load(target, args.producers, args.count, args.size, args.first_key,
                              timeout_s=args.timeout_s, record=record, connections=args.connections)
        finally:
            if record is not None:
                record.close()
        if result.connect_error:        # nothing was sent: the broker is not there, which is no loss
            print(f"ackorder load: environment: {result.connect_error}", file=sys.stderr)
            return errors.ENVIRONMENT
        console = make_console()
        table = Table(title=f"load: {args.producers} producers, {args.count} messages of {args.size} bytes",
                      title_justify="left", show_header=False)
        for key, value in result.to_json().items():
            table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
        console.print(table)
        if args.json:
            args.json.write_text(json.dumps(result.to_json(), indent=2) + "\n")
        return load_verdict(console, result, args.count, args.allow_errors)
    return guarded("load", body)


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
