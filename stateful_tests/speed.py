"""Steps per CPU-second of each machine under the selected Hypothesis profile,
measured side by side in one run (`python -m stateful_tests.speed`).  `ackorder bench sim`
counts steps with ``counting`` too, each machine in a process of its own
(reference/bench/machinerates.py).

A step is one rule call (teardown's liveness phase included in the time, as a
user waits for it too).  Every machine runs a fixed number of test cases,
derandomized (the same programs on every run of the same code), in the
generate phase only, in this process; the time is the process's CPU time, so
other load on the machine changes it less than wall time.  The figure is
printed, never asserted: speed is measured, not tested."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hypothesis import Phase, settings
from hypothesis.stateful import RULE_MARKER, run_state_machine_as_test

from stateful_tests import profiles  # noqa: F401  (loads HYPOTHESIS_PROFILE)

MACHINES = ("SpecMachine", "RefinementMachine", "RealStoreMachine", "FailoverMachine")
DEFAULT_EXAMPLES = 60


def counting(machine: type) -> tuple[type, list[int]]:
    """A subclass whose rules count their calls into the returned list."""
    calls = [0]
    overrides = {}
    for name in dir(machine):
        rule = getattr(getattr(machine, name), RULE_MARKER, None)
        if rule is None:
            continue

        def counted(self, *args, _rule=rule.function, **kwargs):
            calls[0] += 1
            return _rule(self, *args, **kwargs)

        setattr(counted, RULE_MARKER, dataclasses.replace(rule, function=counted))
        overrides[name] = counted
    return type(f"Counting{machine.__name__}", (machine,), overrides), calls


def machine_class(name: str) -> type:
    """One of MACHINES by name."""
    if name == "FailoverMachine":
        from stateful_tests.failover_machine import FailoverMachine
        return FailoverMachine
    if name not in MACHINES:
        raise ValueError(f"unknown machine {name!r}; known: {', '.join(MACHINES)}")
    from stateful_tests import machines
    return getattr(machines, name)


def measure(machine: type, examples: int) -> tuple[int, float, float]:
    """(steps, CPU seconds, wall seconds) of ``examples`` derandomized test cases of ``machine``."""
    cls, calls = counting(machine)
    chosen = settings(settings(), max_examples=examples, derandomize=True, database=None,
                      phases=[Phase.explicit, Phase.generate])
    cpu, wall = time.process_time(), time.perf_counter()
    run_state_machine_as_test(cls, settings=chosen)
    return calls[0], time.process_time() - cpu, time.perf_counter() - wall


def machine_rates(examples: int = DEFAULT_EXAMPLES, machines: Sequence[str] = MACHINES) -> list[dict]:
    """Steps per CPU-second of each machine named (MACHINES), one after the other in this
    process: [{machine, examples, steps, cpu_s, wall_s, steps_per_s}, ...]."""
    if examples < 1:
        raise ValueError(f"examples must be at least 1, not {examples}")
    classes = [machine_class(name) for name in machines]     # every name checked before anything runs
    rows = []
    for name, cls in zip(machines, classes):
        steps, cpu_s, wall_s = measure(cls, examples)
        rows.append({"machine": name, "examples": examples, "steps": steps, "cpu_s": round(cpu_s, 3),
                     "wall_s": round(wall_s, 3), "steps_per_s": round(steps / cpu_s, 1) if cpu_s > 0 else 0.0})
    return rows


def side_by_side(baseline: Path, examples: int, machines: Sequence[str], repeats: int) -> list[dict]:
    """Each machine from the ``baseline`` tree and from this one, alternately, each run in its own
    process (``nice -n 5``), ``repeats`` times: the run of median CPU time of each, with the load
    average (1 min) taken before it, as rows with a ``tree`` key (before, after)."""
    trees = {"before": baseline.resolve(), "after": Path(__file__).resolve().parent.parent}
    rows = []
    for name in machines:
        runs: dict[str, list[dict]] = {tree: [] for tree in trees}
        for _ in range(repeats):
            for tree, path in trees.items():
                load = os.getloadavg()[0]
                code = ("import json; from stateful_tests.speed import machine_rates; "
                        f"print(json.dumps(machine_rates({examples}, [{name!r}])[0]))")
                out = subprocess.run(["nice", "-n", "5", sys.executable, "-c", code], cwd=path, check=True,
                                     env={**os.environ, "PYTHONPATH": str(path)}, capture_output=True, text=True)
                runs[tree].append({**json.loads(out.stdout.splitlines()[-1]), "tree": tree, "load": round(load, 2)})
        for tree in trees:
            rows.append(sorted(runs[tree], key=lambda r: r["cpu_s"])[len(runs[tree]) // 2])
    return rows


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES,
                        help=f"test cases per machine (default {DEFAULT_EXAMPLES})")
    parser.add_argument("--machine", action="append", choices=MACHINES, help="a machine to measure (default: all)")
    parser.add_argument("--baseline", type=Path, metavar="TREE",
                        help="also run every machine from this tree (a git archive with this speed.py), "
                             "alternately with this one, each run in its own process")
    parser.add_argument("--repeats", type=int, default=3, help="runs per machine and tree with --baseline (median)")
    args = parser.parse_args(argv)
    if args.examples < 1:
        parser.error(f"--examples must be at least 1, not {args.examples}")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    if args.baseline is not None and not (args.baseline / "stateful_tests" / "speed.py").is_file():
        parser.error(f"--baseline {args.baseline}: no stateful_tests/speed.py there (copy this one in)")
    console = Console()
    machines = args.machine or MACHINES
    if args.baseline is None:
        for row in machine_rates(args.examples, machines):
            console.print(f"{row['machine']:18} {row['steps']:7,} steps in {row['cpu_s']:6.1f} CPU s = "
                          f"{row['steps_per_s']:8,.0f} steps/s")
        return 0
    rows = side_by_side(args.baseline, args.examples, machines, args.repeats)
    print("| machine | steps | before CPU s | before steps/s | load | after CPU s | after steps/s | load | after / before |")
    print("|---|---|---|---|---|---|---|---|---|")
    for before, after in zip(rows[::2], rows[1::2]):
        steps = f"{before['steps']:,}" if before["steps"] == after["steps"] else f"{before['steps']:,} / {after['steps']:,}"
        print(f"| {before['machine']} | {steps} | {before['cpu_s']:.2f} | {before['steps_per_s']:,.0f} | {before['load']} "
              f"| {after['cpu_s']:.2f} | {after['steps_per_s']:,.0f} | {after['load']} "
              f"| {after['steps_per_s'] / before['steps_per_s']:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
