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


def test_the_initial_slaves_connect_at_once():
    """As from the spec's Init (TLC's shortest counterexamples start with ReplicaConnect(b2)): the
    group used to start the slaves' HA clients at Init, which left them in HANDSHAKE with no
    reply to come, so no initial slave connected before a crash or a role change."""
    g = _group()
    assert (g.replica_connect("b2"), g.replica_connect("b3")) == ("ReplicaConnect(b2)", "ReplicaConnect(b3)")


def test_every_scenario_is_drawn_and_bad_ones_are_refused():
    import random

    from reference.failover.drive import SCENARIOS, Scenario, draw_scenario
    assert {draw_scenario(random.Random(seed)).name for seed in range(30)} == set(SCENARIOS)
    with pytest.raises(AssertionError):
        Scenario("x", 0.1, (("brokerCrash", 1.0),))                 # a fault kind without its weight
    with pytest.raises(AssertionError):
        Scenario("x", 0.1, draw_scenario(random.Random(0)).weights, aimed=("disconnect",))


@pytest.mark.parametrize("bug, prop, scenario", [
    ("BugSlaveConfirmFromMaxOffset", "LogMatchingAcrossEpochs", "lagging-member"),
    ("BugAlterWithoutFencing", "SSSContainsMaster", "deposed-master"),
])
def test_the_scenarios_reach_the_deep_failover_bugs(bug, prop, scenario):
    """The two switches the uniform schedule found only now and then (one of three 2,000-seed
    ranges missed BugSlaveConfirmFromMaxOffset): the first 100 seeds find each at least twice,
    naming its TLC cfg's property, by the scenario drawn for that fault pattern (about 5 s)."""
    found = [(r.violation, r.scenario) for r in (simulate(seed, bugs=(bug,)) for seed in range(100)) if r.violation]
    assert len(found) >= 2 and (prop, scenario) in found, found


@pytest.mark.parametrize("bugs, accepted", [((), False), (("BugAlterWithoutFencing",), True)])
def test_an_alter_equal_to_the_current_set_is_refused_only_behind_the_compare_and_set(bugs, accepted):
    """The spec's AlterSyncStateSet has no equal-set refusal: behind a compare-and-set that
    holds it cannot matter, but without one (BugAlterWithoutFencing) a stale proposal may equal
    the current set, and the spec accepts it with a new sssEpoch; the reference's variant did
    not (a Refinement failure in the deposed-master scenario)."""
    from reference.failover import effects as cfx
    from reference.failover.group import GROUP

    g = _group(bugs)
    before = g.controller.groups[GROUP].sss_epoch
    reply = g._ask(g.controller.alter_sync_state_set, GROUP, 1, 1, before, frozenset({1}))
    assert (reply.code == cfx.SUCCESS) == accepted, reply
    assert g.controller.groups[GROUP].sss_epoch == before + accepted


def test_memoized_verdicts_are_the_verdicts():
    """refine.violated and check_step remember their verdicts by value: along seeded runs, every
    remembered verdict is the one the invariants and the twin give afresh, a state equal to a
    remembered one (another object) gets the same verdict from the memo, and a violating state's
    verdict is remembered as violating.  Only asked to (``remember=True``, as the Hypothesis machine
    asks) do they remember: a seeded run leaves the memo as it found it."""
    import random

    import attrs

    from reference.failover import drive, refine
    from spec.failover.properties import INVARIANTS, SAFETY

    remembered = 0
    for bugs in [(), ("BugTruncateNotDurable",)]:
        cfg = FailoverConfig(drive.BROKERS, "b1", bugs=frozenset(bugs))
        for seed in range(20):
            g, rng = FailoverGroup(cfg), random.Random(seed)
            scenario, budget = drive.draw_scenario(rng), drive.FailoverBudget()
            pre = g.abstract()
            for step in range(200):
                try:
                    label = drive.step_once(g, rng, budget, scenario, step)
                except AssertionError:
                    break
                if label is None:
                    continue
                post = g.abstract()
                fresh = [n for n in SAFETY if not INVARIANTS[n](cfg, post)]
                remembered += (cfg, post) in refine._VIOLATED
                assert refine.violated(cfg, post, remember=True) == fresh
                assert refine.violated(cfg, attrs.evolve(post), remember=True) == fresh     # equal, not identical
                if post in refine.allowed(cfg, pre, label) or post == pre:
                    refine.check_step(cfg, pre, label, post, remember=True)
                    refine.check_step(cfg, attrs.evolve(pre), label, attrs.evolve(post), remember=True)
                else:
                    with pytest.raises(refine.RefinementError):
                        refine.check_step(cfg, pre, label, post, remember=True)
                    break
                pre = post
    assert remembered > 0
    before = (len(refine._VIOLATED), len(refine._STEPS_OK))
    run = drive.simulate(3)
    assert run.steps > 0 and (len(refine._VIOLATED), len(refine._STEPS_OK)) == before
    broken = attrs.evolve(pre, masterEpoch=-1)
    fresh = [n for n in SAFETY if not INVARIANTS[n](cfg, broken)]
    assert "TypeOK" in fresh and refine.violated(cfg, broken, remember=True) == refine.violated(cfg, attrs.evolve(broken), remember=True) == fresh
