"""What a real master or slave process is started with, validated (attrs
validators, ConfigError naming the option and the fix): the store
configuration, addresses, the connection limit and idle timeout, the
fault-injection switches, and the trace file (reference/tracehook.py)."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from reference.config import StoreConfig
from reference.real.disk import WRITE_FAULTS
from reference.real.guard import FRAME_DEADLINE_MS_DEFAULT, PARTIAL_FRAME_BUDGET_BYTES_DEFAULT
from spec.config import ConfigError, ascii_digits

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_SEGMENT_BYTES = 4096


def _port(instance, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
        raise ConfigError(f"{_flag(attribute)} {value!r}: a port is 0..65535 (0: any free port)")


# The command-line flag of each option whose name differs from its attribute's.
_FLAGS = {"segment_size": "--mapped-file-size-commit-log", "directory": "--dir"}


def _flag(attribute) -> str:
    return _FLAGS.get(attribute.name, "--" + attribute.name.replace("_", "-"))


def positive_flag(instance, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{_flag(attribute)} {value!r}: must be a positive integer")


def _count_or_none(instance, attribute, value) -> None:
    if value is not None and (not isinstance(value, int) or value < 0):
        raise ConfigError(f"{_flag(attribute)} {value!r}: must be 0 or more")


def host_problem(host: str) -> str | None:
    """Why ``host`` cannot be a socket's host, or None.  The socket layer encodes a str host with
    IDNA: a lone surrogate (a command line's byte that is not UTF-8) was a TypeError at bind and a
    UnicodeError at connect, a label of over 63 characters a UnicodeError, not a refusal."""
    if not host or any(c.isspace() for c in host):
        return "expected an address such as 127.0.0.1"
    try:
        host.encode("idna")
    except UnicodeError as err:
        return f"not a host name or address ({err.__cause__ or err})"
    return None


def _host(instance, attribute, value) -> None:
    if not isinstance(value, str) or (problem := host_problem(value)) is not None:
        raise ConfigError(f"--host {value!r}: {problem if isinstance(value, str) else 'expected an address'}")


def _directory(instance, attribute, value) -> None:
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--dir {value}: exists and is not a directory")
    if (path / "commitlog").exists() and not (path / "commitlog").is_dir():
        raise ConfigError(f"--dir {value}: {path / 'commitlog'} exists and is not a directory")


def _replica_name(name: str, flag: str) -> None:
    if not NAME.match(name):
        raise ConfigError(f"{flag} {name!r}: a slave name is 1-64 letters, digits, '.', '_' or '-'")


def parse_replicas(text: str) -> tuple[str, ...]:
    """``--replicas r1,r2``: names, each once."""
    names = tuple(n.strip() for n in text.split(",")) if text.strip() else ()
    for n in names:
        _replica_name(n, "--replicas")
    if len(set(names)) != len(names):
        raise ConfigError(f"--replicas {text!r}: a slave is named twice")
    return names


def parse_address(text: str, flag: str) -> tuple[str, int]:
    """``HOST:PORT`` (HOST may be empty: 127.0.0.1)."""
    host, sep, port = text.rpartition(":")
    if not sep or not ascii_digits(port) or len(port) > 5 or not 0 < int(port) <= 65535:
        raise ConfigError(f"{flag} {text!r}: expected HOST:PORT with a port 1..65535")
    host = host.strip("[]") or "127.0.0.1"
    if any(c.isspace() for c in host):
        raise ConfigError(f"{flag} {text!r}: the host has white space in it")
    if (problem := host_problem(host)) is not None:
        raise ConfigError(f"{flag} {text!r}: {problem}")
    return host, int(port)


def _trace_path(instance, attribute, value) -> None:
    """--trace, --timeline: a file this process writes."""
    if value is None:
        return
    path = Path(value)
    what = _flag(attribute)
    if path.is_dir():
        raise ConfigError(f"{what} {value}: is a directory (expected a file to write the {what[2:]} to)")
    if not path.parent.is_dir():
        raise ConfigError(f"{what} {value}: the directory {path.parent} does not exist")


def _traceable_names(names: tuple[str, ...], flag: str) -> None:
    """A traced slave's name is a TLA+ model value (the trace checker's Replicas)."""
    from spec.traceformat import REPLICA_NAME

    for n in names:
        if not re.fullmatch(REPLICA_NAME, n):
            raise ConfigError(f"{flag} {n!r}: with --trace a slave's name is a letter or '_', then letters, "
                              "digits or '_' (TLC names it)")


MAX_HA_LAG_MS = 10_000


def is_loopback(host: str) -> bool:
    """Every address ``host`` names is this machine's loopback (127.0.0.0/8, ::1)."""
    import ipaddress
    import socket

    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return True                # no address at all: listen() will say what is wrong with it
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def require_secret(host: str, secret: bytes | None, port: str) -> None:
    """A port other hosts can reach authenticates its peers: refuse to start it without the secret."""
    if secret is None and not is_loopback(host):
        raise ConfigError(f"--host {host} is not a loopback address: the {port} port must authenticate its peers; "
                          "give --peer-secret-file FILE (the same secret on every broker and controller)")
MAX_CONNECTIONS = 65_536     # a server's connections at once, both ports together (each holds a descriptor)


def connections_flag(instance, attribute, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_CONNECTIONS:
        raise ConfigError(f"{_flag(attribute)} {value!r}: 1..{MAX_CONNECTIONS}")


@attrs.frozen
class MasterOptions:
    directory: Path = attrs.field(converter=Path, validator=_directory)
    config: StoreConfig
    replicas: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    host: str = attrs.field(default="127.0.0.1", validator=_host)
    port: int = attrs.field(default=10911, validator=_port)
    ha_port: int = attrs.field(default=10912, validator=_port)
    max_connections: int = attrs.field(default=1024, validator=connections_flag)
    idle_timeout_ms: int = attrs.field(default=120_000, validator=positive_flag)   # serverChannelMaxIdleTimeSeconds
    frame_deadline_ms: int = attrs.field(default=FRAME_DEADLINE_MS_DEFAULT, validator=positive_flag)
    partial_frame_budget_bytes: int = attrs.field(default=PARTIAL_FRAME_BUDGET_BYTES_DEFAULT, validator=positive_flag)
    inject_fsync_eio_after: int | None = attrs.field(default=None, validator=_count_or_none)
    inject_write_fault_after: int | None = attrs.field(default=None, validator=_count_or_none)
    inject_write_fault: str = "eio"
    trace: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path), validator=_trace_path)
    # Controller-driven failover (reference/real/node.py): the SyncStateSet (slave names) its acks
    # start from; None: --replicas.
    sync_state_set: tuple[str, ...] | None = None
    # Fault injection, a slow link: DATA to the slave named ``ha_lag_to`` leaves ``ha_lag_ms``
    # after the core sent it (what a master's unsent transfer backlog is when it dies).
    ha_lag_ms: int = 0
    ha_lag_to: str | None = None
    peer_secret: bytes | None = attrs.field(default=None, repr=False)   # the HA port authenticates slaves
    # auto: fdatasync through io_uring where the kernel allows (reference/real/uring.py); thread: on
    # the flush thread always (bench groupcommit measures the two side by side)
    flush_engine: str = attrs.field(default="auto", validator=attrs.validators.in_(("auto", "thread")))
    # bench: each request's moments (reference/real/timeline.py), written when the master stops
    timeline: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path), validator=_trace_path)

    def __attrs_post_init__(self) -> None:
        require_secret(self.host, self.peer_secret, "HA")
        if not isinstance(self.ha_lag_ms, int) or not 0 <= self.ha_lag_ms <= MAX_HA_LAG_MS:
            raise ConfigError(f"--inject-ha-lag-ms {self.ha_lag_ms!r}: 0..{MAX_HA_LAG_MS}")
        for name in self.replicas:
            _replica_name(name, "--replicas")
        if self.trace is not None:
            _traceable_names(self.replicas, "--replicas")
        if len(set(self.replicas)) != len(self.replicas):
            raise ConfigError(f"--replicas {','.join(self.replicas)}: a slave is named twice")
        if self.inject_write_fault not in WRITE_FAULTS:
            raise ConfigError(f"--inject-write-fault {self.inject_write_fault!r}: one of {', '.join(WRITE_FAULTS)}")
        if self.port == self.ha_port != 0:
            raise ConfigError(f"--port and --ha-port are both {self.port}: producers and slaves need two ports")
        cfg = self.config
        if cfg.sync_master and not self.replicas and self.sync_state_set is None:
            raise ConfigError("--broker-role SYNC_MASTER with no slave would answer every put SLAVE_NOT_AVAILABLE: "
                              "name the slaves with --replicas r1[,r2...], or use --broker-role ASYNC_MASTER")
        if cfg.sync_master and cfg.ack_policy == "AT_LEAST_K" and cfg.in_sync_replicas > 1 + len(self.replicas):
            raise ConfigError(f"--in-sync-replicas {cfg.in_sync_replicas} (master included) needs at least "
                              f"{cfg.in_sync_replicas - 1} slaves, --replicas names {len(self.replicas)}")


@attrs.frozen
class ReplicaOptions:
    directory: Path = attrs.field(converter=Path, validator=_directory)
    name: str
    master: tuple[str, int]
    segment_size: int = attrs.field(default=16 * 1024 * 1024, validator=positive_flag)
    heartbeat_interval_ms: int = attrs.field(default=5_000, validator=positive_flag)   # haSendHeartbeatInterval
    fsync_interval_ms: int = attrs.field(default=1_000, validator=positive_flag)
    peer_secret: bytes | None = attrs.field(default=None, repr=False)   # proves this slave to the master
    trace: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path), validator=_trace_path)
    timeline: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path), validator=_trace_path)
    # Fault injection, a slow link back: each ACK leaves ``ack_lag_ms`` after this slave queued it
    # (`bench ack` puts the round trip here, in the lightly loaded slave, instead of in a proxy)
    ack_lag_ms: int = 0

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.ack_lag_ms, int) or isinstance(self.ack_lag_ms, bool) \
                or not 0 <= self.ack_lag_ms <= MAX_HA_LAG_MS:
            raise ConfigError(f"--inject-ack-lag-ms {self.ack_lag_ms!r}: 0..{MAX_HA_LAG_MS}")
        _replica_name(self.name, "--name")
        if self.trace is not None:
            _traceable_names((self.name,), "--name")
        if self.segment_size < MIN_SEGMENT_BYTES:
            raise ConfigError(f"--mapped-file-size-commit-log {self.segment_size}: at least {MIN_SEGMENT_BYTES} "
                              f"bytes, and the same as the master's")


def check_segment_room(segment_bytes: int, body_bytes: int) -> None:
    """A test's segments: at least MIN_SEGMENT_BYTES, and room for a message and a blank record."""
    if segment_bytes < MIN_SEGMENT_BYTES or body_bytes + 20 + 64 > segment_bytes:
        raise ConfigError(f"--segment-bytes {segment_bytes}: at least {MIN_SEGMENT_BYTES}, and room for a message "
                          f"of {body_bytes} bytes")


# A --transient-store-pool chaos run whose writes crossed no segment roll exercised none of what it
# was asked to (the pool's commits across a roll): not a pass (reference/real/chaos.py, powerloss.py).
NO_ROLL_CROSSED = "no write crossed a segment roll with the transient store pool on: use a smaller --segment-bytes"
