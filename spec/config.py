"""Configuration of the spec: the CONSTANTS of tla/AckOrderTypes.tla and the
bounds of tla/MCAckOrder.tla, validated the way ``ASSUME ConfigOK`` does."""

from __future__ import annotations

import difflib
import re

import attrs

FLUSH_MODES = ("SYNC_FLUSH", "ASYNC_FLUSH")
REPL_MODES = ("SYNC_MASTER", "ASYNC_MASTER")
ACK_POLICIES = ("ANY_REPLICA_MAX", "AT_LEAST_K", "ALL_IN_SYNC")

# One switch per ordering rule; same names as the Bug* constants in tla/.
BUG_NAMES = (
    "BugAckOnWrote",
    "BugAckOnCommitted",
    "BugTransferBeyondCommitted",
    "BugAnyReplicaForAllInSync",
    "BugTimeoutAsOK",
    "BugFlushOneFileReleasesAll",
    "BugRecoveryKeepsTorn",
    "BugAcceptAckBeyondLog",
    "BugHandshakeOffsetOnly",
    "BugFlushIgnoresFsyncError",
    "BugDoubleResponse",
    "BugNoFlushDiskWatcher",
    "BugFsyncCoversFailedWrite",
    "BugAckCheckedAgainstWrote",
    "BugFlushTimeoutHidesSlaveTimeout",
    "BugHandshakeRefusesCaughtUp",
)


class ConfigError(ValueError):
    """A configuration that the spec's ASSUMEs reject."""


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the digits 0-9 and nothing else: the guard before an
    ``int(text)``.  ``str.isdigit()`` is not one: it says yes to '²' or '①', which int() refuses
    (a ValueError where the guard promised none), and to '١٢' (Arabic-Indic digits), which int()
    reads as 12 where no other program would (a port, a file name)."""
    return text.isascii() and text.isdigit()


def bug_alias(bug: str) -> str:
    """The other spelling of a bug, its cfg's name: BugTimeoutAsOK -> timeout_as_ok_bug."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z][a-z0-9]*", bug.removeprefix("Bug"))
    return "_".join(w.lower() for w in words) + "_bug"


def resolve_bug(name: str, names: tuple[str, ...] = BUG_NAMES) -> str:
    """A bug switch by either spelling (BugAckOnWrote or ack_on_wrote_bug), or a ConfigError
    that suggests the closest names (``names``: the write path's, or the failover spec's)."""
    for bug in names:
        if name in (bug, bug_alias(bug)):
            return bug
    known = [*names, *(bug_alias(b) for b in names)]
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else f"; known: {', '.join(names)}"
    raise ConfigError(f"unknown bug switch {name!r}{hint}")


def _one_of(allowed):
    def check(instance, attribute, value):
        if value not in allowed:
            raise ConfigError(f"{attribute.name} = {value!r}: must be one of {', '.join(allowed)}")

    return check


def _bugs(instance, attribute, value):
    unknown = sorted(set(value) - set(BUG_NAMES))
    if unknown:
        raise ConfigError(f"unknown bug switch {', '.join(unknown)}; known: {', '.join(BUG_NAMES)}")


@attrs.frozen
class Config:
    """The broker group's configuration (spec constants)."""

    replicas: tuple[str, ...] = attrs.field(converter=lambda v: tuple(sorted(v)))
    flush_mode: str = attrs.field(validator=_one_of(FLUSH_MODES))
    repl_mode: str = attrs.field(validator=_one_of(REPL_MODES))
    transient_store_pool: bool = False
    ack_policy: str = attrs.field(default="ANY_REPLICA_MAX", validator=_one_of(ACK_POLICIES))
    in_sync_replicas: int = 2
    file_size: int = 2
    commit_on_replica_wait: bool = False     # the seed-001 fix: a SYNC_MASTER put commits at once
    bugs: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset, validator=_bugs)

    def __attrs_post_init__(self) -> None:
        # ConfigOK's types too (TransientStorePool \in BOOLEAN, FileSize \in Nat \ {0}): a cfg's
        # TransientStorePool = 5 or FileSize = TRUE was taken by the twin, and refused by TLC.
        for name, value in (("TransientStorePool", self.transient_store_pool),
                            ("CommitOnReplicaWait", self.commit_on_replica_wait)):
            if not isinstance(value, bool):
                raise ConfigError(f"{name} = {value!r}: must be TRUE or FALSE")
        if len(set(self.replicas)) != len(self.replicas):
            raise ConfigError(f"Replicas has duplicates: {self.replicas}")
        if not _is_int(self.in_sync_replicas) or not 1 <= self.in_sync_replicas <= len(self.replicas) + 1:
            raise ConfigError(
                f"InSyncReplicas = {self.in_sync_replicas!r}: must be in 1..{len(self.replicas) + 1}"
                " (the master counts as one)"
            )
        if not _is_int(self.file_size) or self.file_size < 1:
            raise ConfigError(f"FileSize = {self.file_size!r}: must be at least 1")

    def bug(self, name: str) -> bool:
        return name in self.bugs

    @property
    def sync_flush(self) -> bool:
        return self.flush_mode == "SYNC_FLUSH"

    @property
    def sync_master(self) -> bool:
        return self.repl_mode == "SYNC_MASTER"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _nat(instance, attribute, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{attribute.name} = {value!r}: must be a natural number")


@attrs.frozen
class Bounds:
    """Perturbation budgets of tla/MCAckOrder.tla (healing is never bounded)."""

    max_puts: int = attrs.field(default=2, validator=_nat)
    max_master_process_crashes: int = attrs.field(default=1, validator=_nat)
    max_master_machine_crashes: int = attrs.field(default=1, validator=_nat)
    max_replica_crashes: int = attrs.field(default=1, validator=_nat)
    max_replica_disconnects: int = attrs.field(default=1, validator=_nat)
    max_fsync_failures: int = attrs.field(default=1, validator=_nat)
    max_write_failures: int = attrs.field(default=0, validator=_nat)
    max_forged_reports: int = attrs.field(default=0, validator=_nat)
