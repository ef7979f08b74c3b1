"""The simulator's fast paths (issue 17) change no run.  Each is run side by side with the plain
code it replaced — kept here as the oracle — on seeded runs, and every outcome (trace hash, step
count, statuses, coverage, violation) must be the same; the wake-up time is compared at every event."""

import random

import attrs
import pytest

import reference.sim.cluster as cluster_module
from reference.decisions import INF, replica_coverage
from reference.master import MasterCore
from reference.sim.params import draw
from reference.sim.world import World


def plain_next_wakeup_ms(m: MasterCore, now_ms: int) -> int:
    """MasterCore.next_wakeup_ms as it was before it returned early (826d4c5)."""
    cfg, log = m.cfg, m.log
    due = now_ms + 1000
    if cfg.transient_store_pool_enable and log.issued < log.wrote:
        due = min(due, now_ms if m._commit_wakeup else m._last_commit_round_ms + cfg.commit_interval_commit_log_ms)
    waiting_round = cfg.sync_flush and (m.requests_write or m.requests_read)
    if m.fsync_in_flight is None and m._flush_allowed() and (log.committed > log.flushed or waiting_round):
        interval = cfg.group_commit_interval_ms if cfg.sync_flush else cfg.flush_interval_commit_log_ms
        due = min(due, now_ms if m._flush_wakeup else m._last_flush_round_ms + interval)
    if m.flush_deadlines:
        due = min(due, m.flush_deadlines[0][0])
    if m.repl_deadlines:
        due = min(due, m.repl_deadlines[0][0])
    for opened_ms in m.ungreeted.values():
        due = min(due, opened_ms + cfg.ha_housekeeping_interval_ms)
    for hc in m.conns.values():
        if hc.next_transfer > hc.ack_offset:
            due = min(due, hc.ack_owed_since_ms + cfg.ha_housekeeping_interval_ms)
    return max(now_ms, due)


def plain_replica_coverage(m: MasterCore) -> float:
    """MasterCore.replica_coverage with both lists of acks built for every policy (826d4c5)."""
    if not m.cfg.sync_master:
        return INF
    sss = [m.conns[name].ack_offset for name in sorted(m.sync_state_set) if name in m.conns]
    return replica_coverage(m._policy_name, m.cfg.in_sync_replicas, m.push2SlaveMaxOffset,
                            [c.ack_offset for c in m.conns.values()], sss, len(m.sync_state_set))


class PlainWorld(World):
    """The world without its fast paths: randint through random.Random, every link looked at
    after every event."""

    def _randint(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def _plan(self) -> None:
        self.cluster.links_grew = True
        super()._plan()


def use_plain_paths(monkeypatch) -> list[int]:
    """The cores' plain paths, and the trace hash fed one line at a time; the wake-up time of
    the fast path is checked against the plain one at every event (the list: those compared)."""
    fast_wakeup = MasterCore.next_wakeup_ms
    compared = []

    def both(m, now_ms):
        plain = plain_next_wakeup_ms(m, now_ms)
        assert fast_wakeup(m, now_ms) == plain, (now_ms, plain)
        compared.append(plain)
        return plain

    monkeypatch.setattr(MasterCore, "next_wakeup_ms", both)
    monkeypatch.setattr(MasterCore, "replica_coverage", plain_replica_coverage)
    monkeypatch.setattr(cluster_module, "HASH_BATCH_LINES", 1)
    return compared


RUNS = [(seed, 600, False, None) for seed in range(40)] + [(seed, 600, True, None) for seed in range(40, 46)] + [
    (seed, 600, True, bug) for seed in (0, 1) for bug in ("BugHandshakeRefusesCaughtUp", "BugAckOnCommitted")]


def outcomes(world_class, runs=RUNS) -> list[dict]:
    return [attrs.asdict(world_class(draw(seed, {"bug": bug} if bug else None), check=check).run(steps))
            for seed, steps, check, bug in runs]


def test_the_fast_paths_change_no_run(monkeypatch):
    fast = outcomes(World)
    compared = use_plain_paths(monkeypatch)
    plain = outcomes(PlainWorld)
    assert len(compared) > 10_000          # the wake-up time was compared at every event
    assert sum(o["steps"] for o in fast) >= 0.9 * sum(steps for _, steps, _, _ in RUNS)
    for run, a, b in zip(RUNS, plain, fast, strict=True):
        assert a == b, f"run {run}: {[k for k in a if a[k] != b[k]]} differ"


def test_plain_paths_differ_from_a_changed_run(monkeypatch):
    """The comparison bites: a world that draws its delays differently gives other traces."""
    use_plain_paths(monkeypatch)

    class Shifted(PlainWorld):
        def _randint(self, low, high):
            return min(high, self.rng.randint(low, high) + 1)

    runs = RUNS[:3]
    assert [o["trace_hash"] for o in outcomes(Shifted, runs)] != [o["trace_hash"] for o in outcomes(PlainWorld, runs)]


@pytest.mark.parametrize("bounds", [(0, 0), (0, 1), (0, 5), (1, 120), (2, 20), (20, 200), (200, 1500), (7, 2**40)])
def test_randint_draws_what_random_randint_draws(bounds):
    world = World(draw(3), check=False)
    world.rng, reference = random.Random("draws"), random.Random("draws")
    world._getrandbits = world.rng.getrandbits
    assert [world._randint(*bounds) for _ in range(3000)] == [reference.randint(*bounds) for _ in range(3000)]
    assert world.rng.getstate() == reference.getstate()


def test_randint_refuses_an_empty_range_as_random_does():
    world = World(draw(3), check=False)
    with pytest.raises(ValueError):
        world._randint(5, 4)
