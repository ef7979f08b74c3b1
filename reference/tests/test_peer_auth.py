"""Peer authentication on the HA and controller ports (issue 34): a shared secret and a
challenge-response, off by default on loopback, required on any other address; a wrong or
missing secret is refused with one log line, and the server keeps serving."""

from __future__ import annotations

import asyncio
import socket

import pytest

from reference.frames import Put, encode
from reference.real.controller_client import ControllerClient, PeerAuthError
from reference.real.peerauth import AuthError, AuthFrame, ClientAuth, ServerAuth, auth_aware
from reference.frames import decode_frame, split_frames
from reference.tests.realproc import start_controller, start_master, start_replica, wait_for_line
from reference.tests.test_bad_input import SMALL, closed_by_master
from reference.tests.test_hostile_bounds import logged

SECRET = b"correct horse battery staple"


def frame_of(data: bytes) -> AuthFrame:
    frames, used = split_frames(data, 1 << 16, auth_aware(decode_frame))
    assert used == len(data) and len(frames) == 1
    return frames[0]


def handshake(client: ClientAuth, server: ServerAuth) -> None:
    challenge = server.receive(frame_of(client.hello()))
    proof = client.receive(frame_of(challenge))
    assert server.receive(frame_of(proof)) is None


def test_both_sides_prove_the_secret():
    client, server = ClientAuth(SECRET, "ha"), ServerAuth(SECRET, "ha")
    handshake(client, server)
    assert client.done and server.done


@pytest.mark.parametrize("client_secret, client_service, who", [
    (b"a different secret, long enough", "ha", "server"),      # the client finds the server wrong first
    (SECRET, "controller", "server"),                          # a proof for one port is no good on the other
])
def test_a_wrong_secret_or_port_fails(client_secret, client_service, who):
    client, server = ClientAuth(client_secret, client_service), ServerAuth(SECRET, "ha")
    challenge = server.receive(frame_of(client.hello()))
    with pytest.raises(AuthError, match=f"the {who} does not hold"):
        client.receive(frame_of(challenge))


def test_a_proof_recorded_on_one_connection_is_refused_on_the_next():
    client, first = ClientAuth(SECRET, "ha"), ServerAuth(SECRET, "ha")
    hello = client.hello()
    proof = client.receive(frame_of(first.receive(frame_of(hello))))
    second = ServerAuth(SECRET, "ha")                          # a new connection: a new server nonce
    second.receive(frame_of(hello))
    with pytest.raises(AuthError, match="the peer does not hold"):
        second.receive(frame_of(proof))


def test_a_protocol_frame_before_the_proof_is_refused():
    server = ServerAuth(SECRET, "ha")
    with pytest.raises(AuthError, match="expected HELLO"):
        server.receive(object())


# --- real processes ----------------------------------------------------------------------------------------


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "peer.secret"
    path.write_bytes(SECRET + b"\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def wrong_secret_file(tmp_path):
    path = tmp_path / "wrong.secret"
    path.write_bytes(b"not the secret the others hold")
    path.chmod(0o600)
    return str(path)


def test_a_slave_with_the_secret_replicates_and_others_are_refused(tmp_path, secret_file, wrong_secret_file):
    master = start_master(tmp_path / "m", "--replicas", "r1", "--broker-role", "SYNC_MASTER",
                          "--peer-secret-file", secret_file, *SMALL)
    procs = [master]
    try:
        procs.append(start_replica(tmp_path / "r1", master, "r1", "--mapped-file-size-commit-log", str(64 * 1024),
                                   "--peer-secret-file", secret_file))
        wait_for_line(master, r"slave r1 connected")
        from reference.tests.test_bad_input import put_ok
        assert put_ok(master.port, 1), "SYNC_MASTER with an authenticated slave did not answer PUT_OK"
        # a slave with no secret, and one with the wrong one: each refused with one line
        with socket.create_connection(("127.0.0.1", master.ha_port), timeout=10) as sock:
            from reference.frames import Handshake
            from reference.record import CHAIN_START
            sock.sendall(encode(Handshake(0, CHAIN_START, "r1", 0)))
            assert closed_by_master(sock)
        logged(master, r"slave connection \d+ from 127\.0\.0\.1:\d+ closed: peer authentication: expected HELLO")
        procs.append(start_replica(tmp_path / "r2", master, "r1", "--mapped-file-size-commit-log", str(64 * 1024),
                                   "--peer-secret-file", wrong_secret_file))
        wait_for_line(procs[-1], r"closed: peer authentication failed: the server does not hold this port's secret")
        logged(master, r"slave connection \d+ from 127\.0\.0\.1:\d+ closed: closed by peer before it authenticated")
        assert put_ok(master.port, 2) and "Traceback" not in master.output()
    finally:
        for p in procs:
            p.stop()


def test_a_slave_with_a_secret_is_told_the_master_has_none(tmp_path, secret_file):
    master = start_master(tmp_path / "m", "--replicas", "r1", *SMALL)
    try:
        replica = start_replica(tmp_path / "r1", master, "r1", "--mapped-file-size-commit-log", str(64 * 1024),
                                "--peer-secret-file", secret_file)
        logged(master, r"closed: peer authentication: the peer asks to authenticate, and this port has no secret")
        wait_for_line(replica, r"closed: peer authentication: the server refused it: peer authentication: the peer "
                               r"asks to authenticate, and this port has no secret")
        replica.stop()
    finally:
        master.stop()


async def _call(port: int, secret: bytes | None) -> str:
    client = await ControllerClient.connect("127.0.0.1", port, secret=secret)
    try:
        return (await client.get_replica_info("broker-a"))["code"]
    finally:
        await client.close()


def test_the_controller_answers_only_clients_with_the_secret(tmp_path, secret_file):
    proc = start_controller(tmp_path, "--peer-secret-file", secret_file)
    try:
        assert asyncio.run(_call(proc.port, SECRET)) == "CONTROLLER_BROKER_METADATA_NOT_EXIST"
        with pytest.raises(PeerAuthError, match="expected HELLO"):
            asyncio.run(_call(proc.port, None))
        with pytest.raises(PeerAuthError, match="the server does not hold"):
            asyncio.run(_call(proc.port, b"a different secret, long enough"))
        logged(proc, r"connection \d+ from 127\.0\.0\.1:\d+ closed: peer authentication: expected HELLO")
        assert asyncio.run(_call(proc.port, SECRET)) == "CONTROLLER_BROKER_METADATA_NOT_EXIST"
        assert "Traceback" not in proc.output()
    finally:
        proc.stop()


def test_a_producer_port_is_not_an_authentication_port(tmp_path, secret_file):
    """Only the HA port authenticates: producers keep talking PUT at once."""
    master = start_master(tmp_path / "m", "--peer-secret-file", secret_file, *SMALL)
    try:
        with socket.create_connection(("127.0.0.1", master.port), timeout=10) as sock:
            sock.sendall(encode(Put(1, 1, b"no secret needed")))
            assert sock.recv(100)
    finally:
        master.stop()
