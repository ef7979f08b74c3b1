"""The state of tla/AckOrderControllers.tla: one field per variable, same names.
Functions over Brokers or Controllers are tuples in the config's sorted order."""

from __future__ import annotations

import attrs

COUNTER_KINDS = ("take", "expire", "crash", "election", "alter")


@attrs.frozen
class Snap:
    """A controller's Read of the group key (rev 0: none yet)."""
    master: str
    epoch: int
    sss: frozenset[str]
    sssEpoch: int
    rev: int


@attrs.frozen
class CCounters:
    take: int = 0
    expire: int = 0
    crash: int = 0
    election: int = 0
    alter: int = 0

    def bump(self, kind: str) -> CCounters:
        assert kind in COUNTER_KINDS, kind
        return attrs.evolve(self, **{kind: getattr(self, kind) + 1})


@attrs.frozen
class CState:
    masterId: str
    masterEpoch: int
    syncStateSet: frozenset[str]
    sssEpoch: int
    rev: int
    owner: str
    token: int
    up: tuple[bool, ...]                      # per broker
    snap: tuple[Snap, ...]                    # per controller
    held: tuple[int, ...]                     # per controller
    heard: tuple[tuple[bool, ...], ...]       # per controller, per broker
    inv_elected: frozenset[tuple[int, str]]
    inv_silent: tuple[bool, ...]              # per broker
    aux_ctrs: CCounters
