"""The kill suite's ``chaos`` stage, for the real runtime's modules: short chaos runs on real processes.

`python -m spark_fuzz.mutation.chaosstage` runs, in the mutant's copy of the tree (the brokers it
starts run that tree: reference/real/chaos.py), a kill -9 run with corrupt tails and a power-loss
run, each a few seconds, and exits 1 at the first that does not exit 0, printing one line
"violation chaos ARGV: exit N".
"""

from __future__ import annotations

import sys

RUNS = (("chaos", "--kills", "3", "--seed", "0", "--max-load-s", "0.4", "--corrupt"),
        ("chaos", "--power-loss", "--kills", "2", "--seed", "3"))


def main() -> int:
    import contextlib
    import io

    from cli.main import main as cli_main

    for argv in RUNS:
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli_main(list(argv))
        if code != 0:
            print(f"violation {' '.join(argv)}: exit {code}")
            return 1
    print(f"clean: {len(RUNS)} chaos runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
