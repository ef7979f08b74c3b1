"""What `ackorder` and `python -m cli` start with: nothing imported yet but ``sys``, so that a
Ctrl-C while the command's modules load (argparse, the CLI itself: a few hundred ms on a loaded
machine) is the same one line and exit 130 as one during the command, not a traceback."""

import sys

INTERRUPTED = 130          # cli.errors.INTERRUPTED, not imported: the point is to import nothing


def main() -> int:
    try:
        from cli.main import main as run
    except KeyboardInterrupt:
        sys.stderr.write("ackorder: interrupted\n")
        return INTERRUPTED
    return run()
