"""Everything a simulation run depends on, drawn from its seed (swarm
testing at the configuration level: each seed picks its own store
configuration and its own mix and rate of faults)."""

from __future__ import annotations

import math
import random

import attrs

from reference.config import StoreConfig
from spec.config import ACK_POLICIES, ConfigError, resolve_bug


# Slaves a simulated master may have: a broker group has one or two in practice, and every slave adds
# its own heartbeats, connections and frames to each step (a million filled the event queue).
MAX_REPLICAS = 32
# The simulated disk holds every segment in memory (reference/sim/disk.py): a segment of a TiB was a
# MemoryError.  The seeds draw 256 to 4096 bytes; RocketMQ's default is 1 GiB.
MAX_SEGMENT_BYTES = 64 * 1024 * 1024
MIN_RATE_PER_S = 1e-9       # a fault a third of a century apart: as good as never, and still a finite wait


def _shown(text: str) -> str:
    """A value quoted back in an error: as typed, or as a literal when it would not print on one line."""
    return text if text.isprintable() else repr(text)


@attrs.frozen
class Faults:
    """Fault rates per second of virtual time (0 = this kind never happens)."""

    master_process_crash_per_s: float = 0.0
    master_machine_crash_per_s: float = 0.0
    replica_crash_per_s: float = 0.0
    replica_disconnect_per_s: float = 0.0
    fsync_failure_probability: float = 0.0     # per fsync
    write_failure_probability: float = 0.0     # per page-cache write (EIO, ENOSPC or a short write)
    forged_ack_per_s: float = 0.0              # HA reports no slave sent (beyond committed, or mangled)
    impostor_per_s: float = 0.0                # a second connection under a slave's name, or an unknown name
    duplicate_frame_per_s: float = 0.0
    reorder_frame_per_s: float = 0.0
    truncate_frame_per_s: float = 0.0          # a connection cut inside a frame (wire bytes)
    garbage_frame_per_s: float = 0.0           # random bytes on a connection (wire bytes)
    corrupt_frame_per_s: float = 0.0           # one bit flipped in flight (wire bytes)
    flood_per_s: float = 0.0                   # a connection that sends ACKs behind a handshake not yet answered
    greetless_per_s: float = 0.0               # HA connections that never send their HANDSHAKE
    epoch_query_per_s: float = 0.0             # a connection that asks for the master's epochs once or more
    net_delay_ms: tuple[int, int] = (0, 2)
    fsync_latency_ms: tuple[int, int] = (1, 4)
    restart_delay_ms: tuple[int, int] = (5, 50)
    put_interval_ms: tuple[int, int] = (0, 3)
    body_size: tuple[int, int] = (1, 120)


@attrs.frozen
class SimParams:
    seed: int
    store: StoreConfig
    replicas: tuple[str, ...]
    faults: Faults

    @property
    def wire_bytes(self) -> bool:
        """Frames travel as bytes (so they can be cut and corrupted), not as objects."""
        f = self.faults
        return f.truncate_frame_per_s > 0 or f.garbage_frame_per_s > 0 or f.corrupt_frame_per_s > 0

    def describe(self) -> dict:
        s = self.store
        return {
            "seed": self.seed, "flush_disk_type": s.flush_disk_type, "broker_role": s.broker_role,
            "transient_store_pool_enable": s.transient_store_pool_enable, "ack_policy": s.ack_policy,
            "in_sync_replicas": s.in_sync_replicas, "ack_mode": s.ack_mode, "replicas": len(self.replicas),
            "segment_bytes": s.mapped_file_size_commit_log, "bugs": sorted(s.bugs),
            "flush_one_message_per_fsync": s.flush_one_message_per_fsync,
            "commit_on_replica_wait": s.commit_on_replica_wait,
            "transient_store_pool_size": s.transient_store_pool_size,
            **{k: v for k, v in attrs.asdict(self.faults).items() if isinstance(v, float)},
        }


# What a configuration needs for a bug to matter at all (the _bug cfgs of
# tla/ pin the same dimensions); applied unless --config pins them otherwise.
BUG_SETTINGS: dict[str, dict] = {
    "BugAckOnWrote": {"flush_disk_type": "SYNC_FLUSH"},
    "BugAckOnCommitted": {"flush_disk_type": "SYNC_FLUSH", "transient_store_pool_enable": True},
    "BugTransferBeyondCommitted": {"transient_store_pool_enable": True, "commit_interval_commit_log_ms": 40,
                                   "commit_commit_log_least_pages": 4, "commit_commit_log_thorough_interval_ms": 40},
    "BugAnyReplicaForAllInSync": {"broker_role": "SYNC_MASTER", "ack_policy": "ALL_IN_SYNC", "replicas": 2},
    "BugTimeoutAsOK": {"flush_disk_type": "SYNC_FLUSH", "broker_role": "SYNC_MASTER"},
    "BugFlushOneFileReleasesAll": {"flush_disk_type": "SYNC_FLUSH", "mapped_file_size_commit_log": 256},
    # A short write leaves a partial record that this bug's recovery would keep as torn, which the
    # spec's process crash does not model; impostors get past the two broken handshakes.
    "BugRecoveryKeepsTorn": {"master_machine_crash_per_s": 3.0, "write_failure_probability": 0.0},
    "BugAcceptAckBeyondLog": {"flush_disk_type": "ASYNC_FLUSH", "master_machine_crash_per_s": 3.0,
                              "transient_store_pool_enable": False, "impostor_per_s": 0.0},
    "BugHandshakeOffsetOnly": {"flush_disk_type": "ASYNC_FLUSH", "master_machine_crash_per_s": 3.0,
                               "transient_store_pool_enable": False, "impostor_per_s": 0.0},
    "BugFlushIgnoresFsyncError": {"flush_disk_type": "SYNC_FLUSH", "fsync_failure_probability": 0.3,
                                  "master_machine_crash_per_s": 20.0, "fsync_latency_ms": (5, 20)},
    "BugDoubleResponse": {"flush_disk_type": "SYNC_FLUSH"},
    "BugNoFlushDiskWatcher": {"flush_disk_type": "SYNC_FLUSH", "fsync_failure_probability": 0.05},
    "BugFsyncCoversFailedWrite": {"flush_disk_type": "SYNC_FLUSH", "write_failure_probability": 0.05},
    "BugAckCheckedAgainstWrote": {"transient_store_pool_enable": True, "broker_role": "SYNC_MASTER",
                                  "forged_ack_per_s": 30.0, "commit_interval_commit_log_ms": 40,
                                  "commit_commit_log_least_pages": 4, "commit_commit_log_thorough_interval_ms": 40},
    "BugFlushTimeoutHidesSlaveTimeout": {"flush_disk_type": "SYNC_FLUSH", "broker_role": "SYNC_MASTER"},
    "BugHandshakeRefusesCaughtUp": {"replica_disconnect_per_s": 5.0},
}


def draw(seed: int, overrides: dict[str, str] | None = None) -> SimParams:
    """The configuration and fault mix of one seed; ``overrides`` (from
    ``--config key=value``) pin any store knob, fault rate or ``replicas``."""
    rng = random.Random(f"ackorder-sim-params-{seed}")
    n = rng.choice((1, 2, 2, 3))
    store = dict(
        flush_disk_type=rng.choice(("SYNC_FLUSH", "ASYNC_FLUSH")),
        broker_role=rng.choice(("SYNC_MASTER", "SYNC_MASTER", "ASYNC_MASTER")),
        transient_store_pool_enable=rng.random() < 0.4,
        ack_policy=rng.choice(ACK_POLICIES),
        in_sync_replicas=rng.randint(2, n + 1),
        ack_mode=rng.choice(("DECOUPLED", "BLOCKING")),
        mapped_file_size_commit_log=rng.choice((256, 512, 1024, 4096)),
        max_message_size=120,
        os_page_size=rng.choice((64, 256)),
        sync_flush_timeout_ms=rng.randint(20, 300),
        slave_timeout_ms=rng.randint(20, 300),
        group_commit_interval_ms=rng.randint(1, 10),
        flush_interval_commit_log_ms=rng.randint(5, 100),
        flush_commit_log_least_pages=rng.choice((0, 1, 4)),
        flush_commit_log_thorough_interval_ms=rng.randint(50, 500),
        commit_interval_commit_log_ms=rng.randint(2, 50),
        commit_commit_log_least_pages=rng.choice((0, 1, 4)),
        commit_commit_log_thorough_interval_ms=rng.randint(2, 50),
        ha_transfer_batch_size=rng.choice((64, 200, 1024)),
        ha_send_window_bytes=rng.choice((256, 4096)),
        ha_max_gap_not_in_sync=rng.choice((512, 1 << 30)),
    )

    def rate(low: float, high: float) -> float:
        return rng.uniform(low, high) if rng.random() < 0.5 else 0.0

    faults = dict(
        master_process_crash_per_s=rate(0.2, 3.0),
        master_machine_crash_per_s=rate(0.2, 3.0),
        replica_crash_per_s=rate(0.2, 4.0),
        replica_disconnect_per_s=rate(0.5, 8.0),
        fsync_failure_probability=rate(0.001, 0.05),
        net_delay_ms=(0, rng.choice((1, 2, 5))),
        fsync_latency_ms=(1, rng.choice((2, 5, 10))),
        put_interval_ms=(0, rng.choice((1, 3, 10))),
    )
    # Drawn last, so that adding them changed no earlier draw of any seed.
    store["flush_one_message_per_fsync"] = rng.random() < 0.15
    store["commit_on_replica_wait"] = rng.random() < 0.3
    store["ha_housekeeping_interval_ms"] = rng.randint(30, 400)
    faults.update(
        write_failure_probability=rate(0.002, 0.05),
        forged_ack_per_s=rate(0.5, 10.0),
        impostor_per_s=rate(0.5, 5.0),
        duplicate_frame_per_s=rate(0.5, 8.0),
        reorder_frame_per_s=rate(0.5, 8.0),
        truncate_frame_per_s=rate(0.5, 5.0),
        garbage_frame_per_s=rate(0.5, 5.0),
        corrupt_frame_per_s=rate(0.5, 5.0),
    )
    # Bounds on what the HA port's peers feed the master, small enough for a run to reach them.
    store["ha_max_ungreeted_connections"] = rng.choice((2, 4, 4096))
    store["ha_max_parked_events"] = rng.choice((1, 4, 4096))
    faults.update(flood_per_s=rate(0.5, 5.0), greetless_per_s=rate(0.5, 5.0))
    # Few enough TransientStorePool buffers for a pooled run whose commits lag to be refused puts.
    store["transient_store_pool_size"] = rng.choice((2, 3, 5))
    # Not drawn (0 unless --config sets it): a drawn rate would change the runs of half the seeds,
    # and every seed table measured on them; the write-path machine's epoch_queries rule reaches it.
    faults["epoch_query_per_s"] = 0.0
    bugs: list[str] = []
    overrides = dict(overrides or {})
    for bug in [v for k, v in overrides.items() if k == "bug"]:
        for key, value in BUG_SETTINGS.get(bug, {}).items():
            text = (str(value).lower() if isinstance(value, bool)
                    else ",".join(map(str, value)) if isinstance(value, tuple) else str(value))
            overrides.setdefault(key, text)
    for key, text in overrides.items():
        if key == "replicas":
            n = _int(key, text)
        elif key == "bug":
            bugs.append(resolve_bug(text))
        elif key in store:
            store[key] = _convert(key, text, store[key])
        elif key in faults:
            faults[key] = _convert(key, text, faults[key])
        else:
            raise ConfigError(f"--config {_shown(key)}: not a store knob, a fault rate, 'replicas' or 'bug'")
    if not 1 <= n <= MAX_REPLICAS:
        raise ConfigError(f"--config replicas {n}: must be 1 to {MAX_REPLICAS}")
    if isinstance(segment := store["mapped_file_size_commit_log"], int) and segment > MAX_SEGMENT_BYTES:
        raise ConfigError(f"--config mapped_file_size_commit_log={segment}: the simulator keeps its segments in "
                          f"memory, at most {MAX_SEGMENT_BYTES} bytes each")
    store["in_sync_replicas"] = min(store["in_sync_replicas"], n + 1)
    return SimParams(seed, StoreConfig(**store, bugs=frozenset(bugs)),
                     tuple(f"r{i + 1}" for i in range(n)), Faults(**faults))


def _int(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"--config {_shown(key)}={_shown(text)}: expected an integer") from None


def _convert(key: str, text: str, like):
    if isinstance(like, bool):
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"--config {_shown(key)}={_shown(text)}: expected true or false")
        return text.lower() == "true"
    if isinstance(like, int):
        return _int(key, text)
    if isinstance(like, float):
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"--config {_shown(key)}={_shown(text)}: expected a number") from None
        # a rate or a probability: nan, inf or a negative one was taken, and the run made of it nonsense
        if key.endswith("_probability") and not 0.0 <= value <= 1.0:
            raise ConfigError(f"--config {_shown(key)}={_shown(text)}: expected a probability, 0 to 1")
        if not key.endswith("_probability") and not (math.isfinite(value) and (value == 0.0 or value >= MIN_RATE_PER_S)):
            # 2.2e-309 passed, and the simulator's next fault was int(inf) ms away: OverflowError
            raise ConfigError(f"--config {_shown(key)}={_shown(text)}: expected a rate per second, 0 or from "
                              f"{MIN_RATE_PER_S} on")
        return value
    if isinstance(like, tuple):
        try:
            low, high = (int(x) for x in text.split(","))
        except ValueError:
            raise ConfigError(f"--config {_shown(key)}={_shown(text)}: expected LOW,HIGH") from None
        if not 0 <= low <= high:        # 5,1 was taken, and the simulation crashed (randrange: empty range)
            raise ConfigError(f"--config {_shown(key)}={_shown(text)}: expected LOW,HIGH with 0 <= LOW <= HIGH")
        return (low, high)
    return text
