"""Commit-log records: encoding, the blank record that pads a segment end,
the chain hash of a log prefix, and the CRC recovery scan.  Pure functions.

A message record is ``total_size:u32 | magic:u32 | crc:u32 | key:u64 | body``
(big-endian), ``crc`` being CRC32 over key and body.  A record never spans
segments: when it does not fit, the rest of the segment is one BLANK record
(RocketMQ's END_OF_FILE path) and the message goes to the next segment.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable

import attrs

MESSAGE_MAGIC = 0xDAA320A7   # RocketMQ's MESSAGE_MAGIC_CODE
BLANK_MAGIC = 0xCBD43194     # RocketMQ's BLANK_MAGIC_CODE
HEADER = struct.Struct(">IIIQ")
HEADER_SIZE = HEADER.size                # 20
CRC_COVERED_FROM = 12                    # the CRC covers the key and the body: bytes 12 on of a record
END_FILE_MIN_BLANK_LENGTH = 8            # room always left for a blank record's size and magic
CHAIN_START = bytes(16)


def record_size(body_len: int) -> int:
    return HEADER_SIZE + body_len


def encode(key: int, body: bytes) -> bytes:
    assert 0 <= key < 2**64, key
    crc = zlib.crc32(body, zlib.crc32(key.to_bytes(8, "big")))
    return HEADER.pack(HEADER_SIZE + len(body), MESSAGE_MAGIC, crc, key) + body


def blank(length: int) -> bytes:
    """The padding that ends a segment: ``length`` bytes, size and magic first."""
    assert length >= END_FILE_MIN_BLANK_LENGTH, length
    return struct.pack(">II", length, BLANK_MAGIC) + bytes(length - 8)


_blake2b = hashlib.blake2b
_OFFSET = struct.Struct(">Q")      # offset.to_bytes(8, "big"): the same bytes (an offset is never negative)


def chain_next(previous: bytes, offset: int, header: bytes) -> bytes:
    """Hash of the log prefix ending with the record whose header is given.

    Master and replica both keep it at every record end, so the handshake can
    tell whether a replica's log is a prefix of the master's (same records at
    the same offsets) from one 16-byte value."""
    return _blake2b(previous + _OFFSET.pack(offset) + header[:12], digest_size=16).digest()


@attrs.frozen
class Record:
    offset: int      # global offset of the first byte
    size: int
    crc: int
    key: int

    @property
    def end(self) -> int:
        return self.offset + self.size


UNWRITTEN = "unwritten"       # read_head: a size and magic of zero, space no record was written to
BLANK = "blank"               # read_head: the blank record that pads the segment to its end


def read_head(buf, pos: int, size: int) -> int | str:
    """The one reading of a record header, for recovery (``scan_segment``), a slave's
    stream (reference/replica.py) and a master's read-back: the size of the message record
    at ``pos`` of a segment of ``size`` bytes, UNWRITTEN, BLANK, or what is wrong with it
    (a sentence without the offset, which the caller knows).  A message record leaves room
    for a blank record's size and magic after it (END_FILE_MIN_BLANK_LENGTH): one in those
    last bytes would be acknowledged by a slave and dropped by its own restart.

    pre: 0 <= pos and pos + END_FILE_MIN_BLANK_LENGTH <= size
    """
    assert 0 <= pos and pos + END_FILE_MIN_BLANK_LENGTH <= size, (pos, size)
    total, magic = struct.unpack_from(">II", buf, pos)
    if total == 0 and magic == 0:
        return UNWRITTEN
    if magic == BLANK_MAGIC:
        return BLANK if total == size - pos else f"a blank record of size {total} with {size - pos} bytes left"
    if magic != MESSAGE_MAGIC:
        return f"bad magic 0x{magic:08x}"
    if total < HEADER_SIZE or pos + total + END_FILE_MIN_BLANK_LENGTH > size:
        return f"impossible size {total} with {size - pos} bytes left in the segment"
    return total


def record_crc_ok(buf, pos: int, total: int) -> bool:
    """Whether the message record [pos, pos + total) of ``buf`` has the CRC its header says."""
    return zlib.crc32(memoryview(buf)[pos + CRC_COVERED_FROM: pos + total]) == HEADER.unpack_from(buf, pos)[2]


@attrs.frozen
class SegmentScan:
    records: tuple[Record, ...]
    valid_end: int           # global offset after the last valid record (or after the blank)
    ends_with_blank: bool    # the segment is complete: the log continues in the next one
    problem: str | None      # why the scan stopped early (a torn or corrupt record), or None


def scan_segment(buf: bytes, base: int, keep_torn: bool = False) -> SegmentScan:
    """Read a segment's records from the start; stop at unwritten space, a
    blank record, or the first record whose length, magic or CRC is wrong.

    ``keep_torn`` is the BugRecoveryKeepsTorn defect: the first bad record
    is accepted as if it were whole (and the scan stops after it).

    pre: base >= 0
    post: base <= __return__.valid_end <= base + len(buf)
    post: not __return__.records or __return__.records[0].offset == base
    post: all(a.end == b.offset for a, b in zip(__return__.records, __return__.records[1:]))
    post: all(r.size >= HEADER_SIZE and r.end <= __return__.valid_end for r in __return__.records)
    post: __return__.problem is None or not __return__.ends_with_blank
    """
    view = buf                    # bytes or bytearray (slices copy, but recovery runs once per start)
    size = len(view)
    pos = 0
    records: list[Record] = []
    problem = None
    while pos + END_FILE_MIN_BLANK_LENGTH <= size:
        head = read_head(view, pos, size)
        if head == UNWRITTEN:
            break
        if head == BLANK:
            return SegmentScan(tuple(records), base + size, True, None)
        if isinstance(head, str):
            problem = f"the record at offset {base + pos}: {head}"
            break
        total = head
        _, _, crc, key = HEADER.unpack_from(view, pos)
        if not record_crc_ok(view, pos, total):
            problem = f"CRC mismatch in the record at offset {base + pos} (torn or corrupt)"
            if keep_torn:
                records.append(Record(base + pos, total, crc, key))
                pos += total
            break
        records.append(Record(base + pos, total, crc, key))
        pos += total
    return SegmentScan(tuple(records), base + pos, False, problem)


@attrs.frozen
class RecoveryReport:
    records: tuple[Record, ...]
    end_offset: int
    dropped: tuple[str, ...]     # one line per dropped region: where and why


@attrs.frozen
class Checkpoint:
    """What a log prefix ending at a segment start looks like: how many records it
    holds and its chain hash.  One per segment: a bounded index answers for an old
    offset by reading that segment from here on."""
    start: int
    records: int
    chain: bytes


@attrs.frozen
class LogScan:
    """The result of a streaming CRC recovery: only what a bounded log keeps in
    memory (the checkpoints and the last segment), never every record."""
    end_offset: int
    record_count: int
    dropped: tuple[str, ...]
    checkpoints: tuple[Checkpoint, ...]      # every segment start the log reached, in order
    tail_start: int                          # the segment holding the end (== end at a boundary)
    tail_records: tuple[Record, ...]         # the records of that segment
    tail_bytes: bytes                        # that segment's bytes up to the end


# (offset, header, end, key, (chain before, chain after)): the scan's chain hashes around the record
OnRecord = Callable[[int, bytes, int, int, tuple[bytes, bytes]], None]


def scan_log(starts: list[int], read: Callable[[int], bytes], segment_size: int, keep_torn: bool = False,
             on_record: OnRecord | None = None, resume: tuple[Checkpoint, ...] = ()) -> LogScan:
    """CRC recovery over the segments named by ``starts``, reading one at a time
    (``read(start)`` gives its bytes): the log ends at the first bad record;
    everything after it (in that and later segments) is dropped.  Memory: one
    segment.  ``on_record`` sees every record kept from where the scan starts (the
    simulator's ghost index), with the chain hashes before and after it (an index that
    holds the same chain before it need not hash the record again).

    ``resume``: the checkpoints (from 0, one per segment) of a prefix of whole segments
    that an earlier scan found valid and whose bytes the caller knows unchanged since
    (the simulated disk counts its writes): the scan starts at the last of them, with
    its record count and chain hash, and reads only the segments from there on, as
    RocketMQ's recovery starts from its checkpoint rather than from the first file."""
    dropped: list[str] = []
    checkpoints = list(resume) if resume else [Checkpoint(0, 0, CHAIN_START)]
    first = checkpoints[-1]
    assert first.start % segment_size == 0 and first.start == (len(checkpoints) - 1) * segment_size, first
    chain, count, end, expected = first.chain, first.records, first.start, first.start
    tail: tuple[Record, ...] = ()
    tail_bytes = b""
    stopped = False
    for start in sorted(starts):
        if start < first.start:
            continue                    # in the valid prefix: not read again
        data = read(start)
        if stopped or start != expected:
            if any(data):
                why = "after the end of the log" if stopped else f"not contiguous (expected segment {expected})"
                dropped.append(f"segment {start}: {len(data)} bytes dropped, {why}")
            stopped = True
            continue
        scan = scan_segment(data, start, keep_torn)
        for rec in scan.records:
            pos = rec.offset - start
            header = bytes(data[pos: pos + 12])
            before, chain = chain, chain_next(chain, rec.offset, header)
            if on_record is not None:
                on_record(rec.offset, header, rec.end, rec.key, (before, chain))
        count += len(scan.records)
        end = scan.valid_end
        tail, tail_bytes = scan.records, bytes(data[: end - start])
        if scan.ends_with_blank:
            expected = start + segment_size
            checkpoints.append(Checkpoint(expected, count, chain))
            continue
        stopped = True
        rest = bytes(data[end - start:])
        if scan.problem is not None or any(rest):
            dropped.append(f"segment {start}: bytes {end}..{start + len(data)} dropped: "
                           f"{scan.problem or 'garbage after the last record'}")
    # A log ends at a segment start only after that segment's blank (which added its checkpoint)
    # or where the scan began: a message record always leaves room for a blank after it.
    tail_start = end - end % segment_size
    if tail_start == end:
        tail, tail_bytes = (), b""
    assert checkpoints[-1].start == tail_start, (checkpoints[-1], tail_start)
    return LogScan(end, count, tuple(dropped), tuple(checkpoints), tail_start, tail, tail_bytes)


def recover_log(segments: dict[int, bytes], segment_size: int, keep_torn: bool = False) -> RecoveryReport:
    """The same recovery over segments held in memory, with every record (tests, tools)."""
    records: list[Record] = []
    scan = scan_log(list(segments), segments.__getitem__, segment_size, keep_torn,
                    on_record=lambda offset, header, end, key, chains: records.append(
                        Record(offset, end - offset, HEADER.unpack_from(header + bytes(8))[2], key)))
    return RecoveryReport(tuple(records), scan.end_offset, scan.dropped)
