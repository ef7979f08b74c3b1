"""Steps per CPU-second of the Hypothesis refinement machines (`ackorder bench sim`'s machine rows).

Each machine runs in a fresh Python process under the ``ci`` profile (derandomized: the same
programs on every run, so two trees run the same examples), generation only, a fixed number of
examples; a step is one rule call, the time is the process's own CPU time around the run (imports
excluded).  With a ``baseline`` tree each machine runs from it right before the same machine from
this tree: the after/before ratio comes from one run.

The goal of issue 17: the machines at >= 2x their steps/s before it (1,200-2,700 steps/s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from reference.bench.simrates import HERE, load_average

GOAL_MACHINE_SPEEDUP = 2.0
BEFORE_STEPS_PER_S = (1_200, 2_700)     # issue 17's "today": the range the machines ran at
MACHINES = {"write-path": "stateful_tests.machines:RefinementMachine",
            "failover": "stateful_tests.failover_machine:FailoverMachine"}
POINT_TIMEOUT_S = 1800

# Only stateful_tests.speed.counting and the machines, which every tree since issue 15 has.
_POINT = """
import importlib, json, os, sys, time
os.environ["HYPOTHESIS_PROFILE"] = "ci"
import stateful_tests
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from stateful_tests import profiles
from stateful_tests.speed import counting
module, name = sys.argv[1].split(":")
examples = int(sys.argv[2])
cls, calls = counting(getattr(importlib.import_module(module), name))
chosen = settings(settings.get_profile("ci"), max_examples=examples, phases=[Phase.generate])
cpu0 = time.process_time()
run_state_machine_as_test(cls, settings=chosen)
cpu = time.process_time() - cpu0
print(json.dumps({"steps": calls[0], "cpu_s": cpu, "code": stateful_tests.__file__}))
"""


def machine_point(tree: Path, machine: str, examples: int) -> dict:
    """``examples`` programs of one machine from source tree ``tree``, in its own process."""
    assert machine in MACHINES and examples >= 1, (machine, examples)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", _POINT, MACHINES[machine], str(examples)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=POINT_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"the {machine} machine from {tree} failed:\n{proc.stderr[-2000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    ran = Path(r["code"]).resolve().parents[1]
    if ran != tree.resolve():
        raise RuntimeError(f"the machine run meant for {tree} imported the code of {ran}")
    assert r["steps"] > 0, r
    return {"steps": r["steps"], "cpu_s": round(r["cpu_s"], 2), "steps_per_s": round(r["steps"] / max(r["cpu_s"], 1e-9))}


def machine_rates(examples: int, baseline: Path | None = None,
                  progress: Callable[[str], None] = print) -> dict:
    """Each machine's steps per CPU-second (and, with ``baseline``, its after/before ratio)."""
    trees = ([("before", baseline.resolve())] if baseline is not None else []) + [("after", HERE)]
    rows = []
    for machine in MACHINES:
        for tree_name, tree in trees:
            progress(f"machines {tree_name}: {machine}, {examples} examples")
            load = load_average()
            rows.append({"tree": tree_name, "machine": machine, "examples": examples, "load": load,
                         **machine_point(tree, machine, examples)})
    ratios = {}
    if baseline is not None:
        for machine in MACHINES:
            before, after = (next(r for r in rows if (r["tree"], r["machine"]) == (t, machine))
                             for t in ("before", "after"))
            # the same derandomized programs from both trees: the same steps, unless a tree's rules changed
            ratios[f"machine_{machine}_after_over_before"] = round(after["steps_per_s"] / before["steps_per_s"], 2)
    return {"rows": rows, "ratios": ratios, "goal_speedup": GOAL_MACHINE_SPEEDUP,
            "goal_steps_per_s": [GOAL_MACHINE_SPEEDUP * b for b in BEFORE_STEPS_PER_S]}
