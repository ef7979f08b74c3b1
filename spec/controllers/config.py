"""Configuration of the controllers spec: the CONSTANTS of tla/AckOrderControllers.tla
and the bounds of tla/MCAckOrderControllers.tla."""

from __future__ import annotations

import attrs

from spec.config import ConfigError

# Same names (and order) as the Bug* constants of tla/AckOrderControllers.tla; the runtime's
# switches of the same names are reference/failover/shards.py's SHARD_BUG_NAMES.
CONTROLLERS_BUG_NAMES = (
    "BugCommitWithoutCompare",
    "BugOwnerSkipsMetadataCompare",
    "BugNoTakeoverGrace",
    "BugActAfterLeaseExpired",
)


def _bugs(instance, attribute, value):
    if unknown := sorted(set(value) - set(CONTROLLERS_BUG_NAMES)):
        raise ConfigError(f"unknown controllers bug switch {', '.join(unknown)}; known: "
                          f"{', '.join(CONTROLLERS_BUG_NAMES)}")


def _names(value) -> tuple[str, ...]:
    return tuple(sorted(value))


@attrs.frozen
class ControllersConfig:
    brokers: tuple[str, ...] = attrs.field(converter=_names)
    controllers: tuple[str, ...] = attrs.field(converter=_names)
    initial_master: str = "b1"
    no_broker: str = "NoBroker"
    no_controller: str = "NoController"
    bugs: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset, validator=_bugs)

    def __attrs_post_init__(self) -> None:
        if not self.brokers or not self.controllers:
            raise ConfigError("Brokers and Controllers must be non-empty sets")
        if self.initial_master not in self.brokers:
            raise ConfigError(f"InitialMaster = {self.initial_master}: not one of Brokers {self.brokers}")
        if self.no_broker in self.brokers or self.no_controller in self.controllers:
            raise ConfigError("NoBroker and NoController must not be members of Brokers and Controllers")

    def bug(self, name: str) -> bool:
        assert name in CONTROLLERS_BUG_NAMES, name
        return name in self.bugs


@attrs.frozen
class ControllersBounds:
    max_takes: int
    max_expiries: int
    max_crashes: int
    max_elections: int
    max_alters: int

    def __attrs_post_init__(self) -> None:
        for field in attrs.fields(ControllersBounds):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{field.name} = {value!r}: must be a natural number")
