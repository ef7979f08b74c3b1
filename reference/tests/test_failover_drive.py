"""The failover simulator's own parts (reference/failover/group.py, drive.py): the
simulated disk keeps what a truncation in memory only leaves behind, and seeded
runs of the correct reference never leave the spec."""

import pytest

from reference.failover import broker_effects as bfx
from reference.failover.drive import simulate
from reference.failover.group import FailoverGroup
from spec.failover.config import FailoverConfig


def _group(bugs=()) -> FailoverGroup:
    return FailoverGroup(FailoverConfig(("b1", "b2", "b3"), "b1", bugs=frozenset(bugs)))


def test_a_cut_in_memory_only_keeps_every_record_on_disk():
    """Two non-durable cuts in a row: the disk (log then stale tail) is what it was.
    The old simulator dropped the front of the earlier stale tail (CI, stop 22:
    'staleTail ((1, 2, 3, 4)) vs ((1, 3, 4))')."""
    g = _group(("BugTruncateNotDurable",))
    b = g.brokers["b2"]
    b.log[:] = [1, 2, 3, 4]
    g._perform(b, (bfx.TruncateLog(1, on_disk=False),))
    assert (b.log, b.stale_tail) == ([1], [2, 3, 4])
    g._perform(b, (bfx.TruncateLog(0, on_disk=False),))
    assert (b.log, b.stale_tail) == ([], [1, 2, 3, 4])
    g._perform(b, (bfx.TruncateLog(0),))
    assert (b.log, b.stale_tail) == ([], [])


def test_the_seed_that_left_the_spec_now_refines():
    """Seed 57 under BugTruncateNotDurable made two non-durable cuts on one slave; the
    twin then found no spec step for the second ReplicaConnect."""
    run = simulate(57, bugs=("BugTruncateNotDurable",))
    assert run.violation != "Refinement", run.detail
    assert sum(label.startswith("ReplicaConnect(") for label in run.labels) >= 2


@pytest.mark.parametrize("bugs", [(), ("BugTruncateNotDurable",)])
def test_seeded_runs_never_leave_the_spec(bugs):
    """200 seeds (about 10 s): a bug may break an invariant, never the refinement."""
    runs = (simulate(seed, bugs=bugs) for seed in range(200))
    left = [(r.seed, r.detail) for r in runs if r.violation == "Refinement" or (not bugs and r.violation is not None)]
    assert left == []


def test_memoized_verdicts_are_the_verdicts():
    """refine.violated and check_step remember their verdicts by value: along seeded runs, every
    remembered verdict is the one the invariants and the twin give afresh, a state equal to a
    remembered one (another object) gets the same verdict from the memo, and a violating state's
    verdict is remembered as violating."""
    import random

    import attrs

    from reference.failover import drive, refine
    from spec.failover.properties import INVARIANTS, SAFETY

    remembered = 0
    for bugs in [(), ("BugTruncateNotDurable",)]:
        cfg = FailoverConfig(drive.BROKERS, "b1", bugs=frozenset(bugs))
        for seed in range(20):
            g, rng = FailoverGroup(cfg), random.Random(seed)
            pre = g.abstract()
            for _ in range(200):
                try:
                    label = drive.step_once(g, rng, drive.FailoverBudget(), 0.3, None)
                except AssertionError:
                    break
                if label is None:
                    continue
                post = g.abstract()
                fresh = [n for n in SAFETY if not INVARIANTS[n](cfg, post)]
                remembered += (cfg, post) in refine._VIOLATED
                assert refine.violated(cfg, post) == fresh
                assert refine.violated(cfg, attrs.evolve(post)) == fresh     # equal, not identical
                if post in refine.allowed(cfg, pre, label) or post == pre:
                    refine.check_step(cfg, pre, label, post)
                    refine.check_step(cfg, attrs.evolve(pre), label, attrs.evolve(post))
                else:
                    with pytest.raises(refine.RefinementError):
                        refine.check_step(cfg, pre, label, post)
                    break
                pre = post
    assert remembered > 0
    broken = attrs.evolve(pre, masterEpoch=-1)
    fresh = [n for n in SAFETY if not INVARIANTS[n](cfg, broken)]
    assert "TypeOK" in fresh and refine.violated(cfg, broken) == refine.violated(cfg, attrs.evolve(broken)) == fresh
