"""The trace checker at its edges (issue 34, section 3), below the CLI: a number that is not ASCII
digits, JSON nested past the parser and an integer past Python's digit limit are malformed input
naming the file and line, never another exception; a step no order of the files can place because
of what a process did is a violation naming both steps, while a cycle of the writers' own stamps
stays malformed; a dropped line (a gap in seq) and a clock going back are reported (warnings, or
errors with strict); the twin checks a file as it reads it, on states whose sequences are shared
between steps; the simulator writes checkpoints, which the twin verifies."""

from __future__ import annotations

import gc
import io
import json
import weakref
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings, strategies as st

import reference.sim.trace as sim_trace_module
from reference.sim.params import draw
from reference.sim.trace import split
from reference.sim.world import World
from spec import traceformat as tf
from spec.config import Config
from spec.seq import Seq
from spec.state import PUT_OK, WAITING, Request
from spec.tracecheck import TwinCheck, _waiting, behaviour, check_trace
from spec.tracemerge import MergeError, MergeViolation, merge, spec_ids
from tla.tracecheck import check_files

TRACES = Path(__file__).resolve().parents[2] / "tla" / "tests" / "traces"
CFG = Config(replicas=("r1", "r2"), flush_mode="SYNC_FLUSH", repl_mode="SYNC_MASTER", file_size=2)
HEAD = json.dumps(tf.header("sim", CFG, tf.SIM_OBSERVES))
EVENTS = 400


def sim_text(seed: int, every: int | None = None, monkeypatch=None, events: int = EVENTS) -> str:
    if every is not None:
        monkeypatch.setattr(sim_trace_module, "CHECKPOINT_EVERY_STEPS", every)
    out = io.StringIO()
    World(draw(seed), trace=out).run(events)
    return out.getvalue()


def write(directory: Path, files: dict[str, str]) -> list[Path]:
    paths = []
    for name, text in files.items():
        paths.append(directory / name)
        paths[-1].write_text(text)
    return paths


# ------------------------------------------------------------------ 1. malformed input, one message

DEEP = "[" * 100_000          # past json's recursion: RecursionError, not JSONDecodeError


@pytest.mark.parametrize("line, field", [
    # str.isdigit says yes to each of these; int() refuses '²' and reads '١' as 1
    ('{"seq": 1, "action": "Put", "obs": {"reqs": {"set": {"²": {"status": "PUT_OK"}}}}}', "obs.reqs.set: '²'"),
    ('{"seq": 1, "action": "Put", "obs": {"reqs": {"set": {"\\u0661": {"status": "PUT_OK"}}}}}',
     "obs.reqs.set: '١'"),
    ('{"seq": 1, "action": "Put", "obs": {"reqs": {"set": {"01": {"status": "PUT_OK"}}}}}', "obs.reqs.set: '01'"),
    ('{"seq": 1, "action": "Respond(²)"}', "action: '"),
    ('{"seq": 1, "action": "Timeout(\\u0661)"}', "action: '"),
    ('{"seq": 1, "action": "Respond(1)\\n"}', "action: "),
    ('{"seq": 1, "action": "Respond(1' + "0" * 30 + ')"}', "Respond takes a request id"),
    ('{"seq": 1, "action": "Put", "key": 1' + "0" * 5000 + '}', "invalid JSON: a number of more than"),
    ('{"seq": 1, "action": "Put", "obs": ' + DEEP, "invalid JSON: nested deeper"),
    (DEEP, "invalid JSON: nested deeper"),
    ('{"seq": 1, "action": "Put", "t_ms": NaN}', "t_ms: expected a number"),
    ('{"seq": 1, "action": "Put", "what": [[[1]]]}', "what: expected a text"),
    ('{"seq": 1, "note": "HANDSHAKE", "records": 0, "conn": [1]}', "conn: expected a connection id"),
    ('{"seq": 1, "action": "Put", "obs": {"mstate": "' + "x" * 10_000 + '"}}', "obs.mstate: 'xxx"),
], ids=["superscript-id", "arabic-indic-id", "leading-zero-id", "superscript-param", "arabic-indic-param",
        "newline-param", "huge-param", "5000-digits", "deep-obs", "deep-line", "nan-time", "nested-what",
        "list-conn", "huge-value"])
def test_malformed_numbers_and_nesting_name_the_file_line_and_field(line, field):
    with pytest.raises(tf.TraceError) as err:
        tf.read_trace("t.ndjson", HEAD + "\n" + line + "\n")
    message = str(err.value)
    assert message.startswith("t.ndjson:2: ") and field in message, message
    assert "\n" not in message and len(message) < 400, message      # one line, whatever the input held


def test_a_slaves_name_is_ascii():
    head = json.dumps(tf.header("r²", None, ["rlog[r1]"]))
    with pytest.raises(tf.TraceError, match=r"s.ndjson:1: header.process 'r²'"):
        tf.read_trace("s.ndjson", head + "\n")


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "b.ndjson"
    path.write_bytes(HEAD.encode() + b"\n" + b'{"seq": 1, "action": "Put", "what": "\xff"}\n')
    with pytest.raises(tf.TraceError, match=rf"^{path}:2: not UTF-8 text"):
        tf.read_trace(path)


def two_process_files(r1_changes: dict | None = None) -> dict[str, str]:
    """The hand-written master + r1 run, with fields of r1's lines changed (by line number)."""
    master = (TRACES / "legal_two_processes.master.ndjson").read_text()
    lines = (TRACES / "two_processes.r1.ndjson").read_text().splitlines()
    for n, change in (r1_changes or {}).items():
        lines[n - 1] = json.dumps({**json.loads(lines[n - 1]), **change})
    return {"master.ndjson": master, "r1.ndjson": "\n".join(lines) + "\n"}


def test_a_step_of_another_process_name_does_not_break_the_merge(tmp_path):
    """A step's ``proc`` is free text: the merge ordered ties by a table of the files' processes,
    and a name outside it was a KeyError."""
    paths = write(tmp_path, two_process_files({3: {"proc": "elsewhere"}}))
    assert check_files(paths, twin=True).verdict.valid


# ------------------------------------------------------------------ 2. what a process did, or bad stamps

def swapped_run(tmp_path: Path) -> tuple[list[Path], str, str]:
    """A clean run's master and replica files, the slave's file storing two records swapped: the
    paths, and the slave's and the master's lines the verdict must name."""
    files = split(sim_text(3))
    lines = files["r1"].splitlines()
    transfers = [i for i, line in enumerate(lines) if '"Transfer(r1)"' in line]
    i, j = transfers[3], transfers[4]
    a, b = json.loads(lines[i]), json.loads(lines[j])
    (va,), (vb,) = a["obs"]["rlog"]["r1"]["append"], b["obs"]["rlog"]["r1"]["append"]
    a["obs"]["rlog"]["r1"]["append"], b["obs"]["rlog"]["r1"]["append"] = [vb], [va]
    lines[i], lines[j] = json.dumps(a), json.dumps(b)
    files["r1"] = "\n".join(lines) + "\n"
    put = next(n for n, line in enumerate(files["master"].splitlines(), 1)
               if f'"key": {vb}' in line.replace('"key":', '"key": '))
    paths = write(tmp_path, {f"{p}.ndjson": t for p, t in files.items()})
    return paths, f"r1.ndjson:{i + 1}", f"master.ndjson:{put}"


def test_a_slave_storing_two_records_swapped_is_a_violation_naming_both_steps(tmp_path):
    paths, slave_line, master_line = swapped_run(tmp_path)
    verdict = check_files(paths, twin=True).verdict
    assert not verdict.valid and verdict.failed is not None
    assert verdict.failed.where().endswith(slave_line) and verdict.conflict.where().endswith(master_line)
    assert slave_line in verdict.reason and master_line in verdict.reason, verdict.reason
    # the steps the merge placed before it were checked: they are explained, and the report has their state
    assert verdict.explained == verdict.first_unexplained - 1 > 0 and verdict.states


def test_a_cycle_through_the_protocol_is_a_violation_one_of_stamps_alone_is_malformed(tmp_path):
    # r1 says its transfer followed the master's report of it: the report needs the record first
    cyclic = write(tmp_path, two_process_files({3: {"after": [["master", 3]]}}))
    verdict = check_files(cyclic, twin=True).verdict
    assert not verdict.valid and verdict.conflict is not None
    named = {verdict.failed.where().rsplit("/", 1)[-1], verdict.conflict.where().rsplit("/", 1)[-1]}
    assert named == {"master.ndjson:4", "r1.ndjson:3"}, verdict.reason
    # the master says its connect followed r1's transfer, r1 says its transfer followed the
    # connect: the files' order and their own references, no protocol edge
    stamps = two_process_files({3: {"after": [["master", 1]]}})
    master = stamps["master.ndjson"].splitlines()
    master[1] = json.dumps({**json.loads(master[1]), "after": [["r1", 2]]})
    stamps["master.ndjson"] = "\n".join(master) + "\n"
    (tmp_path / "s").mkdir()
    with pytest.raises(MergeError, match=r"form a cycle through this line"):
        check_files(write(tmp_path / "s", stamps), twin=True)


def test_genuinely_malformed_files_stay_malformed_in_a_merge(tmp_path):
    paths, _, _ = swapped_run(tmp_path)
    text = paths[1].read_text().replace('"Transfer(r1)"', '"Transfre(r1)"', 1)
    paths[1].write_text(text)
    with pytest.raises(tf.TraceError, match=r"unknown action 'Transfre'"):
        check_files(paths, twin=True)


def test_a_key_no_step_created_is_a_violation_of_that_step():
    lines = (TRACES / "legal_keys.ndjson").read_text().splitlines()
    respond = next(n for n, line in enumerate(lines) if "Respond(" in line)
    lines[respond] = lines[respond].replace("Respond(", "Respond(9")
    verdict = check_trace(tf.read_trace("k.ndjson", "\n".join(lines)))
    assert not verdict.valid and verdict.failed.line == respond + 1 and "names no request" in verdict.reason


# ------------------------------------------------------------------ 3. dropped lines, clocks

GOOD_STEPS = [json.dumps({"seq": 1, "action": "Put", "t_ms": 5}), json.dumps({"seq": 2, "action": "Put", "t_ms": 6})]


def test_a_gap_in_seq_is_a_warning_and_malformed_when_strict():
    text = "\n".join([HEAD, GOOD_STEPS[0], json.dumps({"seq": 4, "action": "Put", "t_ms": 7})]) + "\n"
    trace = tf.read_trace("g.ndjson", text)
    assert trace.warnings == ("g.ndjson:3: seq: 4 follows 1: 2 lines missing (dropped?)",)
    with pytest.raises(tf.TraceError, match=r"^g.ndjson:3: seq: 4 follows 1: 2 lines missing .*--strict"):
        tf.read_trace("g.ndjson", text, strict=True)
    first = "\n".join([HEAD, json.dumps({"seq": 2, "action": "Put"})]) + "\n"
    assert tf.read_trace("f.ndjson", first).warnings == ("f.ndjson:2: seq: 2 follows 0: 1 line missing (dropped?)",)


def test_a_clock_going_back_within_a_process_is_a_warning_and_malformed_when_strict():
    back = json.dumps({"seq": 3, "action": "Put", "t_ms": 2})
    text = "\n".join([HEAD, *GOOD_STEPS, back]) + "\n"
    assert tf.read_trace("c.ndjson", text).warnings == (
        "c.ndjson:4: t_ms: sim's clock goes back from 6 (line 3) to 2",)
    with pytest.raises(tf.TraceError, match=r"^c.ndjson:4: t_ms: .* goes back"):
        tf.read_trace("c.ndjson", text, strict=True)
    # each process has its own clock (a merged file interleaves them)
    other = json.dumps({"seq": 3, "proc": "r1", "action": "Transfer(r1)", "obs": {"rlog": {"r1": [1]}}, "t_ms": 2})
    assert tf.read_trace("m.ndjson", "\n".join([HEAD, *GOOD_STEPS, other]) + "\n").warnings == ()


def test_many_irregular_stamps_are_counted_not_all_kept():
    steps = [json.dumps({"seq": 2 * n, "action": "Put"}) for n in range(1, 100)]
    warnings = tf.read_trace("w.ndjson", "\n".join([HEAD, *steps]) + "\n").warnings
    assert len(warnings) == tf.MAX_WARNINGS + 1 and warnings[-1] == "w.ndjson: 89 more irregular stamp(s) not shown"


@pytest.mark.parametrize("seed", [3, 5])
def test_the_writers_stamps_are_regular(seed, tmp_path):
    text = sim_text(seed)
    assert tf.read_trace("sim.ndjson", text, strict=True).warnings == ()
    files = split(text)
    for proc, part in files.items():
        tf.read_trace(f"{proc}.ndjson", part, strict=True)
    paths = write(tmp_path, {f"{p}.ndjson": t for p, t in files.items()})
    result = check_files(paths, twin=True, strict=True)
    assert result.verdict.valid and result.warnings == ()


# ------------------------------------------------------------------ 4. cost per step

def test_the_twin_holds_neither_the_file_nor_its_steps(tmp_path, monkeypatch):
    """A file is checked as it is read: the steps alive at any time are a handful, not the trace
    (which held 344 MB at 100,000 steps)."""
    path = tmp_path / "sim.ndjson"
    path.write_text(sim_text(5))
    alive: weakref.WeakSet = weakref.WeakSet()
    most = 0
    items = tf.TraceReader.items

    def counted(self):
        nonlocal most
        for n, item in enumerate(items(self)):
            if isinstance(item, tf.Step):
                alive.add(item)
                if n % 50 == 0:
                    gc.collect()
                    most = max(most, len(alive))
            yield item

    monkeypatch.setattr(tf.TraceReader, "items", counted)
    result = check_files([path], twin=True)
    assert result.verdict.valid and result.step_count > 300 and result.steps == ()
    assert most <= 3, f"{most} steps alive at once"


def test_the_twins_states_share_their_sequences():
    """A step extends or updates a Seq without copying it: the states' sequences are Seqs, and
    the new state shares the old one's full chunks (tuples were copied whole at every step)."""
    trace = tf.read_trace("sim.ndjson", sim_text(5, events=1_500))
    check = TwinCheck(trace.config)
    before, shared = None, 0
    for step in trace.steps:
        assert check.step(step), step.where()
        s = check.frontier[0]
        assert isinstance(s.log, Seq) and isinstance(s.reqs, Seq) and all(isinstance(r, Seq) for r in s.rlog)
        if before is not None and len(before.reqs) >= 256 and len(s.reqs) >= len(before.reqs):
            first = before.reqs._chunks[0]
            # a step that changed none of the first chunk's requests (a flush may change old ones)
            if all(a == b for a, b in zip(first, s.reqs)):
                assert s.reqs._chunks[0] is first, step.where()
                shared += 1
        before = s
    assert len(before.reqs) >= 256 and shared       # the sharing was seen


@settings(max_examples=60, deadline=None)
@given(statuses=st.lists(st.sampled_from([WAITING, PUT_OK]), max_size=700),
       changes=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from([WAITING, PUT_OK])), max_size=6))
def test_the_waiting_requests_of_a_seq_are_those_a_scan_finds(statuses, changes):
    reqs = Seq(Request(i + 1, False, s) for i, s in enumerate(statuses))
    assert _waiting(reqs) == [i for i, r in enumerate(reqs, 1) if r.status == WAITING]
    for position, status in changes:
        if reqs:
            reqs = reqs.set(position % len(reqs), Request(0, True, status))
        assert _waiting(reqs) == [i for i, r in enumerate(reqs, 1) if r.status == WAITING]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 700), changes=st.lists(st.integers(0, 10_000), max_size=6), grow=st.integers(0, 200))
def test_a_writers_request_changes_are_those_a_scan_finds(n, changes, grow):
    a = Seq(Request(i + 1, False, WAITING) for i in range(n))
    b = a + tuple(Request(n + i + 1, False, WAITING) for i in range(grow))
    for position in changes:
        if len(b):
            b = b.set(position % len(b), Request(0, True, PUT_OK))
    assert tf._reqs_change(a, b) == tf._reqs_change(tuple(a), tuple(b))
    changed = [str(i) for i in range(1, min(len(a), len(b)) + 1) if a[i - 1] != b[i - 1]]
    assert sorted(tf._reqs_change(a, b).get("set", {}), key=int) == changed


# ------------------------------------------------------------------ checkpoints

def test_the_simulator_writes_a_checkpoint_every_n_steps_and_each_is_the_state(monkeypatch):
    text = sim_text(3, every=50, monkeypatch=monkeypatch)
    trace = tf.read_trace("sim.ndjson", text)
    assert len(trace.steps) >= 200
    assert [cp.after for cp in trace.checkpoints] == list(range(50, len(trace.steps) + 1, 50))
    _, states = behaviour(trace)
    for cp in trace.checkpoints:
        assert attrs.evolve(states[cp.after], inv_responses=frozenset(), aux_ctrs=cp.state.aux_ctrs) == cp.state
    assert check_trace(trace).valid
    assert "checkpoint" not in "".join(split(text).values())      # a process's own file has none


def forged(text: str, change) -> tuple[str, int]:
    """The trace with its first checkpoint changed by ``change(checkpoint)``, and that line's number."""
    lines = text.splitlines()
    n = next(i for i, line in enumerate(lines) if '"checkpoint"' in line)
    obj = json.loads(lines[n])
    change(obj["checkpoint"])
    lines[n] = json.dumps(obj)
    return "\n".join(lines) + "\n", n + 1


def answer_differently(cp: dict) -> None:
    """A request already answered PUT_OK, answered otherwise: no later step looks at it again, so
    the steps after the checkpoint are explained from it; only the steps before it refute it."""
    i = next(i for i, r in enumerate(cp["reqs"]) if r["status"] == PUT_OK)
    cp["reqs"][i]["status"] = "FLUSH_DISK_TIMEOUT"


def test_a_forged_checkpoint_is_rejected_by_the_twin(monkeypatch, tmp_path):
    text, line = forged(sim_text(0, every=50, monkeypatch=monkeypatch), answer_differently)
    path = tmp_path / "forged.ndjson"
    path.write_text(text)
    verdict = check_files([path], twin=True).verdict
    assert not verdict.valid and verdict.failed is None and verdict.checkpoint.line == line
    assert f"{path}:{line}" in verdict.reason and "FLUSH_DISK_TIMEOUT" in verdict.reason
    assert verdict.explained == 50 and verdict.states


@pytest.mark.parametrize("change, where, message", [
    (lambda o: o["checkpoint"].pop("durable"), "sim", "checkpoint: missing durable"),
    (lambda o: o["checkpoint"].update(ghost=1), "sim", "checkpoint: unknown ghost"),
    (lambda o: o["checkpoint"]["rlog"].pop("r1"), "sim", "checkpoint.rlog: expected"),
    (lambda o: o["checkpoint"]["reqs"].append({"off": 1}), "sim", "checkpoint.reqs["),
    (lambda o: o.update(proc="master"), "sim", "checkpoint: unknown fields proc"),
    (lambda o: None, "master", "checkpoint: only a file that observes every variable"),
])
def test_malformed_checkpoints_are_malformed(monkeypatch, change, where, message):
    text = sim_text(3, every=50, monkeypatch=monkeypatch)
    lines = text.splitlines()
    n = next(i for i, line in enumerate(lines) if '"checkpoint"' in line)
    obj = json.loads(lines[n])
    change(obj)
    lines[n] = json.dumps(obj)
    if where == "master":
        lines[0] = json.dumps({**json.loads(lines[0]), "process": "master", "observes": list(tf.MASTER_OBSERVES)})
    with pytest.raises(tf.TraceError) as err:
        tf.read_trace("cp.ndjson", "\n".join(lines) + "\n")
    assert str(err.value).startswith(f"cp.ndjson:{n + 1}: ") and message in str(err.value), str(err.value)


def test_a_file_with_checkpoints_is_checked_on_its_own(monkeypatch):
    sim = tf.read_trace("sim.ndjson", sim_text(3, every=50, monkeypatch=monkeypatch))
    other = tf.read_trace("r9.ndjson", json.dumps(tf.header("r9", sim.config, [])) + "\n")
    with pytest.raises(MergeError, match=r"sim.ndjson:\d+: checkpoint: .* checked on its own"):
        merge([sim, other])


def test_a_merge_violation_carries_the_steps_before_it(tmp_path):
    paths, slave_line, _ = swapped_run(tmp_path)
    traces = [tf.read_trace(p) for p in paths]
    with pytest.raises(MergeViolation) as err:
        spec_ids(traces, merge(traces)[0])
    assert err.value.step.where().endswith(slave_line) and err.value.prefix
    assert all(step.conflict is None for step in err.value.prefix)


def test_only_a_checkpoint_may_be_longer_than_a_mebibyte(monkeypatch):
    lines = sim_text(3, every=50, monkeypatch=monkeypatch).splitlines()
    n = next(i for i, line in enumerate(lines) if '"checkpoint"' in line)
    big = json.loads(lines[n])
    padded = json.dumps(big).replace('"log": [', '"log": [' + " " * tf.MAX_LINE_BYTES, 1)
    assert len(padded) > tf.MAX_LINE_BYTES
    assert tf.read_trace("cp.ndjson", "\n".join([*lines[:n], padded, *lines[n + 1:]]) + "\n").checkpoints
    step = json.dumps({"seq": 1, "action": "Put", "what": "x" * tf.MAX_LINE_BYTES})
    with pytest.raises(tf.TraceError, match=r"^l.ndjson:2: line longer than 1048576 bytes \(only a checkpoint"):
        tf.read_trace("l.ndjson", HEAD + "\n" + step + "\n")
