"""The sans-IO side of several controllers (reference/failover/shards.py): who takes which
shard, where a request goes, what a commit compares, and how a failed compare is judged."""

from __future__ import annotations

import pytest

from reference.failover import shards as sh
from reference.failover.controller import ControllerConfig
from reference.failover.effects import MetadataRecord, PersistMetadata
from reference.failover.metadata import encode

CFG = ControllerConfig(controller_broker_heartbeat_timeout_ms=1000)


def enc_addresses(known) -> bytes:
    return b"{}"


def survey(owners: dict[int, tuple[str, int]], members=("c0", "c1", "c2")) -> sh.Survey:
    return sh.Survey({m: f"127.0.0.1:{9000 + k}" for k, m in enumerate(members)}, owners)


def test_every_free_shard_goes_to_its_preferred_member_and_an_orphan_to_anyone():
    tables = {m: sh.ShardTable(m, 16, CFG) for m in ("c0", "c1", "c2")}
    takes = {m: t.plan(survey({}))[0] for m, t in tables.items()}
    assert sorted(s for v in takes.values() for s in v) == list(range(16))        # each once
    assert all(sh.preferred(s, ("c0", "c1", "c2")) == m for m, v in takes.items() for s in v)
    # a preferred member that never takes its shard: after ORPHAN_TURNS surveys anyone does
    lone = sh.ShardTable("c0", 16, CFG)
    for _ in range(sh.ORPHAN_TURNS):
        take = lone.plan(survey({}))[0]
    assert take != list(range(16))
    assert lone.plan(survey({}))[0] == list(range(16))


def test_a_shard_is_given_back_to_its_preferred_member_and_a_dropped_one_released():
    t = sh.ShardTable("c0", 4, CFG)
    owners = {s: ("c0", 10 + s) for s in range(4)}
    for s in range(4):
        t.adopt(s, 10 + s, [], 0)
    _, give, lost = t.plan(survey(owners))
    assert lost == [] and give == [s for s in range(4) if sh.preferred(s, ("c0", "c1", "c2")) != "c0"]
    t.drop(0)           # dropped here (a stalled keep-alive) while etcd still names us: released, not stranded
    _, give, _ = t.plan(survey(owners))
    assert 0 in give
    # a key that is gone, or another's, is lost
    t2 = sh.ShardTable("c0", 4, CFG)
    t2.adopt(1, 5, [], 0)
    t2.adopt(2, 6, [], 0)
    assert t2.plan(survey({1: ("c1", 7), 2: ("c0", 99)}))[2] == [1, 2]


def test_route_local_forward_or_none():
    t = sh.ShardTable("c0", 16, CFG)
    g = "broker-a"
    s = sh.shard_of(g, 16)
    t.plan(survey({s: ("c1", 3)}))
    assert t.route(g) == ("forward", s, "127.0.0.1:9001")
    t.plan(survey({s: ("gone", 3)}))
    assert t.route(g) == ("none", s, None)          # an owner that is no live member: nobody to forward to
    t.plan(survey({}))
    t.adopt(s, 4, [], 0)
    assert t.route(g) == ("local", s, None)


def _owned(bugs=frozenset(), groups=40):
    t = sh.ShardTable("c0", 1, CFG, bugs)
    o = t.adopt(0, 7, [], 0)
    for k in range(groups):
        o.core.register_broker(k + 1, f"g{k:03d}", 1, 0)
    for e in o.core.take_effects():
        if isinstance(e, PersistMetadata):
            t.stage(0, e.token, e.record)
    return t, o


def test_a_commit_of_more_groups_than_a_txn_holds_releases_only_what_it_covers():
    t, o = _owned()
    first = t.next_commit(0, {}, encode, enc_addresses)
    assert len([p for p in first.puts if p.key.endswith(b"/m")]) == sh.MAX_GROUPS_PER_TXN
    assert first.up_to == sh.MAX_GROUPS_PER_TXN          # tokens 1..32: the groups in it
    assert t.next_commit(0, {}, encode, enc_addresses) is None          # one in flight at a time
    assert t.committed(first, 100) == sh.MAX_GROUPS_PER_TXN
    second = t.next_commit(0, {}, encode, enc_addresses)
    assert second.up_to == 40 and all(p.expect_mod_revision == 0 for p in second.puts)
    assert first.token == 7 and all(p.expect_mod_revision == 0 for p in first.puts)


@pytest.mark.parametrize("bug, token, compares", [
    (frozenset(), 7, True),
    (frozenset({"BugCommitWithoutCompare"}), 0, False),
    (frozenset({"BugOwnerSkipsMetadataCompare"}), 7, False),
    (frozenset({"BugActAfterLeaseExpired"}), 0, True),
])
def test_what_a_commit_compares_under_each_switch(bug, token, compares):
    t, o = _owned(bug, groups=1)
    c = t.next_commit(0, {}, encode, enc_addresses)
    assert c.token == token and (c.puts[0].expect_mod_revision is not None) == compares


def test_a_failed_compare_is_ours_lost_or_a_conflict():
    t, o = _owned(groups=1)
    c = t.next_commit(0, {}, encode, enc_addresses)
    key, value = c.puts[0].key, c.puts[0].value
    assert t.judge(c, ("c1", 9), {key: (value, 50)}) == "lost"
    assert t.judge(c, None, {}) == "lost"
    assert t.judge(c, ("c0", 7), {key: (b"another record", 50)}) == "conflict"
    assert t.judge(c, ("c0", 7), {key: (value, 50)}) == "ours"         # an earlier attempt landed
    assert o.in_flight is None and o.revisions["g000"] == 50


def test_takeover_grace_and_the_bug_without_it():
    rec = MetadataRecord("broker-a", (1, 2), 1, 3, (1, 2), 4)
    s = sh.shard_of("broker-a", 16)
    ok = sh.ShardTable("c0", 16, CFG, routing_lag_ms=2000).adopt(s, 3, [(rec, 9)], 10_000)
    assert ok.core.alive(ok.core.groups["broker-a"], 1, 10_000 + 1000 + 2000)     # timeout + routing lag
    ok.core.tick(10_000)
    assert ok.core.take_effects() == []                                    # nobody deposed
    bad = sh.ShardTable("c0", 16, CFG, frozenset({"BugNoTakeoverGrace"})).adopt(s, 3, [(rec, 9)], 10_000)
    bad.core.tick(10_000)
    assert any(isinstance(e, PersistMetadata) and e.record.master_epoch == 4 for e in bad.core.take_effects())


def test_a_record_stored_under_another_shard_is_refused():
    rec = MetadataRecord("broker-a", (1,), 1, 1, (1,), 1)
    other = (sh.shard_of("broker-a", 16) + 1) % 16
    with pytest.raises(ValueError, match="other shards"):
        sh.ShardTable("c0", 16, CFG).adopt(other, 3, [(rec, 9)], 0)


@pytest.mark.parametrize("value, parsed", [
    (b"c0 127.0.0.1:9878", ("c0", "127.0.0.1:9878")),
    (b"c0 [::1]:9878", ("c0", "[::1]:9878")),
    (b"c0 ::1:9878", None),
    (b"c0 host", None),
    (b"c0 host:port", None),
    (b"c0", None),
    (b"\xff\xfe", None),
    (b"c0 a:1 extra", None),
])
def test_owner_values(value, parsed):
    assert sh.parse_owner(value) == parsed
    if parsed:
        host, port = sh.split_address(parsed[1])
        assert sh.join_address(host, port) == parsed[1]


def test_an_owner_acts_for_two_thirds_of_its_lease_and_the_bug_on_regardless():
    t = sh.ShardTable("c0", 1, CFG)
    assert t.lease_fresh(1.9, 3) and not t.lease_fresh(2.1, 3)
    assert sh.ShardTable("c0", 1, CFG, frozenset({"BugActAfterLeaseExpired"})).lease_fresh(60.0, 3)


def test_what_a_commits_answer_means():
    t, o = _owned(groups=1)
    c = t.next_commit(0, {}, encode, enc_addresses)
    key, value = c.puts[0].key, c.puts[0].value
    assert t.settle(c, ("ok", 90)) == (sh.DURABLE, 1) and o.revisions["g000"] == 90
    assert t.settle(c, ("ok", 91)) == (sh.STALE, 0)              # no longer the one in flight
    o.core.alter_sync_state_set(99, "g000", 1, 1, 1, {1}, 0)     # refused (same set): nothing staged
    o.core.register_broker(100, "g000", 2, 0)
    for e in o.core.take_effects():
        if isinstance(e, PersistMetadata):
            t.stage(0, e.token, e.record)
    c2 = t.next_commit(0, {}, encode, enc_addresses)
    assert t.settle(c2, ("error", "no answer")) == (sh.LOSE, 0)
    assert t.settle(c2, ("failed", ("c0", 7), {c2.puts[0].key: (b"x", 95)})) == (sh.GIVE_BACK, 0)
    assert t.settle(c2, ("failed", ("c1", 8), {})) == (sh.LOSE, 0)
    assert t.settle(c2, ("failed", ("c0", 7), {c2.puts[0].key: (c2.puts[0].value, 96)})) == (sh.DURABLE, c2.up_to)
    assert key and value
