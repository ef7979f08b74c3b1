"""The `ackorder` command line: argument parsing, and the one place where errors
become exit codes (cli/errors.py) — bad input is one line on stderr, never a
traceback."""

from __future__ import annotations

import argparse
import importlib.metadata
import signal
import sys
import threading

from cli import errors

DESCRIPTION = ("Formal model and reference implementation of a RocketMQ-style broker's write path: "
               "an acknowledgement never runs ahead of the data it vouches for. "
               "Exit codes: 0 as expected, 1 a violation, loss or unexpected outcome, "
               "2 bad usage or input, 3 the environment failed.")


class Parser(argparse.ArgumentParser):
    """Usage errors in one line (and exit 2), pointing at --help."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(errors.one_line(f"{self.prog}: error: {message} (see `{self.prog} --help`)") + "\n")
        sys.exit(errors.USAGE)


def _version() -> str:
    try:
        return importlib.metadata.version("ackorder")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


# Each command and the cli module that registers it (`add_parser`, or `add_parsers` for several).
COMMANDS = {"run": "run", "tlc": "tlc", "twin": "twin", "prove": "prove", "sim": "sim", "replay": "replay",
            "stateful": "stateful", "fuzz": "fuzz", "fuzz-report": "fuzz", "trace-check": "tracecheck",
            "broker": "broker", "load": "broker", "chaos": "chaos", "bench": "bench", "controller": "controller", "mutate": "mutate"}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, when ``argv`` starts with a command, only that command's
    module: a broker process (tests, benchmarks and chaos runs start hundreds) then imports
    neither Hypothesis nor Spark nor pyarrow, and starts in a fifth of the time."""
    import importlib

    parser = Parser(prog="ackorder", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"ackorder {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = [COMMANDS[argv[0]]] if argv and argv[0] in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in chosen:
        module = importlib.import_module(f"cli.{name}")
        (module.add_parsers if hasattr(module, "add_parsers") else module.add_parser)(sub)
    return parser


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` chose: ``ackorder broker master``'s, not ``ackorder``'s."""
    while True:
        chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, chooser.dest, None) if chooser is not None else None
        if chosen not in (chooser.choices if chooser is not None else {}):
            return parser
        parser = chooser.choices[chosen]


def split_passthrough(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """`ackorder tlc MODEL -- -fp 3`: what follows the first `--` goes to the tool verbatim."""
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], tuple(argv[at + 1:])
    return argv, ()


def main(argv: list[str] | None = None) -> int:
    errors.STOP_REQUESTED.clear()
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if on_main_thread else None
    if previous is signal.default_int_handler:      # not where SIGINT is ignored (a shell's background job)
        signal.signal(signal.SIGINT, _interrupt)
    try:
        return _main(argv)
    except KeyboardInterrupt:            # before the command ran: while its modules were being imported
        sys.stderr.write("ackorder: interrupted\n")
        return errors.INTERRUPTED
    finally:
        if previous is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous)
        errors.STOP_REQUESTED.clear()       # said by the exit code; not left for what else runs in this process


def _main(argv: list[str] | None) -> int:
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)    # progress reaches a pipe (make run | tee) as it happens
    argv, passthrough = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(argv)
    if any("\x00" in arg for arg in argv):
        # no path, number or name holds one (a process's argv cannot: this is a caller's in-process
        # argv), and open() or stat() of it raised ValueError deep in a command
        parser.error(f"argument {next(i for i, a in enumerate(argv, 1) if chr(0) in a)} holds a NUL character")
    args, unknown = parser.parse_known_args(argv)
    if unknown:      # said by the command's own parser, which names the command and its --help
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if passthrough and not hasattr(args, "passthrough"):
        parser.error(f"`ackorder {args.command}` takes no arguments after `--`")
    if passthrough:
        args.passthrough = passthrough
    return run_command(args)


def run_command(args: argparse.Namespace) -> int:
    from spec.config import ConfigError
    from tla.manifest import ManifestError
    from tla.tlc import TlcUnavailable

    where = f"ackorder {args.command}"
    # A SIGTERM (a `timeout`, a CI job cancelled) stops a command as a Ctrl-C does: what it started
    # (TLC's JVMs, Spark) is stopped and what finished is kept, not left running behind a dead parent.
    # A server installs its own handler for a clean stop; one already set here is left alone.
    terminate = signal.getsignal(signal.SIGTERM)
    as_interrupt = terminate is signal.SIG_DFL and threading.current_thread() is threading.main_thread()
    if as_interrupt:
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        return _interrupted(where)
    except (errors.UsageError, ConfigError, ManifestError) as err:
        sys.stderr.write(f"{where}: error: {errors.one_line(err)}\n")
        return errors.USAGE
    except (errors.EnvironmentFailure, TlcUnavailable) as err:
        if errors.STOP_REQUESTED.is_set():   # what an interrupt broke, wrapped as "Spark did not start"
            return _interrupted(where)
        sys.stderr.write(f"{where}: environment: {errors.one_line(err)}\n")
        return errors.ENVIRONMENT
    except OSError as err:
        if errors.STOP_REQUESTED.is_set():
            return _interrupted(where)
        sys.stderr.write(errors.os_error_line(args.command, err) + "\n")
        return errors.os_error_exit(err)
    except Exception:
        # What a Ctrl-C broke on its way out (a Spark session whose stop() finds the JVM's connection
        # gone raises that in place of the KeyboardInterrupt) is the interrupt, not a defect.
        if errors.STOP_REQUESTED.is_set():
            return _interrupted(where)
        raise
    finally:
        if as_interrupt:
            signal.signal(signal.SIGTERM, terminate)
    if errors.STOP_REQUESTED.is_set():       # a Ctrl-C the command never saw (raised in a finalizer, dropped)
        return _interrupted(where)
    assert code in (errors.OK, errors.VIOLATION, errors.USAGE, errors.ENVIRONMENT, errors.INTERRUPTED), \
        f"{where} returned exit code {code!r}"
    return code


def _interrupted(where: str) -> int:
    sys.stderr.write(f"{where}: interrupted\n")
    return errors.INTERRUPTED


def _interrupt(signum, frame) -> None:
    errors.STOP_REQUESTED.set()
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
