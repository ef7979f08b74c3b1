"""The nemeses (issue 38): the fault proxy on real sockets, the seeded fault plans, and
`ackorder chaos --failover --nemesis` on real processes.

* the proxy: a partition holds the bytes both ways and lets them through, in order, at the heal;
  a one-way rule holds one direction while the other flows; a connection made during a partition
  waits for the heal; a delay delays; a drop resets; a malformed command is answered and changes
  nothing;
* the plans: one seed is one schedule; each nemesis cuts what it says;
* a short run with partitions loses nothing and its checks ran (make test);
* it bites: BugAlterWithoutFencing is caught by isolating the master from the controller while the
  producers and the slaves still reach it;
* wrong input: exit 2, one line.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cli.tests import zygote
from reference.real.failover_chaos import TREE
from reference.real.nemesis import BROKERS, CLIENT, CONTROLLER, DOMAIN, NEMESES, draw, parse_nemeses
from reference.real.chaos_reach import NEMESIS_CATCHES
from reference.real.nemesis_chaos import epoch_violations, unavailable_windows
from reference.real.netfault import ANY, Link, NetFault, NetRules
from reference.real import netroute
from spec.config import ConfigError

ENV = dict(os.environ, PYTHONPATH=str(TREE))


def _cli(*argv: str, timeout_s: float = 240) -> subprocess.CompletedProcess:
    return zygote.run(list(argv), cwd=TREE, env=ENV, timeout=timeout_s)


# ---------------------------------------------------------------------- the proxy on real sockets

class _Echo:
    """A TCP server on 127.0.0.1 that answers every chunk with the same bytes."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(data)
            except OSError:                  # a reset (the drop test): this echo is done
                pass


@pytest.fixture
def proxied(tmp_path: Path):
    echo = _Echo()
    net = NetFault([Link("a", "b", ("127.0.0.1", echo.port))], tmp_path)
    yield net
    net.close()
    echo.listener.close()


def _connect(net: NetFault) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", net.port("a", "b")), timeout=5)
    sock.settimeout(0.5)
    return sock


def _recv_exactly(sock: socket.socket, n: int, timeout_s: float = 5.0) -> bytes:
    sock.settimeout(timeout_s)
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "closed"
        out += chunk
    return out


def test_a_partition_holds_the_bytes_both_ways_and_the_heal_lets_them_through_in_order(proxied):
    sock = _connect(proxied)
    sock.sendall(b"before")
    assert _recv_exactly(sock, 6) == b"before"
    proxied.set(NetRules(frozenset({("a", "b"), ("b", "a")})))
    sock.sendall(b"during-1")
    sock.sendall(b"during-2")
    with pytest.raises(socket.timeout):
        sock.settimeout(0.5)
        sock.recv(100)
    stats = proxied.stats()
    assert stats["held_bytes"] == 0 and stats["connections"] == 1      # held in the kernel: not read
    proxied.set(NetRules())
    assert _recv_exactly(sock, 16) == b"during-1during-2"
    sock.close()


def test_one_way_holds_one_direction_while_the_other_flows(proxied):
    sock = _connect(proxied)
    proxied.set(NetRules(frozenset({("b", "a")})))     # the echo's answers held, our bytes flow
    sock.sendall(b"ping")
    time.sleep(0.3)
    assert proxied.stats()["bytes"] >= 4               # our bytes reached the echo; its answer waits unread
    with pytest.raises(socket.timeout):
        sock.settimeout(0.3)
        sock.recv(100)
    proxied.set(NetRules())
    assert _recv_exactly(sock, 4) == b"ping"


def test_a_connection_made_during_a_partition_waits_for_the_heal(proxied):
    proxied.set(NetRules(frozenset({("a", "b")})))
    sock = _connect(proxied)
    sock.sendall(b"hello")
    time.sleep(0.3)
    assert proxied.stats()["waiting_connects"] == 1
    proxied.set(NetRules())
    assert _recv_exactly(sock, 5) == b"hello"


def test_a_delay_delays_each_direction(proxied):
    sock = _connect(proxied)
    proxied.set(NetRules(delay_ms=(("a", "b", 150), ("b", "a", 150))))
    started = time.monotonic()
    sock.sendall(b"x")
    assert _recv_exactly(sock, 1) == b"x"
    assert time.monotonic() - started >= 0.29       # a floor the proxy guarantees, not a speed claim


def test_a_drop_resets_the_connection(proxied):
    sock = _connect(proxied)
    proxied.set(NetRules(drop_per_mille=(("a", "b", 1000),), seed=1))
    sock.sendall(b"x")
    sock.settimeout(5)
    with pytest.raises(ConnectionResetError):      # an RST, not an orderly close
        sock.recv(10)
    assert proxied.stats()["resets"] == 1


def test_a_connection_whose_caller_gave_up_while_it_waited_is_never_delivered(proxied):
    proxied.set(NetRules(frozenset({("a", "b")})))
    gone = _connect(proxied)
    gone.sendall(b"stale")
    gone.close()                                      # the caller's connect timed out: it closed
    late = _connect(proxied)
    late.sendall(b"late")
    time.sleep(3.5)                                  # past WAIT_CONNECT_S: the proxy resets it
    assert proxied.stats()["expired_connects"] == 2
    with pytest.raises(ConnectionResetError):
        late.settimeout(5)
        late.recv(10)
    proxied.set(NetRules())
    fresh = _connect(proxied)
    fresh.sendall(b"fresh")
    assert _recv_exactly(fresh, 5) == b"fresh"        # and nothing of the two was delivered before it
    assert proxied.stats()["bytes"] == 10


def test_a_malformed_command_is_answered_and_changes_nothing(proxied):
    sock = _connect(proxied)
    proxied.popen.stdin.write(b'{"seq": 99, "rules": {"blocked": [["a"]]}}\n{not json\n')
    proxied.popen.stdin.flush()
    first, second = (json.loads(proxied.popen.stdout.readline()) for _ in range(2))
    assert first == {"seq": 99, "ok": False, "error": first["error"]} and "rules.blocked" in first["error"]
    assert second["ok"] is False and second["seq"] is None
    sock.sendall(b"still")
    assert _recv_exactly(sock, 5) == b"still"         # still serving, no rule applied


def test_a_link_for_every_sender_names_each_connection_by_its_x_peerurls_header(tmp_path: Path):
    """etcd's peer port: one port for all members, each connection's sender named by its first request
    (rafthttp's X-PeerURLs, the sender's advertised peer URL, which is the proxy's port to it)."""
    echo = _Echo()
    net = NetFault([Link(ANY, "m1", ("127.0.0.1", echo.port)), Link(ANY, "m2", ("127.0.0.1", echo.port))], tmp_path)
    try:
        m2_url = f"http://127.0.0.1:{net.port(ANY, 'm2')}"
        head = f"GET /raft/stream HTTP/1.1\r\nHost: x\r\nX-PeerURLs: {m2_url}\r\n\r\n".encode()
        net.set(NetRules(frozenset({("m3", "m1")})))          # another sender cut: this one flows
        from_m2 = socket.create_connection(("127.0.0.1", net.port(ANY, "m1")), timeout=5)
        from_m2.sendall(head)
        assert _recv_exactly(from_m2, len(head)) == head      # the head read to name it goes first
        net.set(NetRules(frozenset({("m2", "m1"), ("m1", "m2")})))
        from_m2.sendall(b"held")
        with pytest.raises(socket.timeout):
            from_m2.settimeout(0.4)
            from_m2.recv(10)
        anonymous = socket.create_connection(("127.0.0.1", net.port(ANY, "m1")), timeout=5)
        anonymous.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")   # a probe: no sender, not cut
        assert _recv_exactly(anonymous, 10).startswith(b"GET /vers")
        net.set(NetRules())
        assert _recv_exactly(from_m2, 4) == b"held"
    finally:
        net.close()
        echo.listener.close()


def test_a_connection_without_x_peerurls_is_named_by_the_process_that_owns_its_socket(tmp_path: Path):
    """A follower forwarding lease keep-alives to the leader sends no X-PeerURLs: the proxy names it by
    the caller's socket (its inode among the named processes' descriptors), so a partition cuts it too."""
    echo = _Echo()
    net = NetFault([Link(ANY, "m1", ("127.0.0.1", echo.port))], tmp_path)
    caller = ("import socket, sys\n"
              "sys.stdin.readline()\n"                     # named and cut first, then it connects
              "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
              "s.sendall(b'POST /leases HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
              "s.settimeout(1.5)\n"
              "try:\n    print(len(s.recv(100)))\nexcept socket.timeout:\n    print('held')\n")
    try:
        child = subprocess.Popen([sys.executable, "-c", caller, str(net.port(ANY, "m1"))], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        net.name_processes({child.pid: "m7"})
        net.set(NetRules(frozenset({("m7", "m1"), ("m1", "m7")})))
        assert child.communicate("go\n", timeout=30)[0].strip() == "held"
        assert net.stats()["named_by_process"] >= 1
        ours = socket.create_connection(("127.0.0.1", net.port(ANY, "m1")), timeout=5)   # not named: not cut
        ours.sendall(b"GET /version HTTP/1.1\r\n\r\n")
        assert _recv_exactly(ours, 8) == b"GET /ver"
    finally:
        net.close()
        echo.listener.close()


def test_rules_from_json_refuse_what_to_json_never_writes():
    rules = NetRules(frozenset({("a", "b")}), (("a", "b", 5),), (("b", "a", 10),), 7)
    assert NetRules.from_json(rules.to_json()) == rules
    for bad in ([], {"blocked": [["a", "b", "c"]]}, {"delay_ms": [["a", "b", -1]]}, {"delay_ms": [["a", "b", 10**9]]},
                {"drop_per_mille": [["a", "b", 1001]]}, {"seed": "x"}, {"other": 1}):
        with pytest.raises(ConfigError):
            NetRules.from_json(bad)


# ---------------------------------------------------------------------- routes

def test_a_route_map_maps_and_a_malformed_one_is_refused():
    assert netroute.parse("127.0.0.1:5=127.0.0.1:6, h:7=h:8") == {("127.0.0.1", 5): ("127.0.0.1", 6),
                                                                   ("h", 7): ("h", 8)}
    for bad in ("127.0.0.1:5", "127.0.0.1:x=127.0.0.1:6", "127.0.0.1:0=127.0.0.1:6", ":5=h:6", "h:٣=h:6"):
        with pytest.raises(ConfigError, match=netroute.ENV):
            netroute.parse(bad)
    netroute.install({("127.0.0.1", 5): ("127.0.0.1", 6)})
    try:
        assert netroute.route(("127.0.0.1", 5)) == ("127.0.0.1", 6)
        assert netroute.route(("127.0.0.1", 7)) == ("127.0.0.1", 7)
    finally:
        netroute.install(None)


def test_a_node_with_a_malformed_route_map_exits_2_with_one_line(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "cli", "broker", "node", "--controller", "127.0.0.1:1", "--id", "1",
                           "--dir", str(tmp_path / "b1"), "--port", "1", "--ha-port", "2"],
                          cwd=TREE, env={**ENV, netroute.ENV: "nonsense"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and netroute.ENV in done.stderr


def test_the_client_and_each_broker_and_controller_reach_the_others_through_their_own_links():
    """routes_of: the addresses a process learns mapped to its links (a review found "client" matched as a
    controller by its first letter, so the producers reached the brokers past the proxy)."""
    from reference.real.failover_chaos import Cluster

    class Ports:
        def port(self, src, dst):
            return hash((src, dst)) % 20_000 + 30_000

    cluster = Cluster.__new__(Cluster)
    cluster.net, cluster.controller_ports = Ports(), [2000, 2001, 2002]
    cluster.node_ports = {1: (1001, 1101), 2: (1002, 1102), 3: (1003, 1103)}
    local = "127.0.0.1"
    assert cluster.routes_of(CLIENT) == {(local, 1000 + j): (local, Ports().port(CLIENT, f"b{j}")) for j in (1, 2, 3)}
    assert cluster.routes_of("b2") == {(local, 1100 + j): (local, Ports().port("b2", f"b{j}")) for j in (1, 3)}
    assert cluster.routes_of("c1") == {(local, 2000 + c): (local, Ports().port("c1", f"c{c}")) for c in (0, 2)}


def test_a_call_cancelled_before_the_loop_runs_it_is_skipped_not_answered():
    """Found by the 30-minute run: a heartbeat's report waited past its timeout on a busy loop;
    asyncio.wait_for cancelled the future, and the loop answering it raised InvalidStateError on the
    loop thread, which stopped the node for good (the group never got its SyncStateSet back)."""
    from reference.real.loop import submit

    calls, ran = [], []

    class Loop:
        def call_soon(self, fn, *args):
            calls.append(fn)

    cancelled = submit(Loop(), lambda: ran.append("cancelled"))
    assert cancelled.cancel()
    kept = submit(Loop(), lambda: ran.append("kept") or 7)
    for call in calls:
        call()                                     # the loop's turn: must not raise
    assert ran == ["kept"] and cancelled.cancelled() and kept.result(0) == 7


# ---------------------------------------------------------------------- the plans

def test_one_seed_is_one_schedule_and_each_nemesis_cuts_what_it_says():
    for seed in range(50):
        a, b = random.Random(seed), random.Random(seed)
        kinds = [a.choice(NEMESES) for _ in range(20)]
        assert [draw(a, k, "b1") for k in kinds] == [draw(b, k, "b1") for k in [b.choice(NEMESES) for _ in range(20)]]
    rng = random.Random(1)
    seen = {k: [draw(rng, k, "b2") for _ in range(30)] for k in NEMESES}
    for f in seen["isolate-master"]:
        assert f.rules.blocked == frozenset({("b2", CONTROLLER), (CONTROLLER, "b2")})     # nothing else
    for f in seen["partition"] + seen["bridge"] + seen["one-way"]:
        assert f.rules.blocked and all(CLIENT not in pair for pair in f.rules.blocked)    # the client reaches all
        assert all(a in DOMAIN and b in DOMAIN for a, b in f.rules.blocked)
    for f in seen["bridge"]:
        bridge = f.what.rsplit("bridged by ", 1)[1]
        assert all(bridge not in pair for pair in f.rules.blocked)
    for f in seen["partition"]:
        assert all((b, a) in f.rules.blocked for a, b in f.rules.blocked)                 # both ways
    for f in seen["one-way"]:
        assert not any((b, a) in f.rules.blocked for a, b in f.rules.blocked)             # one way only
    assert all(f.kill and not f.rules.blocked for f in seen["kill"])
    assert all(f.pause for f in seen["pause"])
    assert all(f.rules.delay_ms for f in seen["delay"]) and all(f.rules.drop_per_mille for f in seen["drop"])
    assert {f.kill[0] for f in seen["kill"]} <= {CONTROLLER, *BROKERS}


def test_parse_nemeses():
    assert parse_nemeses("all") == NEMESES
    assert parse_nemeses("kill, partition,kill") == ("kill", "partition")
    for bad in ("", "kill,nope", ","):
        with pytest.raises(ConfigError, match="--nemesis"):
            parse_nemeses(bad)


def test_the_pread_check_tells_a_lost_record_from_a_corrupt_one(tmp_path: Path):
    from reference.real.failover_load import AckedAt
    from reference.real.load import Acked, body_for
    from reference.real.nemesis_chaos import lost_and_corrupt
    from reference.record import encode, record_size

    segment, size = 4096, 50
    log = bytearray()
    acked = []
    for key in range(1, 11):
        log += encode(key, body_for(key, size))
        acked.append(AckedAt(Acked(key, len(log), size), 0.0, 1))
    directory = tmp_path / "commitlog"
    directory.mkdir()
    n = record_size(size)
    log[2 * n: 3 * n] = bytes(n)                     # key 3: zeros (never written there)
    log[5 * n + 30] ^= 0xFF                          # key 6: one bit-flipped byte
    (directory / f"{0:020d}").write_bytes(bytes(log[: 9 * n]))   # key 10: beyond the file's end
    lost, corrupt = lost_and_corrupt(directory, segment, acked, size)
    assert lost == [3, 10] and corrupt == [6]
    assert lost_and_corrupt(tmp_path / "nowhere", segment, acked[:2], size) == ([1, 2], [])


def test_a_put_ok_from_a_broker_that_was_not_its_records_epochs_master_is_a_violation(tmp_path: Path):
    from reference.failover.epochfile import EpochFileCache
    from reference.real.epochfile import write_epoch_file
    from reference.real.failover_load import AckedAt
    from reference.real.load import Acked
    from reference.real.nemesis_chaos import answered_outside_its_epoch

    write_epoch_file(tmp_path / "epochfile", EpochFileCache(((1, 0), (2, 1000))), durable=True)
    lines = {1: [(1.0, "MASTER", 1), (5.0, "SLAVE", 2)], 2: [(4.0, "MASTER", 2)]}
    good = [AckedAt(Acked(1, 500, 10), 2.0, 1), AckedAt(Acked(2, 1500, 10), 6.0, 2)]
    assert answered_outside_its_epoch(good, tmp_path / "epochfile", lines) == []
    bad = good + [AckedAt(Acked(3, 1600, 10), 4.5, 1)]        # b1 answered a record of b2's epoch 2
    assert answered_outside_its_epoch(bad, tmp_path / "epochfile", lines) == [
        "epoch 2 (master ['b2']): 1 PUT_OK from b1 of records it holds"]
    assert "not read" in answered_outside_its_epoch(good, tmp_path / "missing", lines)[0]


def test_unavailability_windows_and_epoch_checks_from_logs(tmp_path: Path):
    assert unavailable_windows([1.0, 1.5, 4.0, 4.2], 1.0, 0.5, 7.0) == [(1.5, 4.0), (4.2, 7.0)]
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "b1-001.log").write_text("role MASTER epoch 1 from offset 0 sss ['b1'] at_ms=1000.0\n"
                                     "role SLAVE of b2 epoch 2 at_ms=3000.0\n")
    (logs / "b2-001.log").write_text("role SLAVE of b1 epoch 1 at_ms=1100.0\n"
                                     "role MASTER epoch 2 from offset 9 sss ['b2'] at_ms=2900.0\n")

    class A:
        def __init__(self, broker_id, at_s):
            self.broker_id, self.at_s = broker_id, at_s
    assert epoch_violations(logs, [A(1, 1.5), A(2, 3.5)]) == []
    # b1 answering after b2's epoch began, still under its own: two brokers' PUT_OKs in one epoch only if
    # the lines say so; here b1 still in epoch 1 at 2.95 s: fine.  A third MASTER line of epoch 2 is not.
    (logs / "b3-001.log").write_text("role MASTER epoch 2 from offset 9 sss ['b3'] at_ms=2950.0\n"
                                     "role SLAVE of b2 epoch 1 at_ms=4000.0\n")
    got = epoch_violations(logs, [A(1, 1.5), A(2, 3.5), A(3, 3.6)])
    assert "b3: epoch 2 then 1" in got and "epoch 2: masters ['b2', 'b3']" in got


# ---------------------------------------------------------------------- runs on real processes

def _nemesis_run(tmp_path: Path, *flags: str, duration_s: int = 12) -> tuple[subprocess.CompletedProcess, dict]:
    out, report = tmp_path / "report.json", tmp_path / "report"
    done = _cli("chaos", "--failover", "--duration-s", str(duration_s), "--nemesis-interval-s", "1",
                "--settle-timeout-s", "12", "--json", str(out), "--report", str(report), *flags)
    return done, json.loads(out.read_text()) if out.exists() else {}


def test_a_short_partition_run_loses_nothing_and_its_checks_ran(tmp_path: Path):
    done, report = _nemesis_run(tmp_path, "--nemesis", "partition,isolate-master,one-way", "--seed", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["faults"] >= 1 and report["acked"] > 0 and report["lost"] == 0 and report["diverged"] == 0
    assert report["consumed"] > 0 and report["controller_polls"] > 0 and report["net"]["accepted"] > 0
    assert report["checks"] >= 2 and report["unexercised"] is None     # after each heal, and the last full one
    assert report["per_nemesis"] and sum(r["faults"] for r in report["per_nemesis"].values()) == report["faults"]
    for name in ("report.md", "report.html", "latency.png"):
        assert (tmp_path / "report" / name).stat().st_size > 0


def test_a_partition_run_over_three_controllers_and_etcd_loses_nothing(tmp_path: Path):
    """The etcd members and the controllers in the domain: their links (etcd's peer links named by
    X-PeerURLs) through the proxy; seed 3 first isolates an etcd member, then splits the domain in halves."""
    done, report = _nemesis_run(tmp_path, "--nemesis", "partition", "--controllers", "3", "--seed", "3",
                                duration_s=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {"m0", "m1", "m2", "c0", "c1", "c2"} <= set(report["domain"])
    assert any(p in f["what"] for f in report["fault_log"] for p in ("m0", "m1", "m2")), report["fault_log"]
    assert report["lost"] == 0 and report["diverged"] == 0 and report["unexercised"] is None


def test_nemesis_isolating_the_master_catches_an_alter_without_fencing(tmp_path: Path):
    """A fault bites when the deposed master's proposal drops the slave that was elected (it drops the
    lowest-numbered laggard): about one isolate-master fault in two; 60 s make about eight."""
    done, report = _nemesis_run(tmp_path, "--nemesis", "isolate-master", "--seed", "2",
                                "--failover-bug", "BugAlterWithoutFencing", duration_s=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert any(v.startswith("SSSContainsMaster") for v in report["controller_violations"]), report


@pytest.mark.parametrize("bug", [b for b, c in NEMESIS_CATCHES.items() if c.test == "test_nemesis_catches_a_failover_switch"])
def test_nemesis_catches_a_failover_switch(tmp_path: Path, bug: str):
    catch = NEMESIS_CATCHES[bug]
    done, report = _nemesis_run(tmp_path, "--nemesis", ",".join(catch.nemesis), "--seed", "1",
                                "--failover-bug", bug, duration_s=40)
    assert done.returncode == 1, done.stdout + done.stderr
    assert not report["valid"] and report["unexercised"] is None, report
    assert CAUGHT_BY[catch.how.split(":")[0].split(",")[0]](report), (catch.how, report)


CAUGHT_BY = {          # NemesisCatch.how's first word -> the report says so
    "lost": lambda r: r["lost"] > 0,
    "stuck": lambda r: r["stuck"] is not None,
    "SSSContainsMaster (the controller watch)": lambda r: any(v.startswith("SSSContainsMaster")
                                                              for v in r["controller_violations"]),
}


def test_the_nemesis_catch_table_names_a_test_that_asserts_exit_1():
    from reference.real.chaos_reach import check_nemesis_reach
    from spec.failover.config import FAILOVER_BUG_NAMES

    here = sys.modules[__name__]
    for bug, catch in NEMESIS_CATCHES.items():
        source = inspect.getsource(getattr(here, catch.test))
        assert "returncode == 1" in source, catch.test
        if catch.test != "test_nemesis_catches_a_failover_switch":
            assert bug in source and catch.nemesis[0] in source, catch.test
        check_nemesis_reach((bug,), catch.nemesis)
        assert catch.how.split(":")[0].split(",")[0] in CAUGHT_BY, catch.how
        with pytest.raises(ConfigError, match="this run lacks"):
            check_nemesis_reach((bug,), tuple(n for n in NEMESES if n != catch.nemesis[0]))
    for bug in set(FAILOVER_BUG_NAMES) - set(NEMESIS_CATCHES):
        with pytest.raises(ConfigError, match="no --nemesis run is shown to reach"):
            check_nemesis_reach((bug,), NEMESES)


@pytest.mark.parametrize("argv, needle", [
    (["--nemesis", "bogus"], "--nemesis"),
    (["--nemesis", "kill", "--failover-bug", "BugTruncateNotDurable"], "no --nemesis run is shown to reach"),
    (["--nemesis", "kill", "--failover-bug", "BugAlterWithoutFencing"], "lacks isolate-master"),
    (["--nemesis", "kill", "--pause-member-ms", "2500"], "the nemeses are the run's faults"),
    (["--nemesis", "kill", "--failovers", "3"], "--duration-s"),
    (["--duration-s", "10"], "a flag of --nemesis"),
    (["--nemesis", "kill", "--unavailable-ms", "5"], "--unavailable-ms"),
    (["--nemesis", "kill", "--failover-trace", "/tmp/x.trace"], "--failover-trace with --nemesis"),
])
def test_wrong_nemesis_input_exits_2_with_one_line(argv, needle):
    done = _cli("chaos", "--failover", *argv, timeout_s=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_heartbeat_that_times_out_closes_the_connection_so_the_node_reconnects(tmp_path: Path, monkeypatch):
    """Found by a one-way nemesis (the controller's answers held past CONTROLLER_CALL_TIMEOUT_S): the
    heartbeat task ended while the connection stayed up, so the node's calls kept working and it never
    heartbeated again; the controller counted a live broker dead for good and the group stayed short
    of its SyncStateSet.  Now a failed heartbeat closes the connection: the node's loop connects again."""
    import asyncio

    from reference.real import node as node_module

    monkeypatch.setattr(node_module, "CONTROLLER_CALL_TIMEOUT_S", 0.2)
    lines: list[str] = []
    from reference.config import StoreConfig

    config = StoreConfig(flush_disk_type="SYNC_FLUSH", broker_role="SYNC_MASTER", ack_policy="ALL_IN_SYNC")
    node = node_module.Node(node_module.NodeOptions(directory=tmp_path / "b1", controller=("127.0.0.1", 1),
                                                    broker_id=1, config=config), log=lines.append)

    class HeldController:            # a controller whose answers never come back
        error = None

        async def heartbeat(self, *args, **kwargs):
            await asyncio.sleep(3600)

        async def close(self):
            self.error = "closed"

    client = HeldController()
    node._start_loop()
    try:
        asyncio.run(asyncio.wait_for(node._heartbeats(client), 10))
    finally:
        node._stop_loop()
    assert client.error == "closed", lines
    assert any(line.startswith("heartbeat failed") for line in lines), lines


def test_the_ports_a_run_restarts_on_are_picked_below_the_ephemeral_range():
    """A chaos run found a node that could not listen on its port (exit 3): picked free and released, it
    was taken meanwhile by one of the fault proxy's listeners (port 0: the ephemeral range)."""
    from reference.real.ports import LOWEST_PORT, ephemeral_low, free_ports

    ports = free_ports(40)
    assert len(set(ports)) == 40 and all(LOWEST_PORT <= p < ephemeral_low() for p in ports)
    with socket.create_server(("127.0.0.1", 0)) as listener:          # what the proxy's listeners get
        assert listener.getsockname()[1] >= ephemeral_low()
