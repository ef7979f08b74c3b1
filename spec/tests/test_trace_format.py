"""The trace format and the twin's trace check on their own: every step of the twin, written as a
trace, is accepted; an observation that disagrees with the step is rejected at that step; a trace
that observes less is still accepted (the checker searches the rest); malformed traces name the
file and line."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from spec import actions as sa
from spec import traceformat as tf
from spec.config import Bounds, Config
from spec.tracecheck import check_steps, check_trace
from spec.tracemerge import MergeError, adopt_config, merge, spec_ids

CFGS = [
    Config(replicas=("r1", "r2"), flush_mode="SYNC_FLUSH", repl_mode="SYNC_MASTER", ack_policy="ALL_IN_SYNC",
           file_size=2),
    Config(replicas=("r1",), flush_mode="ASYNC_FLUSH", repl_mode="SYNC_MASTER", transient_store_pool=True,
           file_size=3),
    Config(replicas=("r1", "r2"), flush_mode="SYNC_FLUSH", repl_mode="ASYNC_MASTER", ack_policy="AT_LEAST_K"),
]
BOUNDS = Bounds(max_puts=5, max_master_process_crashes=2, max_master_machine_crashes=2, max_replica_crashes=2,
                max_replica_disconnects=2, max_fsync_failures=1, max_write_failures=1, max_forged_reports=2)


def walk(cfg: Config, choices: list[int]) -> list[tuple[str, object, object]]:
    s = sa.initial_state(cfg)
    out = []
    for c in choices:
        options = list(sa.successors(cfg, BOUNDS, s))
        if not options:
            break
        label, t = options[c % len(options)]
        out.append((label, s, t))
        s = t
    return out


def as_text(cfg: Config, steps, observes=tf.SIM_OBSERVES, proc="sim", complete=False) -> str:
    lines = [json.dumps(tf.header(proc, cfg, observes))]
    names = tf.expand_observes(observes, cfg.replicas, "test")
    for n, (label, s, t) in enumerate(steps, 1):
        lines.append(tf.step_line(n, label, tf.step_obs(cfg, s, t, names)))
    if complete:
        lines.append(json.dumps({"end": "complete"}))
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None)
@given(cfg=st.sampled_from(CFGS), choices=st.lists(st.integers(0, 50), max_size=40))
def test_every_walk_of_the_twin_is_a_valid_trace(cfg, choices):
    steps = walk(cfg, choices)
    verdict = check_trace(tf.read_trace("walk.ndjson", as_text(cfg, steps)))
    assert verdict.valid, verdict.reason
    assert verdict.explained == len(steps) and len(verdict.states) == 1


@settings(max_examples=40, deadline=None)
@given(cfg=st.sampled_from(CFGS), choices=st.lists(st.integers(0, 50), min_size=1, max_size=30))
def test_a_master_only_view_is_still_valid(cfg, choices):
    """Leave out what the master does not see (durable, the page cache, the slaves): the checker
    searches it.  Slave steps are still steps: the master's file names them without observing them."""
    steps = walk(cfg, choices)
    verdict = check_trace(tf.read_trace("m.ndjson", as_text(cfg, steps, tf.MASTER_OBSERVES, "master")))
    assert verdict.valid, verdict.reason


@settings(max_examples=60, deadline=None)
@given(cfg=st.sampled_from(CFGS), choices=st.lists(st.integers(0, 50), min_size=1, max_size=30),
       pick=st.integers(0, 1000))
def test_a_wrong_watermark_is_rejected_at_its_step(cfg, choices, pick):
    steps = walk(cfg, choices)
    with_change = [i for i, (_, s, t) in enumerate(steps) if s.committed != t.committed]
    if not with_change:
        return
    i = with_change[pick % len(with_change)]
    text = as_text(cfg, steps).splitlines()
    line = json.loads(text[i + 1])
    line["obs"]["committed"] += 7
    text[i + 1] = json.dumps(line)
    verdict = check_trace(tf.read_trace("bad.ndjson", "\n".join(text)))
    assert not verdict.valid and verdict.first_unexplained == i + 1


def test_keys_are_numbered_in_put_order():
    cfg = CFGS[2]
    steps = walk(cfg, [0, 0])
    assert [label for label, _, _ in steps][:2] == ["Put", "Put"]
    text = as_text(cfg, steps, tf.MASTER_OBSERVES, "master").replace('"ids": "spec"', '"ids": "keys"')
    lines = text.splitlines()
    for n, key in ((1, 70), (2, 30)):
        obj = json.loads(lines[n])
        obj["key"] = key
        obj["obs"]["log"]["append"] = [key]
        lines[n] = json.dumps(obj)
    trace = tf.read_trace("keys.ndjson", "\n".join(lines))
    translated = spec_ids([trace])
    assert translated[1].obs["log"] == {"append": [2]}
    assert check_trace(trace).valid


@pytest.mark.parametrize("line, message", [
    ('{"seq": 1, "action": "Teleport", "obs": {}}', "unknown action 'Teleport'"),
    ('{"seq": 1, "action": "Transfer(r9)", "obs": {}}', "takes a replica of the configuration"),
    ('{"seq": 1, "action": "Respond", "obs": {}}', "Respond takes a request id"),
    ('{"seq": 1, "action": "Put", "obs": {"inv_responses": []}}', "ghost state"),
    ('{"seq": 1, "action": "Put", "obs": {"committed": -1}}', "obs.committed: expected int"),
    ('{"seq": 1, "action": "Put", "obs": {"log": {"append": ["x"]}}}', "obs.log.append"),
    ('{"seq": 1, "action": "Put", "obs": {"reqs": {"set": {"a": {"status": "PUT_OK"}}}}}', "not a request id"),
    ('{"seq": 1, "action": "Put", "obs": {"reqs": {"append": [{"off": 1}]}}}', "a new request needs"),
    ('{"seq": 1, "action": "Put", "obs": {"reqs": {"set": {"1": {"status": "GREAT"}}}}}', "is not a status"),
    ('{"seq": 1, "action": "Put", "obs": {"rUp": {"r7": true}}}', "'r7' is not a replica"),
    ('{"seq": 1, "action": "Put", "obs": {"speed": 3}}', "unknown variable 'speed'"),
    ('{"seq": 1, "action": "Put"', "invalid JSON"),
    ('[1, 2]', "expected a JSON object"),
    ('{"seq": 1, "action": "Put", "colour": "red"}', "unknown fields colour"),
])
def test_malformed_steps_name_file_and_line(line, message):
    head = json.dumps(tf.header("sim", CFGS[0], tf.SIM_OBSERVES))
    with pytest.raises(tf.TraceError) as err:
        tf.read_trace("t.ndjson", head + "\n\n" + line + "\n")
    assert str(err.value).startswith("t.ndjson:3: ") and message in str(err.value), str(err.value)


def test_malformed_headers():
    good = tf.header("sim", CFGS[0], tf.SIM_OBSERVES)
    for change, message in [({"ackorder_trace": 2}, "version 2"), ({"observes": ["pagecache"]}, "unknown variable"),
                            ({"observes": ["aux_ctrs"]}, "ghost state"), ({"ids": "names"}, "header.ids"),
                            ({"config": {**good["config"], "FlushMode": "SOMETIMES"}}, "config.FlushMode"),
                            ({"config": {"Replicas": ["r1"]}}, "missing FlushMode")]:
        with pytest.raises(tf.TraceError) as err:
            tf.read_trace("h.ndjson", json.dumps({**good, **change}) + "\n")
        assert str(err.value).startswith("h.ndjson:1: ") and message in str(err.value), str(err.value)
    with pytest.raises(tf.TraceError, match="empty trace"):
        tf.read_trace("e.ndjson", "\n")
    with pytest.raises(tf.TraceError, match="must be the header"):
        tf.read_trace("n.ndjson", '{"seq": 1, "action": "Put"}\n')
    with pytest.raises(tf.TraceError, match="nothing but trailers"):
        tf.read_trace("x.ndjson", json.dumps(good) + '\n{"end": "complete"}\n{"seq": 1, "action": "Put"}\n')


def test_files_of_different_runs_do_not_merge():
    a = tf.read_trace("a.ndjson", json.dumps(tf.header("master", CFGS[0], tf.MASTER_OBSERVES)) + "\n")
    b = tf.read_trace("b.ndjson", json.dumps(tf.header("r1", CFGS[2], tf.replica_observes("r1"))) + "\n")
    with pytest.raises(MergeError, match="another configuration"):
        merge([a, b])
    with pytest.raises(MergeError, match="two files of process 'master'"):
        merge([a, a])


def test_a_slaves_file_takes_the_masters_configuration():
    """A slave's runtime does not know the configuration: its file gives none, and takes the one
    of the files it is merged with, which must name it."""
    master = tf.read_trace("m.ndjson", json.dumps(tf.header("master", CFGS[0], tf.MASTER_OBSERVES)) + "\n")
    slave = tf.read_trace("r1.ndjson", json.dumps(tf.header("r1", None, tf.replica_observes("r1"))) + "\n")
    assert not slave.config_known
    merged = adopt_config([slave, master])
    assert [t.config for t in merged] == [CFGS[0], CFGS[0]] and all(t.config_known for t in merged)
    assert merge([slave, master]) == ([], False)
    stranger = tf.read_trace("r9.ndjson", json.dumps(tf.header("r9", None, tf.replica_observes("r9"))) + "\n")
    with pytest.raises(MergeError, match="r9.ndjson: slave 'r9' is not among the Replicas of m.ndjson"):
        adopt_config([master, stranger])
    with pytest.raises(MergeError, match="no file gives the configuration"):
        check_trace(slave)
    with pytest.raises(tf.TraceError, match="m2.ndjson:1: header.config: the master's file must give"):
        tf.read_trace("m2.ndjson", json.dumps(tf.header("master", None, tf.MASTER_OBSERVES)) + "\n")


def test_a_complete_trace_must_end_at_rest():
    cfg = CFGS[2]
    steps = walk(cfg, [0])                 # one Put: the request is still waiting
    verdict = check_trace(tf.read_trace("c.ndjson", as_text(cfg, steps, complete=True)))
    assert not verdict.valid and verdict.failed is None and "still waiting" in verdict.reason
    assert check_steps(cfg, [], complete=False).valid
