"""Property-based fuzzing of the trace reader, the merge and the CLI's reading path: arbitrary
bytes, arbitrary JSON lines after a valid header, and mutations of a real run's master and slave
files (lines dropped, repeated, swapped, cut; values replaced by arbitrary JSON; bytes inserted)
end in a verdict or in one TraceError (exit 2) whose one line names one of the files, never in
another exception.  A small budget by default; a larger one under ``-m full``."""

from __future__ import annotations

import functools
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cli import errors
from reference.sim.params import draw
from reference.sim.trace import split
from reference.sim.world import World
from spec import traceformat as tf
from spec.tracemerge import MergeViolation, merge, spec_ids
from tla.tracecheck import check_files

SMALL = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LARGE = settings(max_examples=1_500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VOCABULARY = ["seq", "action", "obs", "observes", "key", "after", "t_ms", "what", "conn", "proc", "note", "records",
              "end", "violation", "message", "checkpoint", *tf.VARIABLES, "append", "take", "set", "off", "flushDone",
              "status", "r1", "r2", "1", "2", "Put", "Flush", "Respond(1)", "Transfer(r1)", "HANDSHAKE", "complete"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**40) | st.floats(allow_nan=True) | st.sampled_from(VOCABULARY)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(VOCABULARY) | st.text(max_size=4),
                                                                 inner, max_size=4),
    max_leaves=12)


@functools.cache
def run_files() -> dict[str, str]:
    """A clean run's files: the simulator's own (every variable, a checkpoint every 40 steps) and
    the master's and slaves' split from it."""
    import reference.sim.trace as sim_trace_module

    every, sim_trace_module.CHECKPOINT_EVERY_STEPS = sim_trace_module.CHECKPOINT_EVERY_STEPS, 40
    try:
        out = io.StringIO()
        World(draw(3), trace=out).run(150)
    finally:
        sim_trace_module.CHECKPOINT_EVERY_STEPS = every
    return {"sim.ndjson": out.getvalue(), **{f"{p}.ndjson": t for p, t in split(out.getvalue()).items()}}


def names_a_file(err: Exception, names) -> bool:
    text = str(err)
    return "\n" not in text and any(text.startswith(f"{n}:") or text.startswith(f"{n} ") for n in names)


def read_merge_check(files: dict[str, bytes]) -> None:
    """The library's path: read each file, merge, check with the twin, and write TLC's module of
    it (the TLC path up to the JVM: segments at the checkpoints)."""
    from spec.tracemerge import adopt_config
    from spec.tracecheck import check_steps
    from tla.tracecheck import data_module, segments

    try:
        traces = adopt_config([tf.read_trace(name, data) for name, data in files.items()])
        try:
            steps, complete = merge(traces)
            steps = spec_ids(traces, steps)
        except MergeViolation as v:
            assert v.prefix is not None and names_a_file(ValueError(v.reason), files), v.reason
            return
        check_steps(traces[0].config, steps, complete, checkpoints=traces[0].checkpoints if len(traces) == 1 else ())
        data_module(segments(traces[0].config, steps, complete, traces[0].checkpoints if len(traces) == 1 else ()))
    except tf.TraceError as err:
        assert names_a_file(err, files), str(err)


def cli_path(files: dict[str, bytes]) -> None:
    """The CLI's reading path (check_files, the twin): as files on disk, streamed when one."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, data in files.items():
            paths.append(Path(tmp) / name)
            paths[-1].write_bytes(data)
        try:
            result = check_files(paths, twin=True)
            assert isinstance(result.verdict.valid, bool)
        except tf.TraceError as err:
            assert names_a_file(err, [str(p) for p in paths]), str(err)


def both_paths(files: dict[str, bytes]) -> None:
    read_merge_check(files)
    cli_path(files)


# ------------------------------------------------------------------ what is fed in

def arbitrary_bytes():
    return st.binary(max_size=400).map(lambda b: {"t.ndjson": b})


def header_then_json_lines():
    def lines_after(head: bytes):
        lines = st.lists(st.dictionaries(st.sampled_from(VOCABULARY), json_values, max_size=5)
                         | json_values, max_size=6)
        return lines.map(lambda objs: {"t.ndjson": b"\n".join([head, *(json.dumps(o).encode() for o in objs)])})

    # (deferred: the run is simulated when a test draws, not when the module is collected)
    return st.deferred(lambda: lines_after(run_files()["sim.ndjson"].encode().split(b"\n", 1)[0]))


def _replace_value(obj, path_bits: list[int], value):
    """``obj`` with one value (found by following ``path_bits``) replaced."""
    if not path_bits or not isinstance(obj, (dict, list)) or not obj:
        return value
    keys = list(obj) if isinstance(obj, dict) else list(range(len(obj)))
    key = keys[path_bits[0] % len(keys)]
    obj[key] = _replace_value(obj[key], path_bits[1:], value)
    return obj


@st.composite
def mutated_runs(draw_):
    files = run_files()
    chosen = draw_(st.sampled_from([["sim.ndjson"], ["master.ndjson", "r1.ndjson", "r2.ndjson"]]))
    out = {name: files[name].encode().split(b"\n") for name in chosen}
    for _ in range(draw_(st.integers(1, 3))):
        name = draw_(st.sampled_from(chosen))
        lines = out[name]
        i = draw_(st.integers(0, len(lines) - 1))
        j = draw_(st.integers(0, len(lines) - 1))
        kind = draw_(st.sampled_from(["drop", "repeat", "swap", "cut", "value", "bytes", "digits"]))
        if kind == "drop":
            del lines[i]
        elif kind == "repeat":
            lines.insert(j, lines[i])
        elif kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "cut":
            lines[i] = lines[i][: draw_(st.integers(0, max(0, len(lines[i]) - 1)))]
        elif kind == "bytes":
            at = draw_(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + draw_(st.binary(min_size=1, max_size=4)) + lines[i][at:]
        elif kind == "digits":        # a number in other scripts' digits, where an id or a parameter goes
            lines[i] = lines[i].replace(b'"1"', '"\u00b9"'.encode()).replace(b"(1)", "(\u0661)".encode())
        else:
            try:
                obj = json.loads(lines[i])
            except ValueError:
                continue
            bits = draw_(st.lists(st.integers(0, 50), max_size=4))
            lines[i] = json.dumps(_replace_value(obj, bits, draw_(json_values))).encode()
    return {name: b"\n".join(lines) for name, lines in out.items()}


# ------------------------------------------------------------------ the properties

@SMALL
@given(files=arbitrary_bytes())
def test_arbitrary_bytes_are_a_verdict_or_one_line(files):
    both_paths(files)


@SMALL
@given(files=header_then_json_lines())
def test_arbitrary_json_lines_are_a_verdict_or_one_line(files):
    both_paths(files)


@SMALL
@given(files=mutated_runs())
def test_mutated_runs_are_a_verdict_or_one_line(files):
    both_paths(files)


@settings(max_examples=12, deadline=None)
@given(files=mutated_runs())
def test_the_command_gives_exit_0_1_or_2_and_one_line(files):
    from cli.tests.test_exit_codes import ackorder_in_process, assert_usage_error

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, data in files.items():
            paths.append(Path(tmp) / name)
            paths[-1].write_bytes(data)
        p = ackorder_in_process("trace-check", "--twin", *map(str, paths))
        assert "Traceback" not in p.stderr, p.stderr
        if p.returncode == errors.USAGE:
            assert_usage_error(p, tmp)
        else:
            assert p.returncode in (errors.OK, errors.VIOLATION), (p.returncode, p.stderr)


@pytest.mark.full
@LARGE
@given(files=arbitrary_bytes() | header_then_json_lines() | mutated_runs())
def test_the_reading_paths_at_a_larger_budget(files):
    both_paths(files)


@pytest.mark.full
@settings(max_examples=200, deadline=None)
@given(files=mutated_runs())
def test_the_command_at_a_larger_budget(files):
    test_the_command_gives_exit_0_1_or_2_and_one_line.hypothesis.inner_test(files)
