"""TLC checks a trace with checkpoints in segments, each from its checkpoint's state as a trace of
its own, and each must end at the next checkpoint's state: a valid run is valid, a forged
checkpoint is rejected (though the steps after it are explained from it), and a step no spec step
explains is found at its place in the whole trace, as the twin finds it.  The generated module
keeps its lines short: SANY's time grows with the square of a line's length, and a checkpoint's
state holds a whole run."""

from __future__ import annotations

import io
import json

import attrs
import pytest

import reference.sim.trace as sim_trace_module
from reference.sim.params import draw
from reference.sim.world import World
from spec.config import Config
from spec.state import PUT_OK, Request
from spec import actions as sa
from spec.traceformat import read_trace
from tla.tracecheck import ITEMS_PER_LINE, check_files, check_many_tlc, data_module, read_and_merge, segments

EVERY = 60


@pytest.fixture
def run(monkeypatch, tmp_path):
    """A clean simulator run's trace, a checkpoint every EVERY steps, and a copy changed by ``edit``."""
    monkeypatch.setattr(sim_trace_module, "CHECKPOINT_EVERY_STEPS", EVERY)
    out = io.StringIO()
    # Pinned: the run must still commit after its second checkpoint (with 2 pool buffers it turns
    # read-only before that).
    World(draw(3, {"transient_store_pool_size": "5"}), trace=out).run(400)
    path = tmp_path / "sim.ndjson"
    path.write_text(out.getvalue())

    def edited(name: str, edit) -> tuple:
        lines = out.getvalue().splitlines()
        n = edit(lines)
        changed = tmp_path / name
        changed.write_text("\n".join(lines) + "\n")
        return changed, n

    return path, edited


@pytest.mark.tlc
def test_a_run_with_checkpoints_is_valid_in_segments(run):
    path, _ = run
    trace = read_trace(path)
    assert len(trace.checkpoints) >= 3
    result = check_files([path])
    assert result.verdict.valid, result.verdict.reason
    assert result.timings["segments"] == len(trace.checkpoints) + 1
    assert check_files([path], twin=True).verdict.valid


def forge(lines: list[str]) -> int:
    """The first checkpoint, with an answered request answered otherwise (no later step reads it)."""
    n = next(i for i, line in enumerate(lines) if '"checkpoint"' in line)
    obj = json.loads(lines[n])
    reqs = obj["checkpoint"]["reqs"]
    i = next(i for i, r in enumerate(reqs) if r["status"] == PUT_OK)
    reqs[i]["status"] = "FLUSH_DISK_TIMEOUT"
    lines[n] = json.dumps(obj)
    return n + 1


@pytest.mark.tlc
def test_a_forged_checkpoint_is_rejected_though_the_steps_after_it_are_explained(run):
    _, edited = run
    path, line = edited("forged.ndjson", forge)
    cfg, steps, complete, traces = read_and_merge([path])
    items = segments(cfg, steps, complete, traces[0].checkpoints)
    first, after = items[0], items[1]
    assert after[3] is traces[0].checkpoints[0].state
    # one batch: every segment as checked, and the two next to the forged checkpoint without the
    # check of their ends: each explained, so only the end's check refutes the checkpoint
    results = check_many_tlc([*items, (cfg, first[1], False), (cfg, after[1], False, after[3], None)])
    verdicts = [r[0] for r in results]
    assert not verdicts[0].valid and verdicts[0].checkpoint.line == line
    assert verdicts[0].explained == EVERY and verdicts[0].states          # the state the steps reach
    assert verdicts[-2].valid and verdicts[-1].valid
    whole = check_files([path]).verdict
    twin = check_files([path], twin=True).verdict
    for v in (whole, twin):
        assert not v.valid and v.failed is None and v.checkpoint.line == line, (v.checker, v.reason)
        assert f"{path}:{line}" in v.reason and "FLUSH_DISK_TIMEOUT" in v.reason, v.reason
        assert v.explained == EVERY


@pytest.mark.tlc
def test_a_step_no_spec_step_explains_is_found_at_its_place_in_the_whole_trace(run):
    _, edited = run

    def wrong_watermark(lines: list[str]) -> int:
        checkpoints = [i for i, line in enumerate(lines) if '"checkpoint"' in line]
        n = next(i for i in range(checkpoints[1] + 1, len(lines)) if '"obs"' in lines[i] and '"committed"' in lines[i])
        obj = json.loads(lines[n])
        obj["obs"]["committed"] += 7
        lines[n] = json.dumps(obj)
        return n + 1

    path, line = edited("bad.ndjson", wrong_watermark)
    tlc, twin = check_files([path]).verdict, check_files([path], twin=True).verdict
    for v in (tlc, twin):
        assert not v.valid and v.failed.line == line, (v.checker, v.reason)
    assert tlc.explained == twin.explained > 2 * EVERY and tlc.steps == twin.steps


def test_a_checkpoints_state_is_written_on_short_lines():
    cfg = Config(replicas=("r1", "r2"), flush_mode="SYNC_FLUSH", repl_mode="SYNC_MASTER")
    records = tuple(range(1, 3_001))
    s = attrs.evolve(sa.initial_state(cfg), log=records, committed=3_000, rlog=(records, records[:10]),
                     reqs=tuple(Request(i, True, PUT_OK) for i in records))
    text = data_module([(cfg, [], False, s, None)])
    assert "log |-> <<1, 2, 3" in text and '[off |-> 3000, flushDone |-> TRUE, status |-> "PUT_OK"]' in text
    longest = max(len(line) for line in text.splitlines())
    assert longest < 100 * ITEMS_PER_LINE, longest


@pytest.mark.full       # ~45 s: the module of a 50,000-request state, and two TLC runs
@pytest.mark.tlc
def test_tlc_judges_the_end_of_a_run_of_many_requests():
    """A complete trace's end is checked over every request (EndOK); as a next-state conjunct TLC
    expanded it into one nested call per request, and overflowed its stack on a run's 40,000."""
    cfg = Config(replicas=("r1",), flush_mode="SYNC_FLUSH", repl_mode="ASYNC_MASTER")
    records = tuple(range(1, 50_001))
    done = attrs.evolve(sa.initial_state(cfg), log=records, committed=50_000, flushed=50_000, durable=50_000,
                        rlog=(records,), connected=(True,), ack=(50_000,), push2SlaveMaxOffset=50_000,
                        reqs=tuple(Request(i, True, PUT_OK) for i in records))
    waiting = attrs.evolve(done, reqs=done.reqs[:-1] + (Request(50_000, True, "WAITING"),))
    (ok, _), (bad, _) = check_many_tlc([(cfg, [], True, done, None), (cfg, [], True, waiting, None)])
    assert ok.valid, ok.reason
    assert not bad.valid and "request(s) 50000 still waiting" in bad.reason, bad.reason
