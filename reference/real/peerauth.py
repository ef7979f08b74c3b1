"""Peer authentication for the HA and controller ports: a shared secret and a
challenge-response at the start of each connection, as SASL/SCRAM plays that
role for Kafka's brokers (a proof of the secret, never the secret, crosses
the wire; each side proves it to the other; nonces make every proof good for
one connection only).  Sans-IO: the runtimes feed it frames and send what it
returns.

    client -> server   HELLO      client nonce (16 bytes)
    server -> client   CHALLENGE  server nonce, HMAC(secret, "server" | service | client nonce | server nonce)
    client -> server   PROOF      HMAC(secret, "client" | service | server nonce | client nonce)

The client checks the server's MAC before it sends its proof (so it never
talks protocol to a server without the secret); the server lets no protocol
frame through before the proof.  ``service`` ("ha", "controller") keeps a
proof for one port from being replayed on the other.  The frames use the
project's framing (reference/frames.py) with type bytes neither protocol
uses, so an authenticating peer meeting a non-authenticating one is told so
in one line instead of a decode error.

Off by default on loopback; a server that binds any other address refuses to
start without a secret (reference/real/options.py ``require_secret``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from collections.abc import Callable
from pathlib import Path

import attrs

from reference.frames import frame_bytes
from spec.config import ConfigError

HELLO, CHALLENGE, PROOF = 32, 33, 34
NONCE_BYTES = 16
MAC_BYTES = 32
MIN_SECRET_BYTES = 16
MAX_SECRET_BYTES = 4096
SERVICES = ("ha", "controller")


REFUSAL = "peer authentication"     # how every refusal of this layer begins (a peer's ERROR text too)


class AuthError(Exception):
    """Authentication failed; the message says why (one log line)."""


@attrs.frozen
class AuthFrame:
    kind: int
    payload: bytes


def auth_aware(decode: Callable[[int, bytes], object]) -> Callable[[int, bytes], object]:
    """A protocol's decoder that also passes the three authentication frames through."""
    def decode_with_auth(kind: int, payload: bytes):
        if kind in (HELLO, CHALLENGE, PROOF):
            return AuthFrame(kind, payload)
        return decode(kind, payload)
    return decode_with_auth


def load_secret(path: Path | str, flag: str = "--peer-secret-file") -> bytes:
    """The shared secret, from a file only its owner may read (as ssh insists for its keys)."""
    path = Path(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{flag} {path}: not a regular file")
        if st.st_mode & 0o077:
            raise ConfigError(f"{flag} {path}: readable by others (mode {stat.S_IMODE(st.st_mode):o}); "
                                  f"chmod 600 it")
        secret = path.read_bytes().rstrip(b"\r\n")
    except FileNotFoundError:
        raise ConfigError(f"{flag} {path}: no such file") from None
    except PermissionError:
        raise ConfigError(f"{flag} {path}: cannot be read (permission denied)") from None
    if not MIN_SECRET_BYTES <= len(secret) <= MAX_SECRET_BYTES:
        raise ConfigError(f"{flag} {path}: the secret is {len(secret)} bytes; {MIN_SECRET_BYTES} to "
                              f"{MAX_SECRET_BYTES} are needed")
    return secret


def _mac(secret: bytes, label: bytes, service: str, first: bytes, second: bytes) -> bytes:
    return hmac.new(secret, b"ackorder-peer-auth-1|" + label + b"|" + service.encode() + b"|" + first + second,
                    hashlib.sha256).digest()


def _expect(frame: object, kind: int, size: int, what: str) -> bytes:
    # A refusal (the HA port's REFUSE, the controller's ERROR) says why in its own words.
    if (why := getattr(frame, "reason", None) or getattr(frame, "error", None)) is not None:
        raise AuthError(f"{REFUSAL}: the server refused it: {why}")
    if not isinstance(frame, AuthFrame) or frame.kind != kind:
        name = {HELLO: "HELLO", CHALLENGE: "CHALLENGE", PROOF: "PROOF"}.get(getattr(frame, "kind", None),
                                                                           type(frame).__name__)
        raise AuthError(f"{REFUSAL}: expected {what}, got {name}")
    if len(frame.payload) != size:
        raise AuthError(f"{REFUSAL}: {what} has {len(frame.payload)} bytes, expected {size}")
    return frame.payload


class _Side:
    """What both sides hold: the secret, the service it is bound to, and a fresh nonce."""

    def __init__(self, secret: bytes, service: str, nonce: bytes | None = None) -> None:
        assert service in SERVICES and len(secret) >= MIN_SECRET_BYTES
        self.secret, self.service = secret, service
        self.nonce = nonce if nonce is not None else os.urandom(NONCE_BYTES)
        assert len(self.nonce) == NONCE_BYTES
        self.done = False


class ServerAuth(_Side):
    """The server's side: waits for HELLO, answers CHALLENGE, checks PROOF."""

    def __init__(self, secret: bytes, service: str, nonce: bytes | None = None) -> None:
        super().__init__(secret, service, nonce)
        self._client_nonce: bytes | None = None

    def receive(self, frame: object) -> bytes | None:
        """One frame from the client before it is authenticated: the bytes to send back (or None).
        Raises AuthError naming what was wrong."""
        assert not self.done
        if self._client_nonce is None:
            self._client_nonce = _expect(frame, HELLO, NONCE_BYTES, "HELLO (this port authenticates its peers)")
            return frame_bytes(CHALLENGE, self.nonce + _mac(self.secret, b"server", self.service,
                                                            self._client_nonce, self.nonce))
        proof = _expect(frame, PROOF, MAC_BYTES, "PROOF")
        if not hmac.compare_digest(proof, _mac(self.secret, b"client", self.service, self.nonce, self._client_nonce)):
            raise AuthError(f"{REFUSAL} failed: the peer does not hold this port's secret")
        self.done = True
        return None


class ClientAuth(_Side):
    """The client's side: HELLO first (``hello``), then checks CHALLENGE and answers PROOF."""

    def hello(self) -> bytes:
        return frame_bytes(HELLO, self.nonce)

    def receive(self, frame: object) -> bytes:
        """The server's CHALLENGE: the PROOF to send.  Raises AuthError if the server does not
        hold the secret (or answers something else)."""
        assert not self.done
        payload = _expect(frame, CHALLENGE, NONCE_BYTES + MAC_BYTES,
                          "CHALLENGE (the server may not authenticate its peers: is it started with the secret?)")
        server_nonce, mac = payload[:NONCE_BYTES], payload[NONCE_BYTES:]
        if not hmac.compare_digest(mac, _mac(self.secret, b"server", self.service, self.nonce, server_nonce)):
            raise AuthError(f"{REFUSAL} failed: the server does not hold this port's secret")
        self.done = True
        return frame_bytes(PROOF, _mac(self.secret, b"client", self.service, server_nonce, self.nonce))


def unexpected(frame: AuthFrame) -> str:
    """Why a connection with no authentication in progress must close on an authentication frame."""
    if frame.kind == HELLO:
        return f"{REFUSAL}: the peer asks to authenticate, and this port has no secret (start it with --peer-secret-file)"
    return f"{REFUSAL}: an authentication frame out of place"
