"""The epoch checkpoint on a real filesystem: write it crash-safely, read it
back with a fallback to the previous good copy.

Write (``write_epoch_file``): the new bytes go to ``<name>.tmp``, which is
fdatasync'd; the current file (if any) is renamed to ``<name>.bak``; the tmp
file is renamed to ``<name>``; the directory is fsync'd.  Both files are
written and fsync'd before any rename names them, so at every point a power
loss leaves ``<name>`` or ``<name>.bak`` whole, and once the call returns the
new content survives.  RocketMQ's CheckpointFile does the renames without
any fsync (MixAll.string2File; B21, #10863): ``durable=False`` (what a core's
WriteEpochFile says under BugEpochFileNotDurable) skips both fsyncs, and a
power loss may then take the last write with it.

Read (``load_epoch_file``): ``<name>`` if it decodes; else ``<name>.bak``
(the reason is reported, never dropped); neither present: a new broker's
empty cache; both present and bad: EpochFileError naming both problems.

Every operation goes through reference.real.disk.FileOps, so the power-loss
recorder (reference/real/powerloss.RecordingOps) can sit under it.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from reference.failover.epochfile import EpochFileCache, EpochFileError, decode_epoch_file, encode_epoch_file
from reference.real.disk import FileOps

BAK_SUFFIX = ".bak"
TMP_SUFFIX = ".tmp"


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def write_epoch_file(path: Path, cache: EpochFileCache, *, durable: bool = True, check_order: bool = True,
                     ops: FileOps | None = None) -> None:
    """Persist ``cache`` at ``path`` (refines the durable epochCache of the spec's
    ChangeToMaster / ReplicaConnect / Transfer; the bug is BrokerPowerLoss's lastLost)."""
    ops = ops or FileOps()
    path = Path(path)
    data = encode_epoch_file(cache)
    tmp = _sibling(path, TMP_SUFFIX)
    fd = ops.open(tmp)
    try:
        ops.ftruncate(tmp, fd, 0)
        written = ops.pwrite(tmp, fd, data, 0)
        if written != len(data):
            raise OSError(f"short write to {tmp}: {written} of {len(data)} bytes")
        if durable:
            ops.fdatasync(tmp, fd)
    finally:
        ops.close(fd)
    if _decodes(path, check_order):         # a bad current file must not replace a good .bak
        ops.rename(path, _sibling(path, BAK_SUFFIX))
    ops.rename(tmp, path)
    if durable:
        ops.fsync_dir(path.parent)


def _decodes(path: Path, check_order: bool) -> bool:
    if not path.exists():
        return False
    try:
        decode_epoch_file(path.read_bytes(), str(path), check_order=check_order)
    except EpochFileError:
        return False
    return True


@attrs.frozen
class LoadedEpochFile:
    cache: EpochFileCache
    source: Path | None          # the file it came from (None: no file, a new broker)
    fallback_reason: str | None  # why <name> was not used, when .bak was


def load_epoch_file(path: Path, *, check_order: bool = True) -> LoadedEpochFile:
    """Read the checkpoint at ``path``, falling back to ``<name>.bak`` (see the module doc)."""
    path = Path(path)
    bak = _sibling(path, BAK_SUFFIX)
    if not path.exists() and not bak.exists():
        return LoadedEpochFile(EpochFileCache(), None, None)
    errors: list[EpochFileError] = []
    for candidate in (path, bak):
        if not candidate.exists():
            errors.append(EpochFileError(str(candidate), 0, "missing"))
            continue
        try:
            cache = decode_epoch_file(candidate.read_bytes(), str(candidate), check_order=check_order)
        except EpochFileError as err:
            errors.append(err)
            continue
        return LoadedEpochFile(cache, candidate, str(errors[0]) if errors else None)
    first, second = errors
    raise EpochFileError(first.source, first.offset_bytes, f"{first.problem}; and {second}")
