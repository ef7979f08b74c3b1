"""ControllerCore (reference/failover/controller.py), driven by hand: every rule
of the spec's controller actions, the heartbeat timeout, the durability of
replies, both designs, the bounds; a Hypothesis test that checks every
decision against spec/failover's alter_sync_state_set and elect_master;
and each controller-side bug switch caught."""

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from reference.failover import effects as fx
from reference.failover.controller import CONTROLLER_BUG_NAMES, ControllerConfig, ControllerCore
from reference.failover.effects import NO_MASTER
from reference.tests.controller_driver import BROKER_IDS, Driver, Violation
from spec.config import ConfigError

TIMEOUT = 1000
CFG = ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT)


def group_of_three(cfg=CFG, design="pipelined") -> Driver:
    """g1 with brokers 1 (the first master), 2, 3; every record durable."""
    d = Driver(ControllerConfig(controller_broker_heartbeat_timeout_ms=cfg.controller_broker_heartbeat_timeout_ms,
                                design=design, bugs=cfg.bugs))
    for b in BROKER_IDS:
        d.register("g1", b)
        d.make_durable()
    return d


def state(d: Driver, group="g1"):
    g = d.core.groups[group]
    return g.master_id, g.master_epoch, tuple(sorted(g.sync_state_set)), g.sss_epoch


def answer(d: Driver, req: int) -> fx.Reply:
    return d.replies[req]


# --- registration and the first master -----------------------------------------------------

def test_first_registrant_of_a_group_is_its_first_master():
    d = group_of_three()
    assert state(d) == (1, 1, (1,), 1)
    assert answer(d, 1).ok and answer(d, 1).info.master_id == 1
    assert sorted(d.core.groups["g1"].brokers) == [1, 2, 3]


def test_one_controller_serves_many_groups():
    d = Driver(CFG)
    for g in ("a", "b", "c"):
        d.register(g, 2)
    d.make_durable()
    assert [d.core.groups[g].master_id for g in ("a", "b", "c")] == [2, 2, 2]


def test_bounds_refuse_with_a_reason():
    d = Driver(ControllerConfig(max_groups=1, max_brokers_per_group=1))
    d.register("a", 1)
    d.make_durable()
    r1, r2 = d.register("a", 2), d.register("b", 1)
    assert answer(d, r1).code == answer(d, r2).code == fx.CONTROLLER_LIMIT_REACHED
    assert "max_brokers_per_group" in answer(d, r1).reason and "max_groups" in answer(d, r2).reason


def test_heartbeat_of_an_unknown_broker_is_refused():
    d = group_of_three()
    r = d.heartbeat("g1", 9)
    assert answer(d, r).code == fx.CONTROLLER_BROKER_METADATA_NOT_EXIST


# --- AlterSyncStateSet: compare-and-set and E3 ---------------------------------------------

def test_alter_accepted_bumps_the_sss_epoch_and_replies_after_durable():
    d = group_of_three()
    r = d.alter("g1", 1, 1, 1, {1, 2})
    assert r not in d.replies, "reply before its record is durable"
    d.make_durable()
    assert answer(d, r).ok and answer(d, r).info.sss_epoch == 2
    assert state(d) == (1, 1, (1, 2), 2)


@pytest.mark.parametrize("request_, code", [
    ((2, 1, 1, {1, 2}), fx.CONTROLLER_INVALID_MASTER),
    ((1, 0, 1, {1, 2}), fx.CONTROLLER_FENCED_MASTER_EPOCH),
    ((1, 1, 0, {1, 2}), fx.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
    ((1, 1, 1, {2, 3}), fx.CONTROLLER_INVALID_REPLICAS),
    ((1, 1, 1, {1}), fx.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    ((1, 2, 1, {1, 2}), fx.CONTROLLER_FENCED_MASTER_EPOCH),           # newer than the controller's: forged
    ((1, 1, 2, {1, 2}), fx.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
])
def test_alter_refusals(request_, code):
    d = group_of_three()
    r = d.alter("g1", *request_)
    assert answer(d, r).code == code and answer(d, r).reason
    assert state(d) == (1, 1, (1,), 1)


def test_alter_refuses_a_member_whose_heartbeat_expired():
    d = group_of_three()
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 1)
    r = d.alter("g1", 1, 1, 1, {1, 2})
    assert answer(d, r).code == fx.CONTROLLER_INVALID_REPLICAS and "[2]" in answer(d, r).reason


# --- ElectMaster: E2, E4, DefaultElectPolicy --------------------------------------------------

def expand(d: Driver, members) -> None:
    m, e, _, se = state(d)
    d.alter("g1", m, e, se, members)
    d.make_durable()


def test_master_death_elects_the_sss_member_with_the_largest_offset():
    d = group_of_three()
    expand(d, {1, 2, 3})
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2, max_offset=100)
    d.heartbeat("g1", 3, max_offset=200)
    d.tick()
    assert state(d) == (3, 2, (3,), 3)


@pytest.mark.parametrize("two, three, elected", [
    ({"max_offset": 5, "priority": 1}, {"max_offset": 5, "priority": 0}, 3),    # a tie: priority, then id
    ({"epoch": 2, "max_offset": 100}, {"epoch": 1, "max_offset": 900}, 2),      # the latest epoch before
])                                                                             # the longest log
def test_election_order_is_epoch_then_offset_then_priority_then_broker_id(two, three, elected):
    """DefaultElectPolicy: a log that went on under an older master is not ahead."""
    d = group_of_three()
    expand(d, {1, 2, 3})
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2, **two)
    d.heartbeat("g1", 3, **three)
    d.tick()
    assert state(d)[0] == elected


def test_election_never_leaves_the_sss():
    d = group_of_three()
    expand(d, {1, 2})
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 3, max_offset=10**6)      # alive, far ahead, but not in the SSS
    d.heartbeat("g1", 2)
    d.tick()
    assert state(d)[0] == 2


def test_no_live_sss_member_clears_the_master_and_still_bumps_the_epoch():
    d = group_of_three()
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2)
    d.tick()
    assert state(d) == (NO_MASTER, 2, (1,), 1)


def test_a_masterless_group_elects_once_a_member_is_back():
    d = group_of_three()
    d.advance(TIMEOUT + 1)
    d.tick()
    assert state(d)[0] == NO_MASTER
    d.heartbeat("g1", 1)
    d.tick()
    assert state(d) == (1, 3, (1,), 2)


def test_no_election_while_the_master_is_alive():
    d = group_of_three()
    r = d.elect("g1")
    assert answer(d, r).code == fx.CONTROLLER_MASTER_STILL_EXIST
    d.tick()
    assert state(d) == (1, 1, (1,), 1)


def test_elect_request_on_a_dead_master():
    d = group_of_three()
    expand(d, {1, 2})
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2)
    r = d.elect("g1")
    d.make_durable()
    assert answer(d, r).ok and answer(d, r).info.master_id == 2 and answer(d, r).info.master_epoch == 2


def test_the_old_master_is_fenced_after_an_election():
    d = group_of_three()
    expand(d, {1, 2})
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2)
    d.heartbeat("g1", 3)
    d.tick()
    d.heartbeat("g1", 1)                  # the old master comes back believing epoch 1
    r = d.alter("g1", 1, 1, 2, {1, 2, 3})
    assert answer(d, r).code == fx.CONTROLLER_INVALID_MASTER


# --- durability of replies, and the two designs ------------------------------------------------

def test_a_read_waits_for_records_decided_before_it():
    d = group_of_three()
    d.alter("g1", 1, 1, 1, {1, 2})
    r = d.info("g1")
    assert r not in d.replies
    d.make_durable()
    assert answer(d, r).info.sync_state_set == (1, 2)


def test_pipelined_one_durable_releases_every_reply_it_covers():
    d = Driver(CFG)
    reqs = [d.register(f"g{i}", 1) for i in range(10)]
    assert not any(r in d.replies for r in reqs) and len(d.issued) == 10
    d.make_durable()
    assert all(answer(d, r).ok for r in reqs)


def test_serial_decides_one_request_at_a_time():
    d = Driver(ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, design="serial"))
    reqs = [d.register(f"g{i}", 1) for i in range(3)]
    assert len(d.issued) == 1 and len(d.core.backlog) == 2
    r = d.heartbeat("g0", 1)
    assert answer(d, r).ok, "heartbeats never wait for the metadata"
    d.make_durable()
    assert len(d.issued) == 3 and all(answer(d, r).ok for r in reqs)


def test_a_failed_store_fails_every_held_reply_and_stops_deciding():
    d = Driver(CFG)
    r = d.register("g", 1)
    d.core.metadata_failed(1, "EIO", d.now)
    d.settle()
    assert answer(d, r).code == fx.CONTROLLER_METADATA_NOT_DURABLE
    r2 = d.register("h", 1)
    assert answer(d, r2).code == fx.CONTROLLER_METADATA_NOT_DURABLE and len(d.issued) == 1


def test_pending_requests_are_bounded():
    d = Driver(ControllerConfig(max_pending=2))
    d.register("a", 1)
    d.info("a")
    r = d.info("a")
    assert answer(d, r).code == fx.CONTROLLER_BUSY


def test_recovered_metadata_gives_brokers_one_timeout_of_grace():
    d = group_of_three()
    expand(d, {1, 2})
    core = ControllerCore(CFG, 50_000, recovered=[d.core.groups["g1"].record()])
    core.tick(50_000 + TIMEOUT)
    assert core.take_effects() == [] and core.groups["g1"].master_id == 1
    core.tick(50_000 + TIMEOUT + 1)
    assert [type(e).__name__ for e in core.take_effects()] == ["PersistMetadata"]
    assert core.groups["g1"].master_id == NO_MASTER


def test_recovered_metadata_over_the_bounds_is_refused_with_a_reason():
    d = Driver(CFG)
    d.register("a", 1)
    d.register("b", 1)
    d.make_durable()
    records = [g.record() for g in d.core.groups.values()]
    with pytest.raises(ConfigError, match="more than max_groups = 1"):
        ControllerCore(ControllerConfig(max_groups=1), 0, recovered=records)


def test_config_is_validated():
    with pytest.raises(ConfigError, match="design"):
        ControllerConfig(design="fast")
    with pytest.raises(ConfigError, match="BugNoAllAck"):
        ControllerConfig(bugs={"BugNoAllAck"})
    with pytest.raises(ConfigError, match="controller_broker_heartbeat_timeout_ms"):
        ControllerConfig(controller_broker_heartbeat_timeout_ms=0)
    for bad in (-1, True, 1.5, "8"):
        with pytest.raises(ConfigError, match=f"max_groups = {bad!r}: must be a positive integer"):
            ControllerConfig(max_groups=bad)


# --- random events against the spec --------------------------------------------------------

GROUPS = ("g1", "g2")
ids = st.sampled_from(BROKER_IDS)
groups = st.sampled_from(GROUPS)
events = st.one_of(
    st.tuples(st.just("register"), groups, ids),
    st.tuples(st.just("heartbeat"), groups, ids, st.integers(0, 3), st.integers(0, 2)),
    st.tuples(st.just("advance"), st.sampled_from((1, TIMEOUT // 2, TIMEOUT, TIMEOUT + 1))),
    st.tuples(st.just("alter"), groups, st.one_of(st.just(None), ids), st.integers(-1, 0), st.integers(-1, 0),
              st.frozensets(ids, min_size=1)),
    st.tuples(st.just("toggle"), groups, ids),      # the master adds or drops one member, epochs right
    st.tuples(st.just("elect"), groups),
    st.tuples(st.just("info"), groups),
    st.tuples(st.just("tick")),
    st.tuples(st.just("durable"), st.booleans()),
)
event_lists = st.lists(events, max_size=50)


def run_events(evs, bugs=frozenset(), design="pipelined") -> str | None:
    """Drive a core with ``evs``; the first violation the driver finds, or None."""
    d = Driver(ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, design=design, bugs=bugs))
    try:
        for b in BROKER_IDS:        # g1 starts with three brokers; g2 only as the events say
            d.register("g1", b)
        for ev in evs:
            kind = ev[0]
            if kind == "register":
                d.register(ev[1], ev[2])
            elif kind == "heartbeat":
                d.heartbeat(ev[1], ev[2], max_offset=ev[3], priority=ev[4])
            elif kind == "advance":
                d.advance(ev[1])
            elif kind == "alter":
                g = d.core.groups.get(ev[1])
                cur = (g.master_id, g.master_epoch, g.sss_epoch) if g else (1, 1, 1)
                master = cur[0] if ev[2] is None else ev[2]
                d.alter(ev[1], master, cur[1] + ev[3], cur[2] + ev[4], ev[5])
            elif kind == "toggle":
                g = d.core.groups.get(ev[1])
                if g is not None:
                    d.alter(ev[1], g.master_id, g.master_epoch, g.sss_epoch, g.sync_state_set ^ {ev[2]})
            elif kind == "elect":
                d.elect(ev[1])
            elif kind == "info":
                d.info(ev[1])
            elif kind == "tick":
                d.tick()
            else:
                d.make_durable(None if ev[1] else (d.durable + 1))
        d.tick()
    except Violation as err:
        return str(err)
    return None


@pytest.mark.parametrize("design", ["pipelined", "serial"])
@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evs=event_lists)
def test_every_decision_is_a_spec_controller_step(design, evs):
    assert run_events(evs, design=design) is None


@pytest.mark.parametrize("bug", CONTROLLER_BUG_NAMES)
def test_each_controller_bug_is_caught_by_the_random_test(bug):
    """The same random events and checks find every controller-side bug switch."""
    found = find(event_lists, lambda evs: run_events(evs, bugs={bug}) is not None,
                 settings=settings(max_examples=5000, derandomize=True, deadline=None,
                                   suppress_health_check=list(HealthCheck)))
    assert run_events(found, bugs={bug}) is not None and run_events(found) is None


CAUGHT_BY_SCENARIO = {
    # SSS {1}; master 1 dies, 2 alive outside the SSS: an unclean election picks it
    "BugUncleanElection": "ElectMaster",
    # the master dies, 2 is in the SSS: elected in the same epoch as the old master
    "BugElectKeepsEpoch": "ElectMaster",
    # after 2 took over, old master 1 (alive again) proposes with its stale epochs
    "BugAlterWithoutFencing": "AlterSyncStateSet",
    # the master dies alone in its SSS, comes back: never re-elected
    "BugElectOnlyOnMasterDeath": "still has ElectMaster enabled",
}


@pytest.mark.parametrize("bug", CONTROLLER_BUG_NAMES)
def test_each_controller_bug_is_caught_in_its_scenario(bug):
    def scenario(bugs):
        d = group_of_three(ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, bugs=bugs))
        if bug in ("BugElectKeepsEpoch", "BugAlterWithoutFencing"):
            expand(d, {1, 2})
        d.advance(TIMEOUT + 1)
        if bug != "BugElectOnlyOnMasterDeath":
            d.heartbeat("g1", 2)
            d.heartbeat("g1", 3)
        d.tick()
        if bug == "BugAlterWithoutFencing":
            d.heartbeat("g1", 1)
            d.alter("g1", 1, 1, 2, {1, 2})
        if bug == "BugElectOnlyOnMasterDeath":
            d.heartbeat("g1", 1)
            d.tick()

    scenario(frozenset())
    with pytest.raises(Violation, match=CAUGHT_BY_SCENARIO[bug]):
        scenario(frozenset({bug}))


# --- cases no caller sends (issue 36: the mutation campaign's survivors) -------------------------

def test_the_defaults_are_rocketmqs():
    """BrokerConfig L357-372: controllerHeartBeatTimeoutMills 10 s; brokerElectionPriority
    Integer.MAX_VALUE, the least preferred (lower is preferred)."""
    from reference.failover.controller import ELECTION_PRIORITY_DEFAULT
    assert ControllerConfig().controller_broker_heartbeat_timeout_ms == 10_000
    assert ELECTION_PRIORITY_DEFAULT == 2**31 - 1


@pytest.mark.parametrize("explicit", [0, 2**31 - 2, 2**31 - 1])
def test_a_broker_that_states_no_priority_is_the_least_preferred(explicit):
    """A heartbeat without a priority (the wire's default) loses to any priority a broker can state
    below Integer.MAX_VALUE, and ties with Integer.MAX_VALUE itself (the broker id decides)."""
    d = group_of_three()
    expand(d, {1, 2, 3})
    d.advance(TIMEOUT + 1)
    d.core.broker_heartbeat(900, "g1", 2, d.now, max_offset=5)               # no priority stated
    d.core.broker_heartbeat(901, "g1", 3, d.now, max_offset=5, election_priority=explicit)
    d.settle()
    d.tick()
    assert state(d)[0] == (3 if explicit < 2**31 - 1 else 2)


def test_every_group_the_controller_holds_has_a_first_master_step():
    """The refinement check starts each group at the spec's Init: the first registration's step."""
    d = Driver(CFG)
    d.register("a", 2)
    d.register("a", 3)
    d.make_durable()
    first = [s for s in d.core.steps if s.group == "a"]
    assert [s.action for s in first] == ["FirstMaster"] and first[0].post.master_id == 2
    assert first[0].pre.master_epoch == 0 and first[0].post.master_epoch == 1


def test_serial_elects_only_when_the_metadata_before_it_is_durable():
    """The serial design's tick queues the election behind a record not yet durable."""
    d = Driver(ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, design="serial"))
    for b in BROKER_IDS:
        d.register("g1", b)
        d.make_durable()
    d.alter("g1", 1, 1, 1, {1, 2})                   # record 4, not yet durable
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2)
    d.core.tick(d.now)
    d.settle()
    assert len(d.issued) == 4 and len(d.core.backlog) == 1, "elected while a record was not durable"
    d.make_durable()
    assert len(d.issued) == 5 and state(d)[:2] == (2, 2)


def test_serial_elects_a_group_again_after_its_queued_election_ran():
    d = group_of_three(design="serial")
    expand(d, {1, 2})
    for master, heir in ((1, 2), (2, 1)):
        d.advance(TIMEOUT + 1)
        d.heartbeat("g1", heir)
        d.tick()
        assert state(d)[0] == heir, f"the death of {master} was never acted on"
        d.heartbeat("g1", master)                     # back, and caught up: a member again
        expand(d, {1, 2})


def test_a_failed_store_answers_only_requests_not_its_own_elections():
    """A queued election of the tick has no requester: failing it answers nobody."""
    d = Driver(ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, design="serial"))
    for b in BROKER_IDS:
        d.register("g1", b)
        d.make_durable()
    d.alter("g1", 1, 1, 1, {1, 2})
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2)
    d.core.tick(d.now)
    r = d.info("g1")
    d.core.metadata_failed(len(d.issued), "EIO", d.now)
    replies = [e for e in d.core.take_effects() if isinstance(e, fx.Reply)]
    assert sorted(e.req_id for e in replies) == [4, r], replies
    assert all(e.code == fx.CONTROLLER_METADATA_NOT_DURABLE for e in replies)


def test_the_next_wakeup_is_now_only_when_a_masterless_group_heard_from_a_broker():
    d = group_of_three()
    d.tick()
    assert d.core.next_wakeup_ms() > d.now
    d.advance(TIMEOUT + 1)
    d.tick()                                          # nobody alive: the master is cleared
    assert state(d)[0] == NO_MASTER
    assert d.core.next_wakeup_ms() > d.now, "a masterless group nobody is heard from is not due"
    d.core.broker_heartbeat(900, "g1", 1, d.now)
    assert d.core.next_wakeup_ms() == d.now, "a masterless group with a live member is due now"


def test_an_unfenced_alter_may_drop_the_current_master_and_only_the_refinement_check_says_so():
    """BugAlterWithoutFencing: old master 1 proposes a set without the new master 2.  The core
    takes it, as the spec's variant does (no assertion of the correct design stops it), and the
    driver's check names the step."""
    bugged = ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, bugs={"BugAlterWithoutFencing"})
    d = group_of_three(bugged)
    expand(d, {1, 2})
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2)
    d.heartbeat("g1", 3)
    d.tick()
    assert state(d)[0] == 2
    d.heartbeat("g1", 1)
    with pytest.raises(Violation, match="AlterSyncStateSet"):
        d.alter("g1", 1, 1, 2, {1, 3})
    assert state(d)[2] == (1, 3)


def test_the_default_bounds_hold_at_their_edges():
    """4,096 groups, 16 brokers in a group, 65,536 requests waiting: one more of each is refused."""
    from reference.failover.controller import MAX_BROKERS_PER_GROUP_DEFAULT, MAX_GROUPS_DEFAULT, MAX_PENDING_DEFAULT
    assert (MAX_GROUPS_DEFAULT, MAX_BROKERS_PER_GROUP_DEFAULT, MAX_PENDING_DEFAULT) == (4096, 16, 1 << 16)
    core = ControllerCore(ControllerConfig(), 0)
    for i in range(MAX_GROUPS_DEFAULT + 1):
        core.register_broker(i, f"g{i}", 1, 0)
    for b in range(2, MAX_BROKERS_PER_GROUP_DEFAULT + 2):
        core.register_broker(10_000 + b, "g0", b, 0)
    held = len(core.held)                   # every answer waits for the records before it
    assert held == MAX_GROUPS_DEFAULT + 1 + MAX_BROKERS_PER_GROUP_DEFAULT
    for i in range(MAX_PENDING_DEFAULT - held + 1):
        core.get_replica_info(20_000 + i, "g0", 0)
    core.metadata_durable(core.issued_token, 0)
    replies = {e.req_id: e.code for e in core.take_effects() if isinstance(e, fx.Reply) and not e.ok}
    assert replies == {MAX_GROUPS_DEFAULT: fx.CONTROLLER_LIMIT_REACHED,
                       10_000 + MAX_BROKERS_PER_GROUP_DEFAULT + 1: fx.CONTROLLER_LIMIT_REACHED,
                       20_000 + MAX_PENDING_DEFAULT - held: fx.CONTROLLER_BUSY}


@pytest.mark.parametrize("heard, silent", [(2, 3), (3, 2)])
def test_a_registered_broker_not_yet_heard_from_counts_as_an_empty_log(heard, silent):
    """BrokerLiveInfo before the first heartbeat: epoch 0 and offset 0, exactly what an empty broker
    reports; with equal priorities the broker id decides between them."""
    from reference.failover.effects import MetadataRecord
    core = ControllerCore(CFG, 0, recovered=[MetadataRecord("g", (1,), 1, 1, (1,), 1)])
    core.register_broker(1, "g", silent, 0, election_priority=7)
    core.register_broker(6, "g", heard, 0, election_priority=7)
    core.alter_sync_state_set(3, "g", 1, 1, 1, {1, 2, 3}, 0)
    core.metadata_durable(core.issued_token, 0)
    core.register_broker(4, "g", silent, TIMEOUT + 1)         # alive: registered again, no heartbeat
    core.broker_heartbeat(5, "g", heard, TIMEOUT + 1, election_priority=7)      # states no epoch, no offset
    core.tick(TIMEOUT + 1)
    assert core.groups["g"].master_id == 2


def test_recovered_metadata_of_a_group_that_never_had_a_master_is_refused():
    from reference.failover.effects import MetadataRecord
    top = ControllerCore(CFG, 0, recovered=[MetadataRecord("g", (1, 2), 1, 2**32 - 2, (1,), 2**32 - 2)])
    assert top.groups["g"].master_epoch == 2**32 - 2, "the largest epoch whose next election still fits a u32"
    for epochs in ((0, 1), (1, 0), (2**32 - 1, 1), (1, 2**32 - 1), (2**32, 1), (1, 2**32)):
        record = MetadataRecord("g", (1, 2), NO_MASTER, epochs[0], (1,), epochs[1])
        with pytest.raises(ConfigError, match=r"first master \(both 1\.\.4294967294\)"):
            ControllerCore(CFG, 0, recovered=[record])


def test_only_a_masterless_group_makes_work_for_now():
    """At 10,000 groups a heartbeat or registration must not wake the scan: only a group without
    a master (which a live member may now fill) is looked at before the next expiry."""
    d = group_of_three()
    d.tick()
    d.core.broker_heartbeat(900, "g1", 2, d.now)
    d.core.register_broker(901, "g1", 3, d.now)
    assert d.core.next_wakeup_ms() > d.now
    d.settle()


def test_the_scan_wakes_the_first_millisecond_a_heartbeat_is_too_old():
    d = group_of_three()                        # every broker heard at 0
    d.tick()
    assert d.core.next_wakeup_ms() == TIMEOUT + 1, "alive up to TIMEOUT (<=), dead one ms later"
    d.advance(TIMEOUT + 1)
    d.tick()                                    # nobody alive: the master is cleared
    assert state(d)[0] == NO_MASTER
    assert d.core.next_wakeup_ms() == d.now + TIMEOUT, "no live broker: nothing expires; look again in a timeout"


def test_a_partial_sync_releases_exactly_the_replies_it_covers():
    d = group_of_three()
    r1 = d.alter("g1", 1, 1, 1, {1, 2})
    r2 = d.alter("g1", 1, 1, 2, {1, 2, 3})
    d.make_durable(len(d.issued) - 1)
    assert r1 in d.replies and r2 not in d.replies
    d.make_durable()
    assert answer(d, r2).ok


def test_the_serial_designs_queue_counts_toward_max_pending():
    d = Driver(ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, design="serial", max_pending=2))
    d.register("a", 1)                          # its reply waits for its record
    d.info("a")                                 # queued behind it
    r = d.info("a")
    assert answer(d, r).code == fx.CONTROLLER_BUSY


def test_a_member_registering_again_in_a_masterless_group_is_looked_at_now():
    d = group_of_three()
    d.advance(TIMEOUT + 1)
    d.tick()
    assert state(d)[0] == NO_MASTER
    d.core.register_broker(900, "g1", 1, d.now)
    assert d.core.next_wakeup_ms() == d.now
    d.settle()
    d.tick()
    assert state(d)[:2] == (1, 3)


def test_an_elect_request_with_no_live_member_clears_the_master_and_says_so():
    d = group_of_three()
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 3)                        # alive, but not in the SyncStateSet {1}
    r = d.elect("g1")
    d.make_durable()
    assert answer(d, r).code == fx.CONTROLLER_MASTER_NOT_AVAILABLE and "cleared" in answer(d, r).reason
    assert state(d) == (NO_MASTER, 2, (1,), 1)
    r = d.elect("g1")
    assert answer(d, r).code == fx.CONTROLLER_MASTER_NOT_AVAILABLE and "no live broker" in answer(d, r).reason


def test_recovered_metadata_at_the_bounds_is_taken_and_one_past_them_is_refused():
    from reference.failover.effects import MetadataRecord
    MAX_BROKER_ID = 2**62                                 # the wire's bound too (wire.py), written out
    cfg = ControllerConfig(max_groups=2, max_brokers_per_group=3)
    edge = [MetadataRecord("a", (1, 2, MAX_BROKER_ID), MAX_BROKER_ID, 3, (1, MAX_BROKER_ID), 4),
            MetadataRecord("b", (1,), NO_MASTER, 2, (1,), 1)]
    core = ControllerCore(cfg, 0, recovered=edge)
    assert core.groups["a"].master_id == MAX_BROKER_ID and core.groups["b"].master_id == NO_MASTER
    too_many = MetadataRecord("a", (1, 2, 3, 4), 1, 1, (1,), 1)
    with pytest.raises(ConfigError, match="4 brokers, more than max_brokers_per_group = 3"):
        ControllerCore(cfg, 0, recovered=[too_many])
    for bad in (MetadataRecord("a", (0, 1), 1, 1, (1,), 1), MetadataRecord("a", (1,), -1, 1, (1,), 1),
                MetadataRecord("a", (1,), 1, 1, (1, MAX_BROKER_ID + 1), 1),
                MetadataRecord("a", (1,), MAX_BROKER_ID + 1, 1, (1,), 1)):
        with pytest.raises(ConfigError, match="broker ids"):
            ControllerCore(cfg, 0, recovered=[bad])
    with pytest.raises(ConfigError, match=r"broker ids \[-3, -2, -1\]: ids are 1\.\.4611686018427387904"):
        ControllerCore(cfg, 0, recovered=[MetadataRecord("a", (-3, -2, -1), 1, 1, (0,), 1)])


def test_a_durable_report_that_says_nothing_new_is_harmless():
    d = group_of_three()
    r = d.alter("g1", 1, 1, 1, {1, 2})
    d.make_durable()
    d.core.metadata_durable(d.durable, d.now)          # the store says the same again
    assert d.core.take_effects() == [] and answer(d, r).ok


def test_the_scans_queued_elections_count_toward_max_pending():
    """Serial design: elections the scan queued are waiting work too; a request past the bound is
    refused at once rather than held behind them."""
    cfg = ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, design="serial", max_pending=3)
    d = Driver(cfg)
    for g in ("a", "b", "c", "e", "f"):
        d.register(g, 1)
        d.make_durable()
    d.advance(TIMEOUT + 1)
    d.core.tick(d.now)                                  # five masters dead: one election runs, four wait
    d.settle()
    assert len(d.core.backlog) == 4                     # past max_pending already
    r = d.info("a")
    assert answer(d, r).code == fx.CONTROLLER_BUSY


@pytest.mark.parametrize("design", ["pipelined", "serial"])
def test_a_recovered_masterless_group_is_elected_at_the_first_tick(design):
    from reference.failover.effects import MetadataRecord
    cfg = ControllerConfig(controller_broker_heartbeat_timeout_ms=TIMEOUT, design=design)
    core = ControllerCore(cfg, 5_000, recovered=[MetadataRecord("g", (1, 2), NO_MASTER, 3, (2,), 4)])
    assert core.next_wakeup_ms() <= 5_000
    core.tick(5_000)
    assert (core.groups["g"].master_id, core.groups["g"].master_epoch) == (2, 4)


def test_recovered_group_names_are_what_a_registration_could_name():
    from reference.failover.effects import MetadataRecord
    longest = "g" * 255
    core = ControllerCore(CFG, 0, recovered=[MetadataRecord(longest, (1,), 1, 1, (1,), 1)])
    assert longest in core.groups
    for bad in ("", "g" * 256, "é" * 128):
        with pytest.raises(ConfigError, match="a registration names 1..255") as refused:
            ControllerCore(CFG, 0, recovered=[MetadataRecord(bad, (1,), 1, 1, (1,), 1)])
        if bad.startswith("g"):
            assert f"'{'g' * 40}'..." in str(refused.value), "the name cut to 40 characters"

