"""Time to detect (docs/fuzz.md): for every bug switch, the default campaign on local[2] in batches of 50
seeds, stopped at the first failure, no audit, from three disjoint seed ranges; seconds are the campaign's
own (summary.json ``seconds``), one Spark session for all runs.  Run from a source tree (its code is what
runs): ``python -m spark_fuzz.timetodetect --json FILE [BUG ...]``.  Exit 0 when every campaign found its
bug as its cfg expects, 1 when one did not, 2 on a bad argument."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

RANGES = (0, 100_000, 200_000)
SEEDS, BATCH_SEEDS = 2_000, 50


def time_to_detect(bugs: list[tuple[str, str]], master: str = "local[2]") -> list[dict]:
    """One row per (bug, model): the seeds and seconds each seed range's campaign took to find it."""
    from spark_fuzz.campaign import (
        CampaignSpec,
        campaign_verdict,
        run_campaign,
        spark_session,
    )

    spark = spark_session(master)
    work = Path(tempfile.mkdtemp(prefix="ackorder-ttd-"))
    rows = []
    try:
        for bug, model in bugs:
            runs = []
            for first in RANGES:
                out = work / f"{bug}-{first}"
                summary = run_campaign(spark, CampaignSpec(seeds=SEEDS, first_seed=first, out=out, bug=bug,
                                                           batch_seeds=BATCH_SEEDS, max_failures=1, audit=False,
                                                           model=model))
                as_expected, text = campaign_verdict(summary, bug)
                runs.append({"first": first, "seeds": summary["seeds"], "seconds": round(summary["seconds"], 1),
                             "code": 0 if as_expected else 1, "text": text})
                shutil.rmtree(out, ignore_errors=True)
            rows.append({"bug": bug, "model": model, "runs": runs})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    from spec.config import BUG_NAMES
    from spec.failover.config import FAILOVER_BUG_NAMES

    every = [(b, "write-path") for b in BUG_NAMES] + [(b, "failover") for b in FAILOVER_BUG_NAMES]
    p = argparse.ArgumentParser(prog="python -m spark_fuzz.timetodetect", description=__doc__.split("\n\n")[0])
    p.add_argument("bugs", nargs="*", metavar="BUG", help="bug switches (default: every one)")
    p.add_argument("--json", type=Path, required=True, metavar="FILE", help="where the rows go")
    p.add_argument("--master", default="local[2]")
    args = p.parse_args(argv)
    unknown = sorted(set(args.bugs) - {b for b, _ in every})
    if unknown:
        print(f"timetodetect: error: unknown bug switch(es) {', '.join(unknown)}", file=sys.stderr)
        return 2
    rows = time_to_detect([x for x in every if not args.bugs or x[0] in args.bugs], args.master)
    args.json.write_text(json.dumps(rows, indent=1) + "\n")
    medians = [statistics.median(r["seconds"] for r in row["runs"]) for row in rows]
    misses = [(row["bug"], r["first"], r["text"]) for row in rows for r in row["runs"] if r["code"] != 0]
    print(f"median of medians {statistics.median(medians):.1f} s, worst "
          f"{max(r['seconds'] for row in rows for r in row['runs']):.1f} s, misses {misses}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
