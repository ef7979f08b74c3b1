"""spec/failover/procmerge.py: the per-process files of a real run merged into one AckOrderFailover
trace.  Each placement rule is shown on a small run written by hand, checked by the twin: the
merge the rule makes is a behaviour of the spec, and the order of the stamps alone is not (so
the rule is needed, and a test without it would fail).  Malformed files: one error naming the
file and line."""

from __future__ import annotations

import json

import pytest

from spec.failover.procmerge import ProcTraceError, merge_process_traces
from spec.failover.tracecheck import check_failover_lines


def _file(process: str, *lines: tuple, starts: tuple[int, ...] = (0,), records: dict | None = None) -> list[str]:
    """A process's file: a header at each stamp in ``starts`` (a later one is a restart, with the
    records its recovery found from ``records``), then ``(t_ns, step, fields)`` lines, in stamp order."""
    out, pending = [], sorted([(t, None) for t in starts] + [(line[0], line) for line in lines],
                              key=lambda x: (x[0], x[1] is not None))
    for t, line in pending:
        if line is None:
            extra = {"records": records[t]} if records and t in records else {}
            out.append(json.dumps({"ackorder_trace": 1, "model": "failover-process", "process": process,
                                   "t_ns": t, "bugs": [], **extra}) + "\n")
        else:
            out.append(json.dumps({"t_ns": t, "step": line[1], **(line[2] if len(line) > 2 else {})}) + "\n")
    return out


ALL = ["b1", "b2", "b3"]


def _controller(*lines: tuple) -> list[str]:
    return _file("controller", (10, "FirstMaster", {"group": "g", "master": "b1", "alive": ["b1"]}), *lines)


def _expanded(t0: int = 11) -> tuple[list, list]:
    """b1 master of epoch 1 with b2 connected and in its SyncStateSet: (b1's lines, b2's lines)."""
    b1 = [(t0, "ChangeToMaster", {"epoch": 1}), (t0 + 3, "ReplicaConnect", {"slave": "b2", "records": 0}),
          (t0 + 4, "ExpandSyncStateSet", {"member": "b2"}), (t0 + 6, "ChangeSyncStateSet")]
    b2 = [(t0 + 1, "ChangeToSlave", {"epoch": 1, "master": "b1"}), (t0 + 2, "Connect")]
    return b1, b2


def _merge(files: dict[str, list[str]]):
    """The files, with a header-only file for each of b1..b3 that has none (it did nothing)."""
    def process(lines: list[str]):
        try:
            return json.loads(lines[0]).get("process")
        except (ValueError, IndexError, AttributeError):
            return None
    named = {process(lines) for lines in files.values()}
    extra = {b: _file(b) for b in ALL if b not in named}
    return merge_process_traces(list(files.items()) + list(extra.items()))


def _verdict(merged):
    return check_failover_lines(merged.text("test").splitlines(keepends=True), "merged")


def _alter(t: int, master: str = "b1", alive=ALL) -> tuple:
    return (t, "AlterSyncStateSet", {"group": "g", "master": master, "accepted": True, "alive": list(alive)})


def test_a_slave_record_waits_for_the_ack_that_claims_it():
    b1, b2 = _expanded()
    b1 += [(20, "Put", {"req": 1}), (22, "Put", {"req": 2}), (24, "ReplicaAck", {"slave": "b2", "claim": 1}),
           (25, "Respond", {"req": 1}), (28, "ReplicaAck", {"slave": "b2", "claim": 2}), (29, "Respond", {"req": 2})]
    b2 += [(21, "Transfer", {"records": 1}), (23, "Transfer", {"records": 2})]
    merged = _merge({"c": _controller(_alter(16)), "b1": _file("b1", *b1), "b2": _file("b2", *b2)})
    assert merged.initial_master == "b1" and merged.brokers == ("b1", "b2", "b3")   # b3: named by the controller
    assert merged.labels == ("ReplicaConnect(b2)", "ExpandSyncStateSet(b1,b2)", "AlterSyncStateSet(b1)",
                             "ChangeSyncStateSet(b1)", "Put(b1)", "Put(b1)", "Transfer(b2)", "ReplicaAck(b2)",
                             "Respond(1)", "Transfer(b2)", "ReplicaAck(b2)", "Respond(2)")
    assert _verdict(merged).ok
    # by the stamps alone, the first ack takes both records and the second has nothing to add
    stamped = merged.labels[:6] + ("Transfer(b2)", "Transfer(b2)", "ReplicaAck(b2)", "Respond(1)",
                                   "ReplicaAck(b2)", "Respond(2)")
    assert not _verdict(type(merged)(merged.brokers, "b1", (), stamped, ())).ok


def test_an_answer_before_the_slave_acks_is_rejected():
    """The check bites on a real run's history: a PUT_OK the SyncStateSet did not cover yet."""
    b1, b2 = _expanded()
    b1 += [(20, "Put", {"req": 1}), (22, "Respond", {"req": 1}), (24, "ReplicaAck", {"slave": "b2", "claim": 1})]
    b2 += [(21, "Transfer", {"records": 1})]
    v = _verdict(_merge({"c": _controller(_alter(16)), "b1": _file("b1", *b1), "b2": _file("b2", *b2)}))
    assert not v.ok and v.label == "Respond(1)"


def test_a_crash_is_placed_when_the_controller_counts_the_broker_dead_after_its_records_in_flight():
    b1, b2 = _expanded()
    b1 += [(20, "Put", {"req": 1})]                    # then b1 is killed: its file ends
    b2 += [(60, "Transfer", {"records": 1}),            # in its socket: arrives after the election
           (70, "ChangeToMaster", {"epoch": 2}), (80, "Put", {"req": 1})]
    c = _controller(_alter(16), (50, "ElectMaster", {"group": "g", "master": "b2", "epoch": 2, "alive": ["b2", "b3"]}))
    merged = _merge({"c": c, "b1": _file("b1", *b1), "b2": _file("b2", *b2)})
    assert merged.labels[4:] == ("Put(b1)", "Transfer(b2)", "BrokerCrash(b1)", "ElectMaster", "ChangeToMaster(b2)",
                                 "Put(b2)")
    assert _verdict(merged).ok
    # at its stamp the record would reach b2 after its master died: no spec step explains that
    stamped = merged.labels[:5] + ("BrokerCrash(b1)", "ElectMaster", "Transfer(b2)") + merged.labels[8:]
    assert not _verdict(type(merged)(merged.brokers, "b1", (), stamped, ())).ok


def test_a_restart_places_the_crash_and_the_harness_tail_before_it():
    b1, b2 = _expanded()
    b1 += [(20, "Put", {"req": 1}), (90, "ChangeToSlave", {"epoch": 2, "master": "b2"})]
    b2 += [(21, "Transfer", {"records": 1}), (70, "ChangeToMaster", {"epoch": 2})]
    c = _controller(_alter(16), (50, "ElectMaster", {"group": "g", "master": "b2", "epoch": 2, "alive": ["b2", "b3"]}))
    chaos = _file("chaos", (60, "UnreplicatedTail", {"broker": "b1", "records": 2}))
    merged = _merge({"c": c, "b1": _file("b1", *b1, starts=(0, 80)), "b2": _file("b2", *b2), "x": chaos})
    assert "Put(b1);Put(b1);BrokerCrash(b1);ElectMaster" in ";".join(merged.labels)
    assert merged.labels[-3:] == ("ChangeToMaster(b2)", "BrokerRestart(b1)", "ChangeToSlave(b1)")
    assert _verdict(merged).ok


def test_a_live_broker_the_controller_counts_dead_is_cut_off_then_reconnects():
    b1, b2 = _expanded()
    b3 = [(40, "ChangeToSlave", {"epoch": 2, "master": "b2"})]
    b1 += [(45, "ChangeToSlave", {"epoch": 2, "master": "b2"})]     # deposed, it lives on
    b2 += [(35, "ChangeToMaster", {"epoch": 2})]
    c = _controller(_alter(16), (30, "ElectMaster", {"group": "g", "master": "b2", "epoch": 2, "alive": ["b2"]}))
    merged = _merge({"c": c, "b1": _file("b1", *b1), "b2": _file("b2", *b2), "b3": _file("b3", *b3)})
    assert merged.labels[4:] == ("CutFromController(b1)", "CutFromController(b3)", "ElectMaster",
                                 "ChangeToMaster(b2)", "ReconnectToController(b3)", "ChangeToSlave(b3)",
                                 "ReconnectToController(b1)", "ChangeToSlave(b1)")
    assert _verdict(merged).ok


def test_records_a_killed_slave_wrote_after_its_last_line_come_from_its_next_life():
    """The kill fell between a write and the line that counts it: the slave's next life recovers
    more than its lines say.  Those records left the master before the connection ended."""
    b1, b2 = _expanded()
    b1 += [(20 + k, "Put", {"req": k}) for k in range(1, 6)] + [
        (40, "ReplicaDisconnect", {"slave": "b2"}), (53, "ReplicaConnect", {"slave": "b2", "records": 5}),
        (54, "Put", {"req": 6}), (56, "ReplicaAck", {"slave": "b2", "claim": 6}), (57, "Respond", {"req": 6})]
    b2 += [(29, "Received", {"records": 5}),              # parsed, then written: the lines of two come first
           (30, "Transfer", {"records": 1}), (31, "Transfer", {"records": 2}),       # then killed
           (50, "ChangeToSlave", {"epoch": 1, "master": "b1"}), (52, "Connect"), (55, "Received", {"records": 6}),
           (55, "Transfer", {"records": 6})]
    merged = _merge({"c": _controller(_alter(16)), "b1": _file("b1", *b1),
                     "b2": _file("b2", *b2, starts=(0, 45), records={45: 5})})
    assert merged.labels[9:18] == ("Transfer(b2)",) * 5 + ("ReplicaDisconnect(b2)", "BrokerCrash(b2)",
                                                           "BrokerRestart(b2)", "ChangeToSlave(b2)")
    assert _verdict(merged).ok
    # counting only its lines, the spec's b2 holds 2 records where the real one held 5: its ack of the
    # sixth covers 3, and the PUT_OK the real master gave is unexplained
    lines_only = merged.labels[:11] + merged.labels[14:]
    v = _verdict(type(merged)(merged.brokers, "b1", (), lines_only, ()))
    assert not v.ok and v.label == "Respond(6)"


def test_what_a_restart_finds_beyond_what_the_slave_received_is_not_made_a_transfer():
    """A cut that did not last (BugTruncateNotDurable) brings the slave's own tail back: its next life
    recovers more than it ever received, and the merge does not explain the excess as records from
    the master (it caps them at the last ``Received`` of the life)."""
    b1, b2 = _expanded()
    b1 += [(20 + k, "Put", {"req": k}) for k in range(1, 4)] + [(40, "ReplicaDisconnect", {"slave": "b2"})]
    b2 += [(29, "Received", {"records": 1}), (30, "Transfer", {"records": 1})]
    merged = _merge({"c": _controller(_alter(16)), "b1": _file("b1", *b1),
                     "b2": _file("b2", *b2, starts=(0, 45), records={45: 3})})
    assert merged.labels.count("Transfer(b2)") == 1


def test_an_ack_is_taken_only_from_the_master_the_slave_follows_and_never_beyond_its_claim():
    """The spec's ack is the slave's whole log: a report that claims less than the merge has placed
    is no step (it would credit records no report covered), and a deposed master's last report from
    a slave that follows another master is no step of that master's connection."""
    b1, b2 = _expanded()
    b1 += [(20, "Put", {"req": 1}), (21, "Put", {"req": 2}), (22, "Put", {"req": 3}),
           (45, "ReplicaAck", {"slave": "b2", "claim": 1}), (46, "Respond", {"req": 3}),     # PUT_OK on claim 1
           (47, "ReplicaDisconnect", {"slave": "b2"})]
    b2 += [(23, "Transfer", {"records": 1}), (24, "Transfer", {"records": 2}), (25, "Transfer", {"records": 3}),
           (40, "Connect")]                     # a new connection: the old one's records wait for its end
    v = _verdict(_merge({"c": _controller(_alter(16)), "b1": _file("b1", *b1), "b2": _file("b2", *b2)}))
    assert not v.ok and v.label == "Respond(3)"
    # b1 deposed (cut off, alive): its last ReplicaAck of b3 comes after b3 follows b2
    b1, b2 = _expanded()
    b1 += [(12, "ReplicaConnect", {"slave": "b3", "records": 0}), (70, "ReplicaAck", {"slave": "b3", "claim": 1})]
    b2 += [(40, "ChangeToMaster", {"epoch": 2}), (43, "ReplicaConnect", {"slave": "b3", "records": 0}),
           (44, "ExpandSyncStateSet", {"member": "b3"}), (46, "ChangeSyncStateSet"), (60, "Put", {"req": 1}),
           (75, "Respond", {"req": 1})]
    b3 = [(11, "ChangeToSlave", {"epoch": 1, "master": "b1"}), (41, "ChangeToSlave", {"epoch": 2, "master": "b2"}),
          (42, "Connect"), (61, "Received", {"records": 1}), (80, "Transfer", {"records": 1})]
    c = _controller(_alter(16), (30, "ElectMaster", {"group": "g", "master": "b2", "epoch": 2, "alive": ["b2", "b3"]}),
                    _alter(45, "b2", ["b2", "b3"]))
    v = _verdict(_merge({"c": c, "b1": _file("b1", *b1), "b2": _file("b2", *b2), "b3": _file("b3", *b3)}))
    assert not v.ok and v.label == "Respond(1)"


def test_only_a_first_lifes_first_role_step_in_epoch_1_is_inits():
    b1, b2 = _expanded()
    b1 += [(20, "Put", {"req": 1})]
    b2 += [(21, "Transfer", {"records": 1}), (70, "ChangeToMaster", {"epoch": 2}),
           (80, "ChangeToSlave", {"epoch": 1, "master": "b1"})]       # back to epoch 1: E5 forbids it
    c = _controller(_alter(16), (50, "ElectMaster", {"group": "g", "master": "b2", "epoch": 2, "alive": ["b2", "b3"]}))
    v = _verdict(_merge({"c": c, "b1": _file("b1", *b1), "b2": _file("b2", *b2)}))
    assert not v.ok and v.label == "ChangeToSlave(b2)"


def test_a_refused_alter_with_nothing_pending_is_a_resend_the_controller_decided_already():
    b1, b2 = _expanded()
    c = _controller(_alter(16), (18, "AlterSyncStateSet", {"group": "g", "master": "b1", "accepted": False,
                                                           "alive": ALL}))
    merged = _merge({"c": c, "b1": _file("b1", *b1), "b2": _file("b2", *b2)})
    assert merged.labels.count("AlterSyncStateSet(b1)") == 1 and _verdict(merged).ok


def test_a_run_without_the_file_of_a_broker_it_names_is_refused():
    with pytest.raises(ProcTraceError, match="no file of b3, which the run's files name"):
        merge_process_traces([("c", _controller(_alter(16))), ("b1", _file("b1")), ("b2", _file("b2"))])


@pytest.mark.parametrize("files, message", [
    ({"c": ["{not json\n", '{"t_ns": 1}\n']}, "c:1: invalid JSON"),
    ({"c": ["{not json\n"]}, "c: no header line"),        # a cut line is no step, even the only one
    ({"c": ['{"t_ns": 1, "step": "ElectMaster"}\n']}, "c:1: a step before the file's header line"),
    ({"c": _controller((20, "Elect", {}))}, "c:3: step 'Elect': not a step of a controller"),
    ({"c": _controller((20, "ElectMaster", {"group": "g", "master": "b2", "alive": ["b2"]}))},
     "c:3: ElectMaster has the fields alive, epoch, group, master"),
    ({"c": _controller(), "b1": _file("b1", (20, "Put", {"req": -1}))}, "b1:2: req: expected a non-negative integer"),
    ({"c": _controller(), "b1": _file("b1", (20, "ReplicaAck", {"slave": "x", "claim": 1}))},
     "b1:2: slave: expected a broker name"),
    ({"c": _controller(), "b1": _file("b1", (20, "Put", {"req": 1})) + ['{"t_ns": 5, "step": "Put", "req": 2}\n']},
     "b1:3: t_ns 5 is before the line above"),
    ({"b1": _file("b1")}, "no controller file"),
    ({"c": _file("controller")}, "the controller's file has no FirstMaster"),
    ({"c": _controller(), "d": _controller()}, "d: a second file of process controller"),
    ({"c": _controller(), "b1": ['{"ackorder_trace": 1, "model": "failover", "process": "b1", "t_ns": 0}\n']},
     "b1:1: expected a failover process header"),
    ({"c": _controller((20, "ElectMaster", {"group": ["g"], "master": "b2", "epoch": 2, "alive": []}))},
     "c:3: group: expected a text"),
    ({"c": _controller() + ['{"t_ns": 30, "step": ["Put"]}\n']}, "c:3: step: expected the name of a step"),
    ({"c": _file("controller", (10, "FirstMaster", {"group": "g", "master": "none", "alive": []}))},
     "c:2: master: expected a broker name such as b1"),
    ({"c": _file("controller", starts=(0, 5))}, "c:2: the controller started again"),
    ({"c": _controller((20, "FirstMaster", {"group": "g", "master": "b2", "alive": []}))}, "c:3: a second FirstMaster"),
    ({"c": _controller(), "b1": _file("b1", (5, "Put", {"req": 1}))}, "b1:2: a step before the controller's first"),
    ({"c": _controller(), "b1": ['{"ackorder_trace": 1, "model": "failover-process", "process": "b1", "t_ns": 0, '
                                 '"bugs": ["BugNope"]}\n']}, "b1:1: bugs: expected a list of failover bug switch"),
    ({"c": _controller(), "b1": _file("b1", (20, "ChangeToSlave", {"epoch": 2, "master": "none"}))},
     "b1:2: master: expected a broker name such as b1"),
    ({"c": _controller(), "b1": _file("b1", (20, "Put", {"req": 1}))[:1] + ['{"t_ns": 21, "step": "Put"\n',
                                                                           '{"t_ns": 22, "step": "Put", "req": 2}\n']},
     "b1:2: invalid JSON"),
])
def test_malformed_process_files_name_the_file_and_line(files, message):
    with pytest.raises(ProcTraceError, match=message.replace("(", r"\(")):
        _merge(files)


def test_a_line_cut_short_by_a_kill_ends_the_file():
    b1, _ = _expanded()
    lines = _file("b1", *b1, (20, "Put", {"req": 1}))
    lines[-1] = lines[-1][:-9]                 # the kill came in the middle of the last write
    merged = _merge({"c": _controller(), "b1": lines})
    assert "Put(b1)" not in merged.labels
