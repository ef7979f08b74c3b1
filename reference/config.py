"""StoreConfig: the knobs of the reference broker, named after RocketMQ's
MessageStoreConfig / BrokerConfig (snake_case, units in the names)."""

from __future__ import annotations

import argparse

import attrs

from spec.config import ACK_POLICIES, BUG_NAMES, FLUSH_MODES, REPL_MODES, ConfigError, resolve_bug

ACK_MODES = ("DECOUPLED", "BLOCKING")
KiB, MiB = 1024, 1024 * 1024


def _choice(options):
    def check(instance, attribute, value):
        if value not in options:
            raise ConfigError(f"{attribute.name} = {value!r}: must be one of {', '.join(options)}")
    return check


def _positive(instance, attribute, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{attribute.name} = {value!r}: must be a positive integer")


def _non_negative(instance, attribute, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{attribute.name} = {value!r}: must be an integer >= 0")


MAX_TRANSIENT_STORE_POOL_SIZE = 1024     # far below the writes a core keeps in flight (master.py)


def _pool_size(instance, attribute, value):
    if not isinstance(value, int) or isinstance(value, bool) or not 2 <= value <= MAX_TRANSIENT_STORE_POOL_SIZE:
        raise ConfigError(f"{attribute.name} = {value!r}: must be an integer from 2 to {MAX_TRANSIENT_STORE_POOL_SIZE} "
                          f"(the segment being appended to holds one buffer; with none left every put is refused)")


def _bool(instance, attribute, value):
    if not isinstance(value, bool):
        raise ConfigError(f"{attribute.name} = {value!r}: must be true or false")


def _bugs(instance, attribute, value):
    if unknown := sorted(set(value) - set(BUG_NAMES)):
        raise ConfigError(f"unknown bug switch {', '.join(unknown)}; known: {', '.join(BUG_NAMES)}")


@attrs.frozen
class StoreConfig:
    # what the broker promises (MessageStoreConfig.flushDiskType, brokerRole, ...)
    flush_disk_type: str = attrs.field(default="ASYNC_FLUSH", validator=_choice(FLUSH_MODES))
    broker_role: str = attrs.field(default="ASYNC_MASTER", validator=_choice(REPL_MODES))
    transient_store_pool_enable: bool = attrs.field(default=False, validator=_bool)
    ack_policy: str = attrs.field(default="ANY_REPLICA_MAX", validator=_choice(ACK_POLICIES))
    in_sync_replicas: int = attrs.field(default=2, validator=_positive)    # master included
    ack_mode: str = attrs.field(default="DECOUPLED", validator=_choice(ACK_MODES))
    # Benchmark baseline, not a RocketMQ knob: each fsync covers one message
    # (the design group commit replaced), so `ackorder bench groupcommit` can compare.
    flush_one_message_per_fsync: bool = attrs.field(default=False, validator=_bool)
    # The fix for seed 001 / RocketMQ #1372 (not a RocketMQ knob): with the transient store pool,
    # a request that starts waiting for slaves commits the write buffer at once, since slaves
    # can only read committed data; without it such requests wait for the commit interval.
    commit_on_replica_wait: bool = attrs.field(default=False, validator=_bool)
    # TransientStorePool's buffers (transientStorePoolSize): one per segment whose bytes are not
    # all in the page cache yet, and one for the segment the next append writes into.  With none
    # left the broker refuses puts (SendMessageProcessor.rejectRequest: isTransientStorePoolDeficient),
    # so what the pool buffers, and what one commit hands the runtime, is bounded.
    transient_store_pool_size: int = attrs.field(default=5, validator=_pool_size)
    # commit log layout
    mapped_file_size_commit_log: int = attrs.field(default=16 * MiB, validator=_positive)
    max_message_size: int = attrs.field(default=4 * MiB, validator=_positive)
    os_page_size: int = attrs.field(default=4 * KiB, validator=_positive)
    # deadlines
    sync_flush_timeout_ms: int = attrs.field(default=5000, validator=_positive)
    slave_timeout_ms: int = attrs.field(default=3000, validator=_positive)
    # services
    group_commit_interval_ms: int = attrs.field(default=10, validator=_positive)
    flush_interval_commit_log_ms: int = attrs.field(default=500, validator=_positive)
    flush_commit_log_least_pages: int = attrs.field(default=4, validator=_non_negative)
    flush_commit_log_thorough_interval_ms: int = attrs.field(default=10_000, validator=_positive)
    commit_interval_commit_log_ms: int = attrs.field(default=200, validator=_positive)
    commit_commit_log_least_pages: int = attrs.field(default=4, validator=_non_negative)
    commit_commit_log_thorough_interval_ms: int = attrs.field(default=200, validator=_positive)
    wake_commit_when_put_message: bool = attrs.field(default=True, validator=_bool)
    wake_flush_when_put_message: bool = attrs.field(default=False, validator=_bool)
    # HA
    ha_transfer_batch_size: int = attrs.field(default=32 * KiB, validator=_positive)
    ha_max_gap_not_in_sync: int = attrs.field(default=256 * MiB, validator=_positive)
    ha_send_window_bytes: int = attrs.field(default=4 * MiB, validator=_positive)
    # HAConnection housekeeping: a connection whose slave acknowledges nothing of the data in
    # flight to it for this long is closed (a stalled or garbled stream; RocketMQ's
    # haHousekeepingInterval), and the slave reconnects.
    ha_housekeeping_interval_ms: int = attrs.field(default=20_000, validator=_positive)
    # Bounds on what the HA port's peers feed the master (not RocketMQ knobs: Netty bounds these
    # by its channel options).  Past either, the master closes a connection, never itself: the
    # oldest connection that has not sent its HANDSHAKE, or the one whose frames waiting for a
    # segment read exceed the bound.
    ha_max_ungreeted_connections: int = attrs.field(default=4096, validator=_positive)
    ha_max_parked_events: int = attrs.field(default=4096, validator=_positive)
    # admission (BrokerConfig)
    wait_time_in_send_queue_ms: int = attrs.field(default=200, validator=_positive)
    send_message_thread_pool_nums: int = attrs.field(default=4, validator=_positive)
    send_thread_pool_queue_capacity: int = attrs.field(default=10_000, validator=_positive)
    # seeded defects, same names as the spec's Bug* constants (all off by default)
    bugs: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset, validator=_bugs)

    def __attrs_post_init__(self) -> None:
        if self.max_message_size + 64 > self.mapped_file_size_commit_log:
            raise ConfigError(
                f"max_message_size = {self.max_message_size} does not fit a segment of "
                f"mapped_file_size_commit_log = {self.mapped_file_size_commit_log} bytes")

    def bug(self, name: str) -> bool:
        return name in self.bugs

    @property
    def recovery_keeps_torn(self) -> bool:
        """The recovery scan's one switch (BugRecoveryKeepsTorn: a torn record is kept), read
        here for every runtime that recovers a log (the simulator's and the real one)."""
        return self.bug("BugRecoveryKeepsTorn")

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"

    @property
    def sync_master(self) -> bool:
        return self.broker_role == "SYNC_MASTER"


_KNOBS = [f for f in attrs.fields(StoreConfig) if f.name != "bugs"]


def add_store_flags(parser: argparse.ArgumentParser) -> None:
    """One --flag per knob, RocketMQ-like names, RocketMQ's defaults."""
    group = parser.add_argument_group("store configuration (RocketMQ MessageStoreConfig names)")
    for f in _KNOBS:
        flag = "--" + f.name.replace("_", "-")
        if f.type is bool or isinstance(f.default, bool):
            group.add_argument(flag, type=_parse_bool, default=f.default, metavar="BOOL",
                               help=f"default {f.default}")
        else:
            group.add_argument(flag, type=type(f.default), default=f.default, help=f"default {f.default}")
    group.add_argument("--bug", action="append", default=[], type=_bug_name, metavar="NAME",
                       help="switch on a seeded defect (repeatable): " + ", ".join(BUG_NAMES))


def _bug_name(text: str) -> str:
    try:
        return resolve_bug(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _parse_bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def store_config_from_args(args: argparse.Namespace) -> StoreConfig:
    return StoreConfig(**{f.name: getattr(args, f.name) for f in _KNOBS}, bugs=frozenset(args.bug))
