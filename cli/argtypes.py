"""Argument types checked when the command line is parsed, so that a bad output path is a usage
error (exit 2, one line) before any work starts, not after a run of minutes whose results could
then not be written."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def _writable_file_in(text: str, directory: Path) -> Path:
    """``text`` as a file path that can be written once ``directory`` (the file's directory, or
    the nearest one of its ancestors that exists) is where new entries are made."""
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("expected a file name")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory, expected a file")
    if not directory.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {directory} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: the directory {directory} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: the file is not writable")
    return path


def _refusing_os_errors(check):
    """An argparse type whose checks of the file system may raise OSError (a name too long for it,
    ENAMETOOLONG; a component it cannot search): a usage error naming the path, as its other
    refusals are.  argparse turns only ArgumentTypeError, TypeError and ValueError into one; an
    OSError escaped as a traceback."""
    def parse(text: str) -> Path:
        try:
            return check(text)
        except OSError as err:
            shown = text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"
            raise argparse.ArgumentTypeError(f"{shown}: {err.strerror or err}") from None
    parse.__name__ = check.__name__       # argparse's "invalid <name> value" names the type
    parse.__doc__ = check.__doc__
    return parse


@_refusing_os_errors
def output_file(text: str) -> Path:
    """A file the command will write: it may exist (it is replaced) but not as a directory, and
    its directory must exist and be writable."""
    parent = Path(text).parent
    if text and not parent.exists():
        raise argparse.ArgumentTypeError(f"{text}: the directory {parent} does not exist")
    return _writable_file_in(text, parent)


@_refusing_os_errors
def output_file_in_new_directory(text: str) -> Path:
    """Like output_file, for a command that creates the file's missing directories: the nearest
    directory that exists must be writable."""
    ancestor = Path(text).parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    return _writable_file_in(text, ancestor)


TRACE_HASH_HEX_DIGITS = (16, 64)    # a failover schedule's hash, a simulation's SHA-256


def trace_hash(text: str) -> str:
    """A trace hash as `ackorder sim` and `fuzz` print it, so that a mistyped one is a usage error
    before the replay runs, not a 'different run' after it."""
    digits = text.strip().lower()
    if len(digits) not in TRACE_HASH_HEX_DIGITS or any(c not in "0123456789abcdef" for c in digits):
        raise argparse.ArgumentTypeError(
            f"expected a trace hash ({' or '.join(map(str, TRACE_HASH_HEX_DIGITS))} hex digits, as `ackorder sim` "
            f"prints it), got {text!r}")
    return digits


def host(text: str) -> str:
    """An argparse type: a listen address's host (reference/real/options.host_problem), or a one-line
    usage error: a host the socket layer cannot encode was a traceback at bind."""
    from reference.real.options import host_problem

    if (problem := host_problem(text)) is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text


def int_at_least(minimum: int, what: str):
    """An argparse type: an integer >= minimum, or a one-line usage error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value
    return parse


positive_int = int_at_least(1, "a positive integer")
natural_int = int_at_least(0, "a natural number")


def float_at_least(minimum: float, what: str, strictly: bool = False):
    """An argparse type: a finite number >= minimum (> minimum when ``strictly``), or a one-line usage error."""
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (strictly and value == minimum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value
    return parse


positive_float = float_at_least(0.0, "a positive number", strictly=True)
natural_float = float_at_least(0.0, "a number >= 0")


def bug_name(names: tuple[str, ...]):
    """An argparse type: a bug switch of ``names`` by either spelling (BugAckOnWrote or
    ack_on_wrote_bug), or a one-line usage error suggesting the closest."""
    def parse(text: str) -> str:
        from spec.config import ConfigError, resolve_bug

        try:
            return resolve_bug(text, names)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return parse
