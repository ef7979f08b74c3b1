"""Console output shared by the commands."""

from __future__ import annotations

import os
import sys

from rich.console import Console

LOG_WIDTH = 160  # when output goes to a file or CI log, not a terminal


def console(stderr: bool = False) -> Console:
    """A rich console; wide enough for the tables when not on a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or "COLUMNS" in os.environ:
        return Console(stderr=stderr)
    return Console(width=LOG_WIDTH, stderr=stderr)


def print_line(text: str) -> None:
    """One line exactly as given, never wrapped or styled: a command to paste."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
