"""The kill suite's ``fuzz`` stage: seeds of the fuzz campaign's own simulations, in this process.

`python -m spark_fuzz.mutation.fuzzstage --seeds N --steps S write-path failover` runs seeds
0..N-1 of each model exactly as a `fuzz` campaign's task runs them (`spark_fuzz.seeds.run_job`,
every step checked against the spec) and exits 1 at the first seed that is not "ok", printing
one line "violation MODEL seed I: OUTCOME ...", 0 when every seed is clean.  It runs in the
mutant's copy of the tree (PYTHONPATH), so the simulation is the mutated code's.
"""

from __future__ import annotations

import argparse
import sys

CAMPAIGN = "mutation-kill-suite"      # fixed: the same seeds for every mutant and the clean baseline


def main(argv: list[str] | None = None) -> int:
    from spark_fuzz.seeds import Job, run_job

    p = argparse.ArgumentParser(prog="python -m spark_fuzz.mutation.fuzzstage")
    p.add_argument("--seeds", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("models", nargs="+", choices=("write-path", "failover"))
    args = p.parse_args(argv)
    for model in args.models:
        for index in range(args.seeds):
            row = run_job(Job(CAMPAIGN, index, (), None, args.steps, model))
            if row["outcome"] != "ok":
                message = row["message"].strip().splitlines()[-1:] if row["message"] else []
                print(f"violation {model} seed {index}: {row['signature'] or row['outcome']}"
                      f"{' (' + message[0][:160] + ')' if message else ''}")
                return 1
    print(f"clean: {args.seeds} seeds of {', '.join(args.models)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
