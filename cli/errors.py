"""Exit codes, one convention for every `ackorder` command, and the errors that map to them.

* 0 — everything as expected (a --bug campaign that found its bug is "as expected");
* 1 — a property violated, a loss found, or an outcome other than the expected one;
* 2 — bad usage or input: one line on stderr, never a traceback;
* 3 — the environment failed (Java missing, a Spark master or a broker unreachable, a port in use, a disk
  that fails or is full: ``os_error_exit``).

A Ctrl-C or a SIGTERM ends a command with 130 (the shell's convention for SIGINT) after it kept what finished
(cli/main.py); a server stops cleanly on either with 0.
"""

from __future__ import annotations

import errno
import socket
import threading

OK = 0
VIOLATION = 1
USAGE = 2
ENVIRONMENT = 3
INTERRUPTED = 130


# Set by cli/main.py's SIGINT and SIGTERM handlers before they raise KeyboardInterrupt: Python drops an
# exception raised in an object's finalizer (z3's objects have them), so a command may run to its end
# after a Ctrl-C; it then still ends with INTERRUPTED, not with a verdict.
STOP_REQUESTED = threading.Event()


class UsageError(Exception):
    """Bad usage or input (exit 2); the message names the problem and the place."""


class EnvironmentFailure(Exception):
    """Something outside the input failed (exit 3): a missing program, an unreachable service."""


# An OSError is about what the command line named when it says the path or address is not what the
# command needs: no such path, a file where a directory should be (or the other way round), a name
# that exists already, an address that is not this machine's.  Any other is the machine's: a disk
# that cannot write or sync, no space, memory or descriptor left, a read-only file system, no
# permission, a port another process holds, a peer that refuses or does not answer, and the
# project's own errno-less ones (an etcd with no majority).
INPUT_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOTEMPTY,
                          errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL, errno.EADDRNOTAVAIL})


# A host name's look-up (socket.gaierror, whose errno is an EAI_ code, negative where errnos are not, so
# the two never meet): a name that does not exist is the input's; a resolver that fails or cannot be
# reached now (EAI_AGAIN, EAI_FAIL) is the machine's.
INPUT_LOOKUP_ERRORS = frozenset(getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA", "EAI_SERVICE",
                                                                   "EAI_FAMILY", "EAI_ADDRFAMILY")
                                if hasattr(socket, name))


# What ends a line for str.splitlines() (a terminal, `read` and Python's universal newlines: the first
# two), written as its escape: an argument with a newline in it, quoted back in an error, made the
# one line two.
_LINE_BREAKS = {c: repr(chr(c))[1:-1] for c in (0x0A, 0x0D, 0x0B, 0x0C, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)}


def one_line(text: object) -> str:
    """``str(text)`` with its line breaks escaped: a usage or environment error is one line."""
    return str(text).translate(_LINE_BREAKS)


def os_error_exit(err: OSError) -> int:
    """The exit code of a command stopped by ``err``: 2 for the input's, 3 for the machine's."""
    return USAGE if err.errno in INPUT_ERRNOS or err.errno in INPUT_LOOKUP_ERRORS else ENVIRONMENT


def os_error_line(command: str, err: OSError) -> str:
    """The one line that says so: ``ackorder CMD: environment: ...`` or ``ackorder CMD: error: ...``,
    naming the file when the error has one."""
    text = err.strerror or str(err) or type(err).__name__
    if err.filename is not None:
        text = f"{err.filename}: {text}"
    return one_line(f"ackorder {command}: {'environment' if os_error_exit(err) == ENVIRONMENT else 'error'}: {text}")
