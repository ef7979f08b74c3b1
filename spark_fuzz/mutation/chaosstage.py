"""The kill suite's ``chaos`` stage, for the real runtime's modules: short chaos runs on real processes.

`python -m spark_fuzz.mutation.chaosstage` runs, in the mutant's copy of the tree (PYTHONPATH; the
brokers a chaos run starts run that tree too: reference/real/chaos.py), a kill -9 run with corrupt
tails, one with the transient store pool whose commits cross segment rolls, and a power-loss run,
each a few seconds, as `python -m cli chaos ...` processes, and exits 1 at the first that does not
exit 0, printing one line "violation chaos ARGV: exit N".
"""

from __future__ import annotations

import subprocess
import sys

RUNS = (("chaos", "--kills", "3", "--seed", "0", "--max-load-s", "0.4", "--corrupt"),
        ("chaos", "--kills", "2", "--seed", "0", "--max-load-s", "0.4", "--transient-store-pool", "--segment-bytes",
         "16384"),
        ("chaos", "--power-loss", "--kills", "2", "--seed", "3"))


def main() -> int:
    for argv in RUNS:
        done = subprocess.run([sys.executable, "-m", "cli", *argv], capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])[-1]
            print(f"violation {' '.join(argv)}: exit {done.returncode} {last[:200]}")
            return 1
    print(f"clean: {len(RUNS)} chaos runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
