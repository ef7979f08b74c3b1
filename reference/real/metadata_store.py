"""The controller runtime's metadata store: where ControllerCore's
PersistMetadata records go, and where a restarted controller finds them.

A store has three jobs, and the runtime (controller_server.py) calls them
in this order on its loop thread:

* ``recover()`` — the last record of each broker group, and one line
  saying where they came from (printed at start);
* ``stage(record)`` — take a record in decision order (not yet durable);
* ``sync_job()`` — a blocking callable, run on a worker thread, that
  makes every record staged before the call durable or raises OSError.
  Its return is the runtime's ``metadata_durable``; a raise fails every
  held reply and stops the controller with exit 3.

Two implementations: ``FileStore`` (one local file, fdatasync; the
default) and ``EtcdStore`` (reference/real/etcd_store.py: a key per group,
compare-and-set transactions through Raft).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs

from reference.failover.effects import MetadataRecord
from reference.failover.metadata import MetadataFile, encode
from spec.config import ascii_digits

# The etcd store's options, here so that the command line can check them without importing grpc.
ETCD_BUG_NAMES = ("BugEtcdNoCompare",)
ETCD_TIMEOUT_MS_DEFAULT = 5_000
MAX_ENDPOINTS = 16


@attrs.frozen
class StoreRecovery:
    groups: tuple[MetadataRecord, ...]      # the last durable record of each group
    summary: str                            # one line: how many, from where, what was cut


class MetadataStore(Protocol):
    where: str                              # names the store in error lines (a path, the endpoints)

    def recover(self) -> StoreRecovery: ...

    def stage(self, record: MetadataRecord) -> None: ...

    def sync_job(self) -> Callable[[], None]: ...

    def close(self) -> None: ...


class FileStore:
    """MetadataFile behind the store interface: stage = append to the page cache, the
    sync job = one fdatasync covering every append before it (group commit)."""

    def __init__(self, directory: Path) -> None:
        self.file = MetadataFile(directory)
        self.where = str(self.file.path)

    def recover(self) -> StoreRecovery:
        r = self.file.recover()
        summary = (f"recovered {len(r.groups)} broker groups ({len(r.records)} records) from {r.path}"
                   + (f"; cut at {r.problem}, {r.dropped_bytes} bytes dropped" if r.problem else ""))
        return StoreRecovery(r.groups, summary)

    def stage(self, record: MetadataRecord) -> None:
        self.file.append(encode(record))

    def sync_job(self) -> Callable[[], None]:
        return self.file.fsync

    def close(self) -> None:
        self.file.close()


def _host_name(host: str) -> bool:
    """A host a socket can be given (the socket layer encodes a str host with IDNA)."""
    try:
        host.encode("idna")
    except UnicodeError:
        return False
    return bool(host) and not any(c.isspace() for c in host)


def parse_endpoints(text: str) -> list[tuple[str, int]]:
    """``host:port,host:port,...`` → [(host, port)]; ValueError naming the bad item."""
    out = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not ascii_digits(port) or len(port) > 5 or not 0 < int(port) <= 65535:
            raise ValueError(f"--etcd-endpoints item {item.strip()!r}: expected host:port with a port 1..65535")
        if not _host_name(host.strip("[]")):      # '[:1' left no host; a lone surrogate could not be sent
            raise ValueError(f"--etcd-endpoints item {item.strip()!r}: expected a host name or address before the port")
        out.append((host.strip("[]"), int(port)))
    if len(out) > MAX_ENDPOINTS:
        raise ValueError(f"--etcd-endpoints: {len(out)} endpoints, at most {MAX_ENDPOINTS}")
    if len(set(out)) != len(out):
        raise ValueError("--etcd-endpoints: an endpoint is listed twice")
    return out
