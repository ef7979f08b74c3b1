"""`--emit-test`: a counterexample (TLC's, or the trace of a fuzz or Hypothesis failure) as a
standalone pytest file driving the reference cores (reference/sim/emit.py).  Glue between tla/,
which finds and names the counterexample, and reference/, which drives the cores along it."""

from __future__ import annotations

from pathlib import Path

from spec.config import bug_alias

COUNTEREXAMPLE_TESTS = Path(__file__).resolve().parent.parent / "reference" / "tests" / "counterexamples"
MAX_COMMENT_CHARS = 160


def counterexample_file(bug: str) -> str:
    return f"test_{bug_alias(bug)}.py"


def emit_for_run(run, command: str):
    """The test of a TLC run's counterexample (a bug model's)."""
    from reference.sim.emit import emit_test
    from tla import counterexample
    from tla.manifest import expected_violations

    labels, states, cfg = counterexample.behaviour(run)
    steps, _ = counterexample.steps(run)
    source = [f"TLC 2.15 on {run.model.model} ({run.model.cfg}): {run.outcome} after {len(labels)} states"]
    for s in steps:
        source.append(f"{s.number or '':>3} {s.label}")
        source += [f"      {line[:MAX_COMMENT_CHARS]}" for line in s.changed if s.label != "Init"]
    return emit_test(labels, states, cfg, expected_violations(run.model.model), source, command)


def emit_for_trace(path: Path, command: str, expected: frozenset[str] | None = None):
    """The test of a spec-level trace of the simulator or a Hypothesis machine (it observes every
    variable), whose last line is the property it violated."""
    from reference.sim.emit import emit_test
    from spec.traceformat import read_trace
    from spec.tracecheck import behaviour

    trace = read_trace(path)
    if trace.writer_verdict is None:
        raise ValueError(f"{path}: the trace ends with no violation: there is no counterexample to emit")
    labels, states = behaviour(trace)
    prop = trace.writer_verdict[0]
    source = [f"{path}: {prop} after {len(labels) - 1} spec steps", *(f"  {label}" for label in labels[1:])]
    return emit_test(labels, states, _cfg(trace), expected or frozenset({prop}), source, command, allow_skips=True)


def _cfg(trace):
    import attrs

    return attrs.evolve(trace.config, bugs=frozenset(trace.bugs))
