"""The controller's metadata on disk: one record per change, framed with a
length and a CRC32, appended to one file and fsync'd; recovery keeps the
last record of each group.

A record is ``magic:u32 | length:u32 | crc32:u32 | payload`` (big-endian),
the CRC taken over the payload.  The payload is ``master_id:i64 |
master_epoch:u32 | sss_epoch:u32 | n_brokers:u16 | n_sss:u16 |
name_bytes:u16 | brokers:i64*n | sss:i64*n | group name (UTF-8)``.

Recovery reads records from the start and stops at the first one that is
torn (runs past the end of the file) or bad (wrong magic, length, CRC or
payload); the file is cut there (and fsync'd) so that a later append never
follows garbage, and the stop is reported with the file and the offset.
Only a record that was never fsync'd can be torn by a crash; a bad record
in the middle of the file means the disk lost acknowledged metadata, and
the report says how many bytes were dropped after it.

Two ways to use the store (seed 002's question, see ControllerCore):
``serial`` has one record in flight, so each fsync covers one record;
``pipelined`` appends records as they are decided and each fsync covers
all of those appended before it started (group commit).  The store code
is the same: ``MetadataFile.fsync_job`` covers whatever was written.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import attrs

from reference.failover.effects import MetadataRecord

MAGIC = 0xC0A70001
HEAD = struct.Struct(">III")
FIXED = struct.Struct(">qIIHHH")
MAX_RECORD_BYTES = 1 << 16
FILE_NAME = "controller.meta"


def encode(r: MetadataRecord) -> bytes:
    name = r.group.encode()
    assert len(name) < 1 << 16 and len(r.brokers) < 1 << 16 and len(r.sync_state_set) < 1 << 16, r
    payload = (FIXED.pack(r.master_id, r.master_epoch, r.sss_epoch, len(r.brokers), len(r.sync_state_set), len(name))
               + struct.pack(f">{len(r.brokers)}q", *r.brokers)
               + struct.pack(f">{len(r.sync_state_set)}q", *r.sync_state_set) + name)
    assert len(payload) <= MAX_RECORD_BYTES, len(payload)
    return HEAD.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


class RecordError(ValueError):
    """A payload whose CRC matched but whose contents do not parse."""


def decode_payload(payload: bytes) -> MetadataRecord:
    if len(payload) < FIXED.size:
        raise RecordError(f"payload of {len(payload)} bytes is shorter than the fixed part ({FIXED.size})")
    master_id, master_epoch, sss_epoch, nb, ns, nn = FIXED.unpack_from(payload)
    if len(payload) != FIXED.size + 8 * (nb + ns) + nn:
        raise RecordError(f"payload of {len(payload)} bytes does not hold {nb} brokers, {ns} SSS members "
                          f"and a {nn}-byte name")
    brokers = struct.unpack_from(f">{nb}q", payload, FIXED.size)
    sss = struct.unpack_from(f">{ns}q", payload, FIXED.size + 8 * nb)
    try:
        group = payload[FIXED.size + 8 * (nb + ns):].decode()
    except UnicodeDecodeError:
        raise RecordError("group name is not UTF-8") from None
    return MetadataRecord(group, tuple(brokers), master_id, master_epoch, tuple(sss), sss_epoch)


@attrs.frozen
class MetadataScan:
    records: tuple[MetadataRecord, ...]
    valid_end: int                 # bytes of whole, good records from the start
    problem: str | None            # why the scan stopped before the end, naming the offset


def scan(buf: bytes, name: str = FILE_NAME) -> MetadataScan:
    """The good records at the start of ``buf``.

    post: 0 <= __return__.valid_end <= len(buf)
    post: (__return__.problem is None) == (__return__.valid_end == len(buf))
    """
    records = []
    at = 0
    problem = None
    while at < len(buf):
        if len(buf) - at < HEAD.size:
            problem = f"{name} offset {at}: torn record header ({len(buf) - at} of {HEAD.size} bytes)"
            break
        magic, length, crc = HEAD.unpack_from(buf, at)
        if magic != MAGIC:
            problem = f"{name} offset {at}: bad record magic {magic:#010x}"
            break
        if length > MAX_RECORD_BYTES:
            problem = f"{name} offset {at}: record length {length} exceeds {MAX_RECORD_BYTES}"
            break
        if at + HEAD.size + length > len(buf):
            problem = (f"{name} offset {at}: torn record ({len(buf) - at - HEAD.size} of {length} payload bytes "
                       "on disk)")
            break
        payload = bytes(buf[at + HEAD.size: at + HEAD.size + length])
        if zlib.crc32(payload) != crc:
            problem = f"{name} offset {at}: record CRC mismatch"
            break
        try:
            records.append(decode_payload(payload))
        except RecordError as err:
            problem = f"{name} offset {at}: {err}"
            break
        at += HEAD.size + length
    return MetadataScan(tuple(records), at, problem)


def latest(records) -> list[MetadataRecord]:
    """The last record of each group, in the order the groups first appeared."""
    last: dict[str, MetadataRecord] = {}
    for r in records:
        last[r.group] = r
    return list(last.values())


@attrs.frozen
class MetadataRecovery:
    path: Path
    records: tuple[MetadataRecord, ...]      # every good record, in file order
    groups: tuple[MetadataRecord, ...]       # the last record of each group
    problem: str | None
    dropped_bytes: int


class MetadataFile:
    """The real store: one append-only file, os.write then fdatasync (from a worker thread)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self.fd: int | None = None
        self.written_bytes = 0

    def recover(self) -> MetadataRecovery:
        """Read the file, cut it after its last good record, compact it (one record per
        group, written to a new file that replaces the old one atomically) and open it
        for appends."""
        self.directory.mkdir(parents=True, exist_ok=True)
        buf = self.path.read_bytes() if self.path.exists() else b""
        s = scan(buf, str(self.path))
        groups = latest(s.records)
        if s.problem is not None or len(groups) < len(s.records):
            self._rewrite(groups)
        elif not self.path.exists():
            self._rewrite([])
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.written_bytes = os.fstat(self.fd).st_size
        return MetadataRecovery(self.path, s.records, tuple(groups), s.problem, len(buf) - s.valid_end)

    def _rewrite(self, records: list[MetadataRecord]) -> None:
        tmp = self.path.with_name(FILE_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            data = b"".join(encode(r) for r in records)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def append(self, data: bytes) -> None:
        """Into the page cache; durable only after the next fsync."""
        assert self.fd is not None, "recover() first"
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        self.written_bytes += len(data)

    def fsync(self) -> None:
        assert self.fd is not None, "recover() first"
        os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
