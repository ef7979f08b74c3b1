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


def test_election_ties_go_to_priority_then_broker_id():
    d = group_of_three()
    expand(d, {1, 2, 3})
    d.advance(TIMEOUT + 1)
    d.heartbeat("g1", 2, max_offset=5, priority=1)
    d.heartbeat("g1", 3, max_offset=5, priority=0)
    d.tick()
    assert state(d)[0] == 3


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
