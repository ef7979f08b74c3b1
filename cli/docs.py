"""`python -m cli.docs`: regenerate the numbers the README shows from a real run, so they are
never typed by hand.  The README's quick tour (between its markers) is the output of
`ackorder tlc sync_flush BugAckOnWrote` as it prints today; `--check` only verifies that the
block still matches the manifest (what cli/tests/test_docs.py runs)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START, END = "<!-- quick-tour:start (python -m cli.docs) -->", "<!-- quick-tour:end -->"
TOUR = ("tlc", "sync_flush", "ack_on_wrote_bug")
WIDTH = "130"


def tour_output() -> str:
    p = subprocess.run([sys.executable, "-m", "cli", *TOUR], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": WIDTH, "NO_COLOR": "1", "TERM": "dumb"}, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"`ackorder {' '.join(TOUR)}` exited {p.returncode}:\n{p.stdout}{p.stderr}")
    keep = [line.rstrip() for line in p.stdout.splitlines()
            if not re.match(r"^\d\d:\d\d:\d\d ", line) and not line.startswith("TLC logs: ")]
    return f"$ ackorder {' '.join(TOUR)}\n" + "\n".join(keep).strip("\n") + f"\n$ echo $?\n{p.returncode}\n"


def tour_block(text: str) -> str:
    try:
        return text.split(START, 1)[1].split(END, 1)[0]
    except IndexError:
        raise SystemExit(f"{README}: the quick-tour markers are missing") from None


def rows(block: str) -> dict[str, tuple[int, int]]:
    """(distinct states, depth) of each model row of the tour's results table."""
    out = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) >= 7 and cells[3] == "as expected":
            out[cells[0]] = (int(cells[4].replace(",", "")), int(cells[6].split()[0]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare the README with the manifest")
    args = parser.parse_args(argv)
    text = README.read_text()
    if args.check:
        from tla.manifest import load_manifest

        recorded = {m.model: (m.distinct_states, m.depth) for m in load_manifest()}
        shown = rows(tour_block(text))
        stale = {k: (v, recorded.get(k)) for k, v in shown.items() if recorded.get(k) != v}
        if not shown or stale:
            print(f"README quick tour is stale (shown, manifest): {stale or 'no rows'}; run `python -m cli.docs`")
            return 1
        return 0
    block = "\n```\n" + tour_output() + "```\n"
    README.write_text(text.replace(START + tour_block(text) + END, START + block + END))
    print(f"{README}: quick tour regenerated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
