"""Trace validation by TLC and by the twin, which must agree on every trace: the hand-written legal
and illegal traces get the verdict tla/tests/traces/expected.json gives them; a trace from every
bug switch is rejected; traces of clean simulator seeds are accepted; the per-process files split
from a run merge back by causality and get the whole run's verdict."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from reference.sim.params import draw
from reference.sim.trace import split
from reference.sim.world import World
from spec.config import BUG_NAMES
from spec.traceformat import read_trace
from spec.tracecheck import check_steps, check_trace
from spec.tracemerge import merge, spec_ids
from tla.tracecheck import check_files, check_steps_tlc

TRACES = Path(__file__).resolve().parent / "traces"
EXPECTED = json.loads((TRACES / "expected.json").read_text())["traces"]
STEPS = 400
SEED_BUDGET = 60          # seeds tried per bug switch (each finds its bug within a few)


def sim_trace(seed: int, overrides: dict | None = None) -> tuple[str, str | None]:
    out = io.StringIO()
    outcome = World(draw(seed, overrides or {}), trace=out).run(STEPS)
    return out.getvalue(), outcome.violation


def failing_trace(bug: str) -> tuple[int, str]:
    for seed in range(SEED_BUDGET):
        text, violation = sim_trace(seed, {"bug": bug})
        if violation is not None:
            return seed, text
    pytest.fail(f"{bug}: no failing seed among the first {SEED_BUDGET}")


def both(cfg, steps, complete):
    twin = check_steps(cfg, steps, complete)
    tlc, _ = check_steps_tlc(cfg, steps, complete)
    assert (tlc.valid, tlc.explained) == (twin.valid, twin.explained), (tlc.reason, twin.reason)
    return twin


@pytest.mark.tlc
@pytest.mark.parametrize("files", sorted(EXPECTED), ids=lambda k: k.split()[0].removesuffix(".ndjson"))
def test_hand_written_trace(files):
    want = EXPECTED[files]
    paths = [TRACES / f for f in files.split()]
    twin = check_files(paths, twin=True).verdict
    tlc = check_files(paths).verdict
    for v in (twin, tlc):
        assert v.valid == want["valid"], (v.checker, v.reason)
        if not want["valid"]:
            assert v.first_unexplained == want["step"], (v.checker, v.first_unexplained, v.reason)
    if not want["valid"] and want["step"] is not None:
        assert twin.states and tlc.states      # the report has the state before the step


@pytest.mark.tlc
@pytest.mark.parametrize("bug", BUG_NAMES)
def test_a_trace_of_every_bug_switch_is_rejected(bug):
    seed, text = failing_trace(bug)
    trace = read_trace(f"{bug}-seed{seed}.ndjson", text)
    assert trace.writer_verdict is not None
    verdict = both(trace.config, spec_ids([trace]), trace.complete)
    assert not verdict.valid, f"{bug} (seed {seed}): the correct spec explains the buggy run"
    # Split into the master's and the replicas' files, each seeing only its own variables, and
    # merged back: still rejected.
    traces = [read_trace(f"{p}.ndjson", t) for p, t in split(text).items()]
    steps, complete = merge(traces)
    assert not check_steps(trace.config, spec_ids(traces, steps), complete).valid


@pytest.mark.parametrize("seed", range(30))
def test_clean_seeds_are_valid_whole_and_split(seed):
    text, violation = sim_trace(seed)
    assert violation is None
    trace = read_trace("sim.ndjson", text)
    assert trace.complete
    assert check_trace(trace).valid
    traces = [read_trace(f"{p}.ndjson", t) for p, t in split(text).items()]
    assert {t.process for t in traces} == {"master", *trace.config.replicas}
    steps, complete = merge(traces)
    assert len(steps) >= len(trace.steps)            # a replica crash is the master's close and the crash
    verdict = check_steps(trace.config, spec_ids(traces, steps), complete)
    assert verdict.valid, (seed, verdict.failed and verdict.failed.where(), verdict.reason)


@pytest.mark.tlc
@pytest.mark.parametrize("seed", [3, 5, 12])
def test_clean_seeds_are_valid_for_tlc_too(seed):
    text, _ = sim_trace(seed)
    trace = read_trace("sim.ndjson", text)
    assert both(trace.config, spec_ids([trace]), trace.complete).valid
    traces = [read_trace(f"{p}.ndjson", t) for p, t in split(text).items()]
    steps, complete = merge(traces)
    assert both(trace.config, spec_ids(traces, steps), complete).valid


def test_a_split_file_sees_only_its_own_variables():
    text, _ = sim_trace(5)
    files = {p: read_trace(f"{p}.ndjson", t) for p, t in split(text).items()}
    for proc, trace in files.items():
        seen = {var for step in trace.steps for var in step.obs}
        if proc == "master":
            assert seen <= {"mstate", "log", "committed", "flushed", "writable", "reqs", "connected", "ack",
                            "push2SlaveMaxOffset", "syncStateSet"}, seen
        else:
            assert seen <= {"rlog", "rUp"}
            assert all(set(step.obs.get("rlog", {})) <= {proc} for step in trace.steps)
        assert trace.ids == "keys"
