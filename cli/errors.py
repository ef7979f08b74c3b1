"""Exit codes, one convention for every `ackorder` command, and the errors that map to them.

* 0 — everything as expected (a --bug campaign that found its bug is "as expected");
* 1 — a property violated, a loss found, or an outcome other than the expected one;
* 2 — bad usage or input: one line on stderr, never a traceback;
* 3 — the environment failed (Java missing, a Spark master unreachable, a port in use...).

A Ctrl-C ends a command with 130 (the shell's convention for SIGINT) after it kept what finished.
"""

from __future__ import annotations

OK = 0
VIOLATION = 1
USAGE = 2
ENVIRONMENT = 3
INTERRUPTED = 130


class UsageError(Exception):
    """Bad usage or input (exit 2); the message names the problem and the place."""


class EnvironmentFailure(Exception):
    """Something outside the input failed (exit 3): a missing program, an unreachable service."""
