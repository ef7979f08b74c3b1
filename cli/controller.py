"""`ackorder controller --port P [--dir D] [--design serial|pipelined]`: the
real controller (reference/real/controller_server.py).  Exit codes: 0 a
clean stop (SIGTERM, Ctrl-C), 2 a bad option, 3 the environment refused
(port in use, a directory that cannot be written, the metadata fsync
failing)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli import errors
from spec.config import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    from reference.failover.controller import (
        CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS_DEFAULT, CONTROLLER_BUG_NAMES, DESIGNS,
    )

    p = sub.add_parser("controller", help="run a real controller: elections and SyncStateSets for many broker groups "
                                          "(metadata file with fsync, TCP on 127.0.0.1)")
    p.add_argument("--port", type=int, required=True, help="listen port (0: any free port)")
    p.add_argument("--host", default="127.0.0.1", help="listen address (default loopback only)")
    p.add_argument("--dir", type=Path, default=Path("ackorder-controller"),
                   help="metadata directory (controller.meta inside; default ./ackorder-controller)")
    p.add_argument("--design", choices=DESIGNS, default="pipelined",
                   help="serial: one metadata request at a time, one fsync each; pipelined: requests decided as "
                        "they come, records group-committed (default)")
    p.add_argument("--controller-broker-heartbeat-timeout-ms", type=int,
                   default=CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS_DEFAULT,
                   help="a broker not heard from for this long is not alive "
                        f"(default {CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS_DEFAULT}, controllerHeartBeatTimeoutMills)")
    p.add_argument("--max-groups", type=int, default=4096)
    p.add_argument("--bug", action="append", default=[], choices=CONTROLLER_BUG_NAMES, metavar="NAME",
                   help=f"switch a controller bug on (repeatable): {', '.join(CONTROLLER_BUG_NAMES)}")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from reference.failover.controller import ControllerConfig
    from reference.real.controller_server import ControllerOptions, serve_controller

    if not 0 <= args.port <= 65535:
        raise errors.UsageError(f"--port {args.port}: a port is 0..65535 (0: any free port)")
    if args.dir.exists() and not args.dir.is_dir():
        raise errors.UsageError(f"--dir {args.dir}: exists and is not a directory")
    try:
        config = ControllerConfig(controller_broker_heartbeat_timeout_ms=args.controller_broker_heartbeat_timeout_ms,
                                  design=args.design, max_groups=args.max_groups, bugs=frozenset(args.bug))
    except ConfigError as err:
        raise errors.UsageError(str(err).replace("controller_broker_heartbeat_timeout_ms =",
                                                 "--controller-broker-heartbeat-timeout-ms")) from None
    opts = ControllerOptions(directory=args.dir, config=config, host=args.host, port=args.port)
    try:
        return serve_controller(opts)
    except OSError as err:
        place = f"{err.filename}: " if err.filename else ""
        raise errors.EnvironmentFailure(f"{place}{err.strerror or err}") from None
