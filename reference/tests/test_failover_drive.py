"""The failover simulator's own parts (reference/failover/group.py, drive.py): the group maps the
cores' bytes onto the spec's records, one step of the cores may be several of the spec's and the
twin must find a path through them, and seeded runs of the correct reference never leave the
spec — and leave it when a core's rule is broken (the checked code is the code that runs)."""

import pytest

from reference.failover.drive import simulate
from reference.failover.group import RECORD_BYTES, FailoverGroup
from reference.failover.refine import RefinementError, spec_path
from spec.failover.config import FAILOVER_BUG_NAMES, FailoverConfig


def _group(bugs=(), window: int = 1) -> FailoverGroup:
    return FailoverGroup(FailoverConfig(("b1", "b2", "b3"), "b1", bugs=frozenset(bugs)), window)


def test_the_abstraction_reads_the_records_from_the_bytes():
    """The spec's logs are the record keys in each broker's segment file, its offsets record counts."""
    g = _group()
    assert g.replica_connect("b2") == "ReplicaConnect(b2)"
    assert g.put("b1") == "Put(b1);Transfer(b2);Respond(1)", \
        "the frame reaches the connected slave in the put's step; b1 alone in its SyncStateSet answers"
    assert g.put("b1") == "Put(b1);Respond(2)"
    s = g.abstract()
    assert s.blog == ((1, 2), (1,), ()), "one record in flight per slave: the window (SEND_WINDOW of 1 record)"
    assert g.replica_ack("b2") == "ReplicaAck(b2);Transfer(b2)"
    s = g.abstract()
    assert [r.status for r in g.requests] == ["PUT_OK", "PUT_OK"]
    assert s.blog == ((1, 2), (1, 2), ()) and s.ack == (0, 1, 0) and s.epochCache[1] == ((1, 0),)
    assert bytes(g.brokers["b2"].files[0][RECORD_BYTES:2 * RECORD_BYTES]) == \
        bytes(g.brokers["b1"].files[0][RECORD_BYTES:2 * RECORD_BYTES]), "the slave holds the master's bytes"


def test_an_ack_that_covers_requests_is_the_ack_then_each_answer():
    """The cores act on an input at once; the group names every spec step of it, in order."""
    g = _group()
    assert g.replica_connect("b2") == "ReplicaConnect(b2)"
    assert g.check_sync_state_set("b1") == "ExpandSyncStateSet(b1,b2)"
    assert g.alter_sync_state_set("b1") == "AlterSyncStateSet(b1);ChangeSyncStateSet(b1)", \
        "the node applies an accepted alter's SyncStateSet at once"
    assert g.put("b1") == "Put(b1);Transfer(b2)"
    assert g.requests[-1].status == "WAITING", "b2 is a member: the PUT_OK waits for its ACK"
    assert g.replica_ack("b2") == "ReplicaAck(b2);Respond(1)"
    assert (g.put("b1"), g.put("b1")) == ("Put(b1);Transfer(b2)", "Put(b1)")
    assert g.replica_ack("b2") == "ReplicaAck(b2);Transfer(b2);Respond(2)", "the window slides, then the answer"
    assert g.replica_ack("b2") == "ReplicaAck(b2);Respond(3)"
    assert g.abstract().blog == ((1, 2, 3), (1, 2, 3), ())


def test_a_compound_step_must_be_a_spec_path_in_its_order():
    g = _group()
    cfg = g.cfg
    pre = g.abstract()
    g.replica_connect("b2")
    label = g.put("b1")
    post = g.abstract()
    assert [part for part, _ in spec_path(cfg, pre, "ReplicaConnect(b2);" + label, post)] == \
        ["ReplicaConnect(b2)", "Put(b1)", "Transfer(b2)", "Respond(1)"]
    with pytest.raises(RefinementError, match="does not allow Transfer"):
        spec_path(cfg, pre, "ReplicaConnect(b2);Transfer(b2);Put(b1);Respond(1)", post)
    with pytest.raises(RefinementError, match="no spec path leads here"):
        spec_path(cfg, pre, "ReplicaConnect(b2);Put(b1);Respond(1)", post)     # the transfer left out


@pytest.mark.parametrize("bugs", [(), ("BugTruncateNotDurable",)])
def test_seeded_runs_never_leave_the_spec(bugs):
    """60 seeds (about 8 s each): a bug may break an invariant, never the refinement."""
    runs = (simulate(seed, bugs=bugs) for seed in range(60))
    left = [(r.seed, r.detail) for r in runs if r.violation == "Refinement" or (not bugs and r.violation is not None)]
    assert left == []


@pytest.mark.full
@pytest.mark.parametrize("bug", FAILOVER_BUG_NAMES)
def test_no_switch_takes_the_simulator_out_of_the_spec(bug):
    """Under every switch the cores' variant is the spec's: 60 seeds, never a Refinement failure
    (BugElectKeepsEpoch once was: a deposed master took its successor's SyncStateSet, the manager
    not checking the metadata's master) — except one known divergence under BugElectKeepsEpoch
    (docs/fuzz.md: 4 of 100 campaign seeds): with two masters in one epoch the master's HANDSHAKE
    check, beyond the spec, refuses a slave whose same-epoch log differs, where the spec connects."""
    known = "BugElectKeepsEpoch"
    left = [(seed, run.detail) for seed in range(60) if (run := simulate(seed, bugs=(bug,))).violation == "Refinement"
            and not (bug == known and run.detail.startswith("ReplicaConnect(") and "connected:" in run.detail)]
    assert left == []


def _first_violation(seeds: int):
    for seed in range(seeds):
        run = simulate(seed)
        if not run.ok:
            return run
    return None


@pytest.mark.parametrize("mutant", ["header_confirm", "recompute_confirm", "begin_epoch"])
def test_a_rule_broken_in_a_core_is_caught_by_the_simulator(monkeypatch, mutant):
    """The group drives the cores the node runs: a rule broken in MasterCore (not a bug switch) takes
    the simulator out of the spec within a few seeds — the transfer header's confirmOffset, the
    master's computeConfirmOffset, and the re-elected master's earlier requests."""
    from reference.master import MasterCore

    if mutant == "header_confirm":
        monkeypatch.setattr(MasterCore, "header_confirm", lambda self: self.log_end_offset())
    elif mutant == "recompute_confirm":
        original = MasterCore._recompute_confirm

        def everything_confirmed(self, name):
            original(self, name)
            if self.confirm is not None:
                self.confirm = self.log_end_offset()
        monkeypatch.setattr(MasterCore, "_recompute_confirm", everything_confirmed)
    else:
        from reference.failover.epochfile import EpochFileCache

        original_begin = MasterCore.begin_epoch

        def keeps_waiting(self, entries, confirm_offset, bugs=frozenset()):
            self.epochs = EpochFileCache()          # as if never elected: earlier requests keep waiting
            original_begin(self, entries, confirm_offset, bugs)
        monkeypatch.setattr(MasterCore, "begin_epoch", keeps_waiting)
    run = _first_violation(400)
    assert run is not None, f"the {mutant} mutant survived 400 seeds"
    assert run.violation == "Refinement", (run.seed, run.violation, run.detail)


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
    ("BugSlaveConfirmFromMaxOffset", "LogMatchingAcrossEpochs", None),
    ("BugAlterWithoutFencing", "SSSContainsMaster", "deposed-master"),
    ("BugCommittedSssOnly", "AckedSurvivesFailover", "joining-member"),
])
def test_the_scenarios_reach_the_deep_failover_bugs(bug, prop, scenario):
    """The switches the uniform schedule finds only now and then: the first 100 seeds find each at
    least twice, naming its TLC cfg's property, by the scenario drawn for that fault pattern
    (BugSlaveConfirmFromMaxOffset: by several; about 30 s each)."""
    found = [(r.violation, r.scenario) for r in (simulate(seed, bugs=(bug,)) for seed in range(100)) if r.violation]
    assert len(found) >= 2 and all(p == prop for p, _ in found[:1]), found
    assert scenario is None or (prop, scenario) in found, found


@pytest.mark.parametrize("bug", FAILOVER_BUG_NAMES)
def test_the_failover_simulator_catches_every_switch(bug):
    """Every failover bug switch, over the bytes the node's cores hold: the campaign's first failing
    seed (reference/tests/failover_seeds.py: at most 4 for ten switches, 15-38 for the other four),
    none before it, names the property the switch's TLC cfg names (manifest), never the refinement —
    the cores' variant of each switch is the spec's.  The seeds before it run in -m full."""
    from reference.tests.failover_seeds import FIRST_FAILING_SEED
    from tla.manifest import expected_violations

    seed = FIRST_FAILING_SEED[bug]
    run = simulate(seed, bugs=(bug,))
    assert run.violation in expected_violations(bug), (seed, run.violation, run.detail)


@pytest.mark.full
@pytest.mark.parametrize("bug", FAILOVER_BUG_NAMES)
def test_no_seed_before_the_first_failing_one_fails(bug):
    from reference.tests.failover_seeds import FIRST_FAILING_SEED

    early = [s for s in range(FIRST_FAILING_SEED[bug]) if simulate(s, bugs=(bug,)).violation]
    assert early == [], f"{bug}: seeds {early} fail before the table's; python -m reference.tests.failover_seeds"


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
                if refine.SEP in label:         # a compound step: its path is spec_path's (tested above)
                    pre = post
                    continue
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
