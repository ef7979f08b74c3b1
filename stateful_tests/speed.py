"""Steps per second of each machine under the selected Hypothesis profile,
measured side by side in one run (`python -m stateful_tests.speed`).

A step is one rule call (teardown's liveness phase and shrinking included in
the time, as a user waits for them too).  The figure is printed, never
asserted: speed is measured, not tested."""

from __future__ import annotations

import argparse
import dataclasses
import time

from hypothesis import Phase, settings
from hypothesis.stateful import RULE_MARKER, run_state_machine_as_test

from stateful_tests import profiles  # noqa: F401  (loads HYPOTHESIS_PROFILE)
from stateful_tests.machines import RealStoreMachine, RefinementMachine, SpecMachine
from rich.console import Console


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


def measure(machine: type, examples: int) -> tuple[int, float]:
    cls, calls = counting(machine)
    start = time.perf_counter()
    run_state_machine_as_test(cls, settings=settings(settings(), max_examples=examples,
                                                     phases=[Phase.generate]))
    return calls[0], time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=60, help="test cases per machine (default 60)")
    args = parser.parse_args(argv)
    console = Console()
    for machine in (SpecMachine, RefinementMachine, RealStoreMachine):
        steps, seconds = measure(machine, args.examples)
        console.print(f"{machine.__name__:18} {steps:7,} steps in {seconds:6.1f} s = "
                      f"{steps / seconds:8,.0f} steps/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
