"""EpochFileCache: which master epoch wrote which range of the commit log,
and its checkpoint encoding.  Pure: no file is touched here
(reference/real/epochfile.py writes and reads the checkpoint for real).

An entry ``(epoch, start_offset)`` says epoch ``epoch`` starts at
``start_offset``; it ends where the next entry starts, or at the log end for
the last one.  Offsets are in the log's unit: bytes in the reference store,
records in the spec (tla/AckOrderFailoverFunctions.tla), whose operators
these methods refine one by one (RocketMQ: store/ha/autoswitch/EpochFileCache).

Checkpoint file (RocketMQ's CheckpointFile keeps a count, the entries and a
CRC in text; this one is binary, big-endian, so an error can name a byte):

    magic:u32 | count:u32 | count x (epoch:u64 | start_offset:u64) | crc32:u32

``crc32`` covers every byte before it.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

import attrs

EPOCH_FILE_MAGIC = 0x45504348            # "EPCH"
MAX_EPOCH_ENTRIES = 65_536               # bound on a cache and on a file's count
_HEAD = struct.Struct(">II")
_ENTRY = struct.Struct(">QQ")
_CRC = struct.Struct(">I")


class EpochEntry(NamedTuple):
    """(epoch, start_offset); a tuple, so it compares equal to the spec's pairs."""
    epoch: int
    start_offset: int


class EpochFileError(ValueError):
    """A checkpoint that cannot be trusted; the message names the file and the byte offset."""

    def __init__(self, source: str, offset_bytes: int, problem: str) -> None:
        super().__init__(f"{source}: at byte {offset_bytes}: {problem}")
        self.source = source
        self.offset_bytes = offset_bytes
        self.problem = problem


def _ordered(a: EpochEntry, b: EpochEntry) -> bool:
    """E1: b may follow a (epoch strictly larger, start not smaller)."""
    return b.epoch > a.epoch and b.start_offset >= a.start_offset


@attrs.frozen
class EpochFileCache:
    """The entries in file order.  Immutable: every change returns a new cache.

    In order (E1) unless BugEpochAppendUnchecked let a bad entry in; ``ordered``
    says which, and every operation but ``append_entry`` keeps it."""

    entries: tuple[EpochEntry, ...] = attrs.field(
        default=(), converter=lambda es: tuple(EpochEntry(int(e[0]), int(e[1])) for e in es))

    def __attrs_post_init__(self) -> None:
        assert len(self.entries) <= MAX_EPOCH_ENTRIES, len(self.entries)
        assert all(e.epoch >= 0 and e.start_offset >= 0 for e in self.entries), self.entries

    @property
    def ordered(self) -> bool:
        return all(_ordered(a, b) for a, b in zip(self.entries, self.entries[1:]))

    def __len__(self) -> int:
        return len(self.entries)

    # --- lookups -----------------------------------------------------------------------

    def last_entry(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    def last_epoch(self) -> int:
        """LastEpoch(c): 0 for an empty cache."""
        return self.entries[-1].epoch if self.entries else 0

    def last_start(self) -> int:
        """LastStart(c): 0 for an empty cache."""
        return self.entries[-1].start_offset if self.entries else 0

    def covering_index(self, offset: int) -> int | None:
        """CoveringIndex(c, o), 0-based: the last entry starting at or before ``offset``
        (None: no entry covers it).  An empty epoch followed by one with the same
        start covers nothing."""
        found = None
        for k, e in enumerate(self.entries):
            if e.start_offset <= offset:
                found = k
        return found

    def covering_entry(self, offset: int) -> EpochEntry | None:
        k = self.covering_index(offset)
        return None if k is None else self.entries[k]

    def epoch_at(self, offset: int) -> int:
        """EpochAt(c, o): the epoch that wrote ``offset`` (0: none)."""
        e = self.covering_entry(offset)
        return 0 if e is None else e.epoch

    def entry_end(self, k: int, log_end_offset: int) -> int:
        """EntryEnd(c, k, logEnd) for 0-based k: the next entry's start, or the log end."""
        assert 0 <= k < len(self.entries), (k, len(self.entries))
        return log_end_offset if k == len(self.entries) - 1 else self.entries[k + 1].start_offset

    def index_of(self, entry: EpochEntry) -> int | None:
        """Where this exact (epoch, start) entry is (None: not here)."""
        for k, e in enumerate(self.entries):
            if e == entry:
                return k
        return None

    def find_epoch(self, epoch: int) -> int | None:
        """The (last) index of an entry of ``epoch`` (findEpochEntryByEpoch)."""
        found = None
        for k, e in enumerate(self.entries):
            if e.epoch == epoch:
                found = k
        return found

    def end_offset_of_epoch(self, epoch: int, log_end_offset: int) -> int | None:
        """Where ``epoch`` ends in a log ending at ``log_end_offset`` (None: not here)."""
        k = self.find_epoch(epoch)
        return None if k is None else self.entry_end(k, log_end_offset)

    # --- changes -----------------------------------------------------------------------

    def can_append(self, entry: EpochEntry) -> bool:
        """E1 (appendEntry's check): an empty cache takes anything; else the epoch must be
        strictly larger and the start offset not smaller than the last entry's.  (RocketMQ
        also refuses an equal start; the spec keeps such an entry, and so do we.)"""
        last = self.last_entry()
        return last is None or _ordered(last, EpochEntry(*entry))

    def append_entry(self, entry: EpochEntry | tuple[int, int], *,
                     bugs: frozenset[str] = frozenset()) -> EpochFileCache:
        """AppendEntry(c, e): the cache with ``entry`` appended, or unchanged when E1 refuses
        it.  BugEpochAppendUnchecked appends without the check."""
        entry = EpochEntry(*entry)
        if "BugEpochAppendUnchecked" in bugs or self.can_append(entry):
            out = EpochFileCache(self.entries + (entry,))
            assert "BugEpochAppendUnchecked" in bugs or not self.ordered or out.ordered
            return out
        return self

    def truncate_suffix_by_offset(self, offset: int) -> EpochFileCache:
        """TruncateSuffixByOffset(c, o): drop the entries starting at or after ``offset``."""
        return EpochFileCache(tuple(e for e in self.entries if e.start_offset < offset))

    def truncate_suffix_by_epoch(self, epoch: int) -> EpochFileCache:
        """TruncateSuffixByEpoch(c, ep): drop the entries of ``epoch`` or later."""
        return EpochFileCache(tuple(e for e in self.entries if e.epoch < epoch))

    def truncate_beyond(self, offset: int) -> EpochFileCache:
        """TruncateBeyond(c, o): recovery after a log shrank to ``offset`` keeps the
        entries that start at or before it (an epoch may start exactly at the end)."""
        return EpochFileCache(tuple(e for e in self.entries if e.start_offset <= offset))


# --- the checkpoint encoding ----------------------------------------------------------------

def encode_epoch_file(cache: EpochFileCache) -> bytes:
    """The checkpoint bytes of a cache.

    post: decode_epoch_file(__return__, "x", check_order=False) == cache"""
    body = _HEAD.pack(EPOCH_FILE_MAGIC, len(cache.entries))
    body += b"".join(_ENTRY.pack(e.epoch, e.start_offset) for e in cache.entries)
    return body + _CRC.pack(zlib.crc32(body))


def encoded_size_bytes(count: int) -> int:
    return _HEAD.size + count * _ENTRY.size + _CRC.size


def decode_epoch_file(data: bytes, source: str, *, check_order: bool = True) -> EpochFileCache:
    """Parse a checkpoint; EpochFileError naming ``source`` and the byte offset when it is
    torn (shorter than its count says), too long, of a bad magic or count, of a bad CRC,
    or (``check_order``) out of E1 order.  A file written under BugEpochAppendUnchecked may
    hold disordered entries: its reader passes ``check_order=False``."""
    if len(data) < _HEAD.size:
        raise EpochFileError(source, len(data), f"torn: {len(data)} bytes, shorter than the {_HEAD.size}-byte header")
    magic, count = _HEAD.unpack_from(data, 0)
    if magic != EPOCH_FILE_MAGIC:
        raise EpochFileError(source, 0, f"bad magic {magic:#010x}, expected {EPOCH_FILE_MAGIC:#010x}: not an epoch file")
    if count > MAX_EPOCH_ENTRIES:
        raise EpochFileError(source, 4, f"bad count {count}: more than {MAX_EPOCH_ENTRIES} entries")
    want = encoded_size_bytes(count)
    if len(data) < want:
        raise EpochFileError(source, len(data), f"torn: {len(data)} bytes, the count {count} needs {want}")
    if len(data) > want:
        raise EpochFileError(source, want, f"{len(data) - want} bytes after the CRC: the count {count} is wrong")
    crc_at = want - _CRC.size
    (stored,) = _CRC.unpack_from(data, crc_at)
    if stored != (actual := zlib.crc32(data[:crc_at])):
        raise EpochFileError(source, crc_at, f"bad CRC {stored:#010x}, the content's is {actual:#010x}")
    entries = [EpochEntry(*_ENTRY.unpack_from(data, _HEAD.size + k * _ENTRY.size)) for k in range(count)]
    if check_order:
        for k in range(1, count):
            if not _ordered(entries[k - 1], entries[k]):
                raise EpochFileError(source, _HEAD.size + k * _ENTRY.size,
                                     f"entry {k} {tuple(entries[k])} does not follow {tuple(entries[k - 1])} (E1)")
    return EpochFileCache(tuple(entries))


def epoch_file_durable(bugs: frozenset[str]) -> bool:
    """Whether the epoch file is fsynced when written (BugEpochFileNotDurable: not, B21)."""
    return "BugEpochFileNotDurable" not in bugs


def epoch_file_checks_order(bugs: frozenset[str]) -> bool:
    """Whether a loaded epoch file must be in E1 order (BugEpochAppendUnchecked wrote one that
    is not, and reads it back as it wrote it)."""
    return "BugEpochAppendUnchecked" not in bugs
