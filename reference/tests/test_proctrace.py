"""reference/failover/proctrace.py: what a node's tracer writes, read from the cores' ghost labels
(the real runs that write them are in test_failover_real.py, under -m full).  A master core in
memory (test_follower_machine.Master) with its labels read whenever its effects are taken."""

from __future__ import annotations

import json

from reference.failover.proctrace import BrokerTracer, ControllerTracer, ProcessTrace
from reference.tests.test_follower_machine import Master


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _steps(path) -> list[tuple]:
    return [(x["step"], *(v for k, v in sorted(x.items()) if k not in ("t_ns", "step")))
            for x in _lines(path) if "step" in x]


def test_a_masters_puts_connections_acks_and_answers_become_lines_before_its_effects(tmp_path):
    path = tmp_path / "b1.ndjson"
    tracer = BrokerTracer(ProcessTrace(path, "b1", records=0))
    master = Master([], ((1, 0),))
    master.core = tracer.traced_master(master.core)
    master.put(7, 40)
    master.put(8, 40)
    core = master.core
    core.replica_connection_opened(1, 0)
    core.replica_handshake(1, "s", 0, core.log.index.chain_at(0), 0, 0)
    master.pump()
    end = master.end
    core.replica_ack(1, end // 2, 0, 1)                 # one record: PUT_OK for the first only
    master.pump()
    core.replica_ack(1, end // 2, 0, 1)                 # the same report again: no new step
    core.replica_ack(1, end, 0, 2)
    master.pump()
    core.replica_disconnected(1)                        # the slave went away: the runtime's, unlabelled by the core
    head = _lines(path)[0]
    assert (head["model"], head["process"], head["records"]) == ("failover-process", "b1", 0)
    assert _steps(path) == [("Put", 1), ("Put", 2), ("ReplicaConnect", 0, "s"), ("ReplicaAck", 1, "s"),
                            ("Respond", 1), ("ReplicaAck", 2, "s"), ("Respond", 2), ("ReplicaDisconnect", "s")]
    stamps = [x["t_ns"] for x in _lines(path)]
    assert stamps == sorted(stamps)


def test_a_put_refused_before_the_log_is_no_step_and_held_answers_follow_the_role_change(tmp_path):
    path = tmp_path / "b1.ndjson"
    tracer = BrokerTracer(ProcessTrace(path, "b1"))
    master = Master([], ((1, 0),))
    master.core = tracer.traced_master(master.core)
    master.put(7, 40)                                   # waits for the slave's ack
    tracer.hold()
    master.core.stop_serving()                          # demoted: what waited is answered
    master.pump()
    tracer.role_step("ChangeToSlave", epoch=2, master="b2")
    tracer.release()
    master.core.writable = False
    master.put(9, 40)                                   # refused: SERVICE_NOT_AVAILABLE, never in the log
    tracer.drain()
    assert _steps(path) == [("Put", 1), ("ChangeToSlave", 2, "b2"), ("Timeout", 1)]
    assert master.core.request_log == {}, "a request is forgotten once its Put label is read"


def test_the_controllers_decisions_carry_who_its_heartbeats_count_alive(tmp_path):
    from reference.failover.controller import ControllerConfig, ControllerCore

    path = tmp_path / "controller.ndjson"
    core = ControllerCore(ControllerConfig(controller_broker_heartbeat_timeout_ms=1_000), 0)
    tracer = ControllerTracer(ProcessTrace(path, "controller"), 1_000)
    core.register_broker(1, "g", 1, 0)
    core.register_broker(2, "g", 2, 10)
    core.register_broker(3, "g", 3, 10)
    for req in range(4, 8):
        core.broker_heartbeat(req, "g", 2, 1_000 * (req - 3))
        core.broker_heartbeat(req + 10, "g", 3, 1_000 * (req - 3))
    core.tick(5_000)             # b1 silent since 0: ElectMaster, no live member of its SyncStateSet {b1}: cleared
    tracer.drain(core)
    steps = [x for x in _lines(path) if "step" in x]
    assert [(x["step"], x["master"], x["alive"]) for x in steps] == [("FirstMaster", "b1", ["b1"]),
                                                                    ("ElectMaster", "none", ["b2", "b3"])]
    assert steps[1]["epoch"] == 2


def test_a_restart_after_a_kill_in_the_middle_of_a_line_starts_on_a_line_of_its_own(tmp_path):
    """The killed life's cut line stays the last of its life (the merge drops it), never glued to
    the next header."""
    from spec.failover.procmerge import read_process_file

    path = tmp_path / "b2.ndjson"
    first = ProcessTrace(path, "b2", records=0)
    first.step("Transfer", records=1)
    first.out.write('{"t_ns": 1, "step": "Tra')        # the kill came here
    first.out.close()
    ProcessTrace(path, "b2", records=1).step("Connect")
    text = path.read_text()
    process, lines, _ = read_process_file([line + "\n" for line in text.split("\n")[:-1]], str(path), 0)
    assert process == "b2" and [x.step for x in lines] == ["Transfer", "Start", "Connect"]
