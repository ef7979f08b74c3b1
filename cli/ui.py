"""Console output shared by the commands."""

from __future__ import annotations

import os
import sys

from rich.console import Console

LOG_WIDTH = 160  # when output goes to a file or CI log, not a terminal

# Red is for what makes the exit code 1.  What a --bug run was asked to find, found as its model says,
# is shown in yellow, and so is a coverage gap: both come with exit code 0.
FAILED = "bold red"
FOUND_AS_EXPECTED = "bold yellow"
GAP = "bold yellow"


def bar_column():
    """A progress bar in blue and green: rich's own is drawn in a pinkish red (bar.complete,
    bar.pulse) that a terminal shows as red, which would be red printed under exit code 0."""
    from rich.progress import BarColumn

    return BarColumn(style="grey37", complete_style="blue", finished_style="green", pulse_style="blue")


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
