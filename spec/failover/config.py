"""Configuration of the failover spec: the CONSTANTS of
tla/AckOrderFailoverTypes.tla and the bounds of tla/MCAckOrderFailover.tla."""

from __future__ import annotations

import attrs

from spec.config import ConfigError

# One switch per rule; same names (and order) as the Bug* constants of
# tla/AckOrderFailoverTypes.tla.  Separate from spec.config.BUG_NAMES: the
# reference, the simulator and the fuzzer do not implement failover yet.
FAILOVER_BUG_NAMES = (
    "BugNoAllAck",
    "BugCommittedSssOnly",
    "BugConfirmOverConnected",
    "BugTransferCursorNotReset",
    "BugTruncateNotDurable",
    "BugUncleanElection",
    "BugConfirmNotClamped",
    "BugEpochFileNotDurable",
    "BugElectKeepsEpoch",
    "BugEpochAppendUnchecked",
    "BugAlterWithoutFencing",
    "BugSlaveConfirmFromMaxOffset",
    "BugElectOnlyOnMasterDeath",
    "BugShrinkBeforeCommit",
)


def _bugs(instance, attribute, value):
    unknown = sorted(set(value) - set(FAILOVER_BUG_NAMES))
    if unknown:
        raise ConfigError(f"unknown failover bug switch {', '.join(unknown)}; known: {', '.join(FAILOVER_BUG_NAMES)}")


@attrs.frozen
class FailoverConfig:
    """The broker group: its members (sorted), the master of epoch 1, the bug switched on."""

    brokers: tuple[str, ...] = attrs.field(converter=lambda v: tuple(sorted(v)))
    initial_master: str = "b1"
    no_broker: str = "NoBroker"
    bugs: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset, validator=_bugs)

    def __attrs_post_init__(self) -> None:
        if len(set(self.brokers)) != len(self.brokers) or not self.brokers:
            raise ConfigError(f"Brokers must be a non-empty set: {self.brokers}")
        if self.initial_master not in self.brokers:
            raise ConfigError(f"InitialMaster = {self.initial_master}: not one of Brokers {self.brokers}")
        if self.no_broker in self.brokers:
            raise ConfigError(f"NoBroker = {self.no_broker} must not be a broker")

    def bug(self, name: str) -> bool:
        return name in self.bugs

    def index(self, broker: str) -> int:
        return self.brokers.index(broker)


def _nat(instance, attribute, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{attribute.name} = {value!r}: must be a natural number")


@attrs.frozen
class FailoverBounds:
    """Perturbation budgets of tla/MCAckOrderFailover.tla (healing is never bounded)."""

    max_puts: int = attrs.field(default=1, validator=_nat)
    max_broker_crashes: int = attrs.field(default=1, validator=_nat)
    max_power_losses: int = attrs.field(default=0, validator=_nat)
    max_cut_offs: int = attrs.field(default=0, validator=_nat)
    max_disconnects: int = attrs.field(default=0, validator=_nat)
    max_sss_proposals: int = attrs.field(default=2, validator=_nat)
    max_elections: int = attrs.field(default=1, validator=_nat)
