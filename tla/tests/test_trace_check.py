"""Trace validation by TLC and by the twin, which must agree on every trace: the hand-written legal
and illegal traces get the verdict tla/tests/traces/expected.json gives them; a trace from every
bug switch is rejected; traces of clean simulator seeds are accepted; the per-process files split
from a run merge back by causality and get the whole run's verdict.

Every trace TLC checks here is checked in one batch per configuration (tla.tracecheck.check_many_tlc:
one JVM and TLC start-up per batch, not per trace), made once per session by whichever worker needs
it first (tla/tests/sessioncache.py); each test then compares its trace's own TLC verdict with the
twin's.  The TLC tests share an xdist group, so the other worker never waits for the batch."""

from __future__ import annotations

import io
import json
from pathlib import Path

import attrs
import pytest

from reference.sim.params import draw
from reference.sim.trace import split
from reference.sim.world import World
from spec.config import BUG_NAMES
from spec.traceformat import read_trace
from spec.tracecheck import check_steps, check_trace
from spec.tracemerge import merge, spec_ids
from tla.tests.sessioncache import shared
from tla.tracecheck import TraceCheckError, check_files, check_many_tlc, read_and_merge

TRACES = Path(__file__).resolve().parent / "traces"
EXPECTED = json.loads((TRACES / "expected.json").read_text())["traces"]
STEPS = 400
SEED_BUDGET = 60          # seeds tried per bug switch (each finds its bug within a few)
TLC_SEEDS = (3, 5, 12)    # clean seeds TLC checks too, whole and split


def sim_trace(seed: int, overrides: dict | None = None) -> tuple[str, str | None]:
    out = io.StringIO()
    outcome = World(draw(seed, overrides or {}), trace=out).run(STEPS)
    return out.getvalue(), outcome.violation


def failing_seed(bug: str) -> tuple[int, str] | None:
    for seed in range(SEED_BUDGET):
        text, violation = sim_trace(seed, {"bug": bug})
        if violation is not None:
            return seed, text
    return None


def whole_and_split(text: str):
    """The run's one file, and its per-process files merged back: (config, steps, complete) each."""
    trace = read_trace("sim.ndjson", text)
    traces = [read_trace(f"{p}.ndjson", t) for p, t in split(text).items()]
    steps, complete = merge(traces)
    return (trace.config, spec_ids([trace]), trace.complete), (trace.config, spec_ids(traces, steps), complete)


def tlc_batch() -> dict:
    """Every trace the TLC tests below check, and TLC's verdict on each (or the TraceCheckError TLC
    gave), from batched runs; the bug switches' failing seeds with them (found once)."""
    failing = {bug: failing_seed(bug) for bug in BUG_NAMES}
    inputs = {}
    for files in EXPECTED:
        cfg, steps, complete, _ = read_and_merge([TRACES / f for f in files.split()])
        inputs["hand", files] = (cfg, steps, complete)
    for bug, found in failing.items():
        if found is not None:
            trace = read_trace(f"{bug}-seed{found[0]}.ndjson", found[1])
            inputs["bug", bug] = (trace.config, spec_ids([trace]), trace.complete)
    for seed in TLC_SEEDS:
        inputs["whole", seed], inputs["split", seed] = whole_and_split(sim_trace(seed)[0])
    keys = list(inputs)
    return {"failing": failing, "tlc": dict(zip(keys, check_many_tlc([inputs[k] for k in keys])))}


@pytest.fixture
def batch(tmp_path_factory) -> dict:
    return shared(tmp_path_factory, "tla-trace-check-tlc", tlc_batch)


def tlc_verdict(batch: dict, key):
    result = batch["tlc"][key]
    if isinstance(result, Exception):
        raise result
    return result[0]


def both(cfg, steps, complete, tlc):
    twin = check_steps(cfg, steps, complete)
    assert (tlc.valid, tlc.explained) == (twin.valid, twin.explained), (tlc.reason, twin.reason)
    return twin


TLC_BATCH = pytest.mark.xdist_group("tlc-traces")     # the tests that read the batch: one worker


@pytest.mark.tlc
@TLC_BATCH
@pytest.mark.parametrize("files", sorted(EXPECTED), ids=lambda k: k.split()[0].removesuffix(".ndjson"))
def test_hand_written_trace(files, batch):
    want = EXPECTED[files]
    paths = [TRACES / f for f in files.split()]
    twin = check_files(paths, twin=True).verdict
    tlc = tlc_verdict(batch, ("hand", files))
    for v in (twin, tlc):
        assert v.valid == want["valid"], (v.checker, v.reason)
        if not want["valid"]:
            assert v.first_unexplained == want["step"], (v.checker, v.first_unexplained, v.reason)
    if not want["valid"] and want["step"] is not None:
        assert twin.states and tlc.states      # the report has the state before the step


@pytest.mark.tlc
@TLC_BATCH
@pytest.mark.parametrize("bug", BUG_NAMES)
def test_a_trace_of_every_bug_switch_is_rejected(bug, batch):
    found = batch["failing"][bug]
    if found is None:
        pytest.fail(f"{bug}: no failing seed among the first {SEED_BUDGET}")
    seed, text = found
    trace = read_trace(f"{bug}-seed{seed}.ndjson", text)
    assert trace.writer_verdict is not None
    verdict = both(trace.config, spec_ids([trace]), trace.complete, tlc_verdict(batch, ("bug", bug)))
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
@TLC_BATCH
@pytest.mark.parametrize("seed", TLC_SEEDS)
def test_clean_seeds_are_valid_for_tlc_too(seed, batch):
    whole, merged = whole_and_split(sim_trace(seed)[0])
    assert both(*whole, tlc_verdict(batch, ("whole", seed))).valid
    assert both(*merged, tlc_verdict(batch, ("split", seed))).valid


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


@pytest.mark.tlc
def test_a_batch_tlc_cannot_judge_is_checked_trace_by_trace():
    cfg, steps, complete, _ = read_and_merge([TRACES / "legal_keys.ndjson"])
    # a replica the configuration does not have: TLC stops with an error evaluating the step
    broken = [attrs.evolve(steps[0], actions=(("ReplicaConnect", "nosuch"),))]
    good, bad = check_many_tlc([(cfg, steps, complete), (cfg, broken, False)])
    assert isinstance(bad, TraceCheckError) and "nosuch" in str(bad) and "log's end: " in str(bad), bad
    assert not isinstance(good, Exception) and good[0].valid and good[1]["batch"] == 1


def test_an_integer_tlc_cannot_hold_is_bad_input_not_a_failed_environment():
    """A trace whose FileSize was 2**32 made TLC stop with no verdict ("can't handle a number this big"),
    reported as exit 3; the module is refused before TLC runs, naming the number (exit 2)."""
    import attrs

    from spec.config import Config
    from spec.traceformat import TraceError
    from tla.tracecheck import TLC_INT_MAX, config_record, tla

    assert tla(TLC_INT_MAX) == str(TLC_INT_MAX) and tla(-TLC_INT_MAX - 1) == str(-TLC_INT_MAX - 1)
    with pytest.raises(TraceError, match="4294967296: beyond the integers TLC holds"):
        tla([1, 2**32])
    cfg = Config(replicas=("r1",), flush_mode="SYNC_FLUSH", repl_mode="ASYNC_MASTER", file_size=2**32)
    with pytest.raises(TraceError, match="4294967296"):
        config_record(cfg)
    assert "FileSize |-> 8" in config_record(attrs.evolve(cfg, file_size=8))
    # and a step's truncation or a request id past TLC's integers (they were written unchecked)
    from tla.tracecheck import observations

    with pytest.raises(TraceError, match="4294967296"):
        observations({"log": {"take": 2**32, "append": []}})
    with pytest.raises(TraceError, match="4294967296"):
        observations({"reqs": {"set": {str(2**32): {"status": "PUT_OK"}}}})
