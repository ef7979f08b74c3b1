"""Console output shared by the commands."""

from __future__ import annotations

import os
import sys

from rich.console import Console

LOG_WIDTH = 160  # when output goes to a file or CI log, not a terminal


def console() -> Console:
    """A rich console; wide enough for the tables when not on a terminal."""
    if sys.stdout.isatty() or "COLUMNS" in os.environ:
        return Console()
    return Console(width=LOG_WIDTH)
