"""Exit codes, one convention for every `ackorder` command, and the errors that map to them.

* 0 — everything as expected (a --bug campaign that found its bug is "as expected");
* 1 — a property violated, a loss found, or an outcome other than the expected one;
* 2 — bad usage or input: one line on stderr, never a traceback;
* 3 — the environment failed (Java missing, a Spark master or a broker unreachable, a port in use, a disk
  that fails or is full: ``os_error_exit``).

A Ctrl-C ends a command with 130 (the shell's convention for SIGINT) after it kept what finished.
"""

from __future__ import annotations

import errno

OK = 0
VIOLATION = 1
USAGE = 2
ENVIRONMENT = 3
INTERRUPTED = 130


class UsageError(Exception):
    """Bad usage or input (exit 2); the message names the problem and the place."""


class EnvironmentFailure(Exception):
    """Something outside the input failed (exit 3): a missing program, an unreachable service."""


# An OSError is the machine's, not the command line's, when it says a disk cannot write or sync, there
# is no space or memory or no descriptor left, the file system is read-only, the user may not, or
# another process holds the port.  Any other (a file where a directory should be, no such path, an
# address that is not this machine's) is about what the command line named.
ENVIRONMENT_ERRNOS = frozenset({errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENOMEM, errno.EMFILE,
                                errno.ENFILE, errno.EACCES, errno.EPERM, errno.EADDRINUSE})


def os_error_exit(err: OSError) -> int:
    """The exit code of a command stopped by ``err``: 3 for the machine's, 2 for the input's."""
    return ENVIRONMENT if err.errno in ENVIRONMENT_ERRNOS else USAGE


def os_error_line(command: str, err: OSError) -> str:
    """The one line that says so: ``ackorder CMD: environment: ...`` or ``ackorder CMD: error: ...``,
    naming the file when the error has one."""
    text = err.strerror or str(err) or type(err).__name__
    if err.filename is not None:
        text = f"{err.filename}: {text}"
    return f"ackorder {command}: {'environment' if os_error_exit(err) == ENVIRONMENT else 'error'}: {text}"
