"""Simulated steps per CPU-second, checked against the spec and not, at several run lengths,
side by side (`ackorder bench sim`).

Every point is one seeded run of the simulator (reference/sim/world.py) in a fresh Python process,
so that no run inherits another's heap; the process measures its own CPU time (user + system of
the run alone, not the imports), which other jobs on the machine disturb far less than the wall
clock.  With a ``baseline`` source tree (the code before a change), each point runs from it too,
right before the same point from this tree: the before/after ratios come from one run.

The goal of issue 17: the cost of a checked event does not grow with the run (a 1,000,000-step run
keeps at least 0.8x the steps/s of a 10,000-step run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

Progress = Callable[[str], None]
HERE = Path(__file__).resolve().parents[2]
GOAL_LONG_OVER_SHORT = 0.8
GOAL_CHECKED_STEPS_PER_S = 40_000
GOAL_UNCHECKED_STEPS_PER_S = 150_000
POINT_TIMEOUT_S = 6 * 3600

# Only the World and draw APIs, which every tree since the simulator has: a baseline runs it as is.
_POINT = """
import json, sys, time
import reference
from reference.sim.params import draw
from reference.sim.world import World
seed, steps, check = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
world = World(draw(seed), check=check)
cpu0, wall0 = time.process_time(), time.perf_counter()
out = world.run(steps, liveness=False)
cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
print(json.dumps({"steps": out.steps, "spec_steps": out.spec_steps, "violation": out.violation,
                  "cpu_s": cpu, "wall_s": wall, "code": reference.__file__}))
"""


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def point(tree: Path, seed: int, steps: int, checked: bool) -> dict:
    """One run of ``steps`` events of seed ``seed`` from source tree ``tree``, in its own process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", _POINT, str(seed), str(steps), "1" if checked else "0"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=POINT_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"the simulator run from {tree} (seed {seed}, {steps} steps) failed:\n{proc.stderr[-2000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    ran = Path(r.pop("code")).resolve().parents[1]
    if ran != tree.resolve():
        raise RuntimeError(f"the run meant for {tree} imported the code of {ran}")
    if r["violation"] is not None or r["steps"] != steps:
        raise RuntimeError(f"seed {seed} from {tree}: {r['steps']} of {steps} steps, violation {r['violation']}")
    return {"steps": steps, "spec_steps": r["spec_steps"], "cpu_s": round(r["cpu_s"], 2),
            "wall_s": round(r["wall_s"], 2), "steps_per_s": round(steps / max(r["cpu_s"], 1e-9))}


def sim_rates(lengths: tuple[int, ...], seed: int = 0, baseline: Path | None = None,
              progress: Progress = print) -> dict:
    """Checked steps/s at each of ``lengths`` and unchecked steps/s at the longest, from this tree
    and (side by side, point by point) from ``baseline``."""
    assert lengths and all(n > 0 for n in lengths), lengths
    lengths = tuple(sorted(set(lengths)))
    trees = ([("before", baseline.resolve())] if baseline is not None else []) + [("after", HERE)]
    rows = []
    points = [(True, n) for n in lengths] + [(False, lengths[-1])]
    for checked, n in points:
        for tree_name, tree in trees:
            kind = "checked" if checked else "unchecked"
            progress(f"sim {tree_name}: {kind}, {n:,} steps of seed {seed}")
            load = load_average()
            rows.append({"tree": tree_name, "kind": kind, "load": load, **point(tree, seed, n, checked)})
    out: dict = {"scenario": "sim", "seed": seed, "lengths": list(lengths), "rows": rows,
                 "baseline": str(baseline) if baseline else None, "ratios": {}}
    for tree_name, _ in trees:
        mine = {(r["kind"], r["steps"]): r for r in rows if r["tree"] == tree_name}
        short, long_ = mine[("checked", lengths[0])], mine[("checked", lengths[-1])]
        out["ratios"][f"{tree_name}_long_over_short"] = round(long_["steps_per_s"] / short["steps_per_s"], 2)
        out["ratios"][f"{tree_name}_check_cost"] = round(
            mine[("unchecked", lengths[-1])]["steps_per_s"] / long_["steps_per_s"], 2)
    if baseline is not None:
        for checked, n in points:
            kind = "checked" if checked else "unchecked"
            b, a = (next(r for r in rows if r["tree"] == t and r["kind"] == kind and r["steps"] == n)
                    for t in ("before", "after"))
            out["ratios"][f"after_over_before_{kind}_{n}"] = round(a["steps_per_s"] / b["steps_per_s"], 2)
    # The figures `bench all` has always reported: this tree's shortest checked and longest unchecked run.
    after = {(r["kind"], r["steps"]): r for r in rows if r["tree"] == "after"}
    out["checked"] = after[("checked", lengths[0])]
    out["unchecked"] = after[("unchecked", lengths[-1])]
    out["check_cost"] = round(out["unchecked"]["steps_per_s"] / out["checked"]["steps_per_s"], 2)
    out["goals"] = {"long_over_short": GOAL_LONG_OVER_SHORT, "checked_steps_per_s": GOAL_CHECKED_STEPS_PER_S,
                    "unchecked_steps_per_s": GOAL_UNCHECKED_STEPS_PER_S}
    return out


def markdown(result: dict) -> list[str]:
    """The sim section's table and ratios, as docs/benchmarks.md shows them."""
    lines = ["| tree | run | steps | CPU s | steps per CPU-s | load average |", "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['tree']} | {r['kind']} | {r['steps']:,} | {r['cpu_s']} | {r['steps_per_s']:,} | "
                     f"{r['load']} |")
    for master in ("local[1]", "local[2]"):
        if master in result:
            r = result[master]
            lines.append(f"| after | campaign on {master} | {r['seeds']:,} seeds | {r['seconds']} (wall) | "
                         f"{r['steps_per_s']:,} ({r['seeds_per_s']} seeds/s) | |")
    lines += ["", "Ratios: `" + json.dumps(result["ratios"]) + "`"]
    return lines
