"""Several controllers over one etcd: which controller decides for which
broker group, and how its writes are fenced (issue 37; docs/controllers.md,
the design model docs/design/controllers/Controllers.tla).  Sans-IO: the
runtime (reference/real/controller_cluster.py) feeds it what etcd said and
performs what it returns.

* **Shards.**  A group belongs to shard ``crc32(name) % shards``.  A shard
  is owned by the controller whose key ``shards/<s>`` holds it, put with the
  controller's etcd lease only while the key was absent (the election recipe:
  compare ``create_revision == 0``).  That key's ``create_revision`` is the
  owner's fencing token.
* **Who takes a free shard.**  Rendezvous hashing over the live controllers
  (their ``members/<id>`` keys, on the same lease): the preferred member
  takes it at once; any member takes one left free for ``ORPHAN_TURNS``
  surveys (the preferred one's view may differ).  An owner gives a shard
  back when another live member is preferred (a restarted controller gets
  its share back).
* **One ControllerCore per owned shard**, built from the shard's records
  read from etcd at takeover.  ``ControllerCore._restore`` counts every
  registered broker as heard from at that moment: the takeover grace of the
  design (a new owner never expires a broker it simply has not heard yet).
* **Fenced commits.**  A shard's records go out as one transaction::

      if create_revision(shards/<s>) == token
         and mod_revision(meta key of g) == last known, for each g:
          put each g's record (and its brokers' addresses)
      else: read shards/<s> and each meta key

  A failed compare is decided by ``judge``: the shard key gone or
  re-created means the shard was lost (its held replies fail with
  CONTROLLER_METADATA_NOT_DURABLE: not decided here, and the broker asks
  again, at the new owner); every
  key holding what we wrote means an earlier attempt committed though its
  answer was lost; anything else is another writer, and the shard is
  dropped and taken afresh — re-read and retried, never an exit.

Bug switches (the design model's, with the same names):
``BugCommitWithoutCompare`` — a commit compares nothing (the DLedger
controller's blind apply); ``BugOwnerSkipsMetadataCompare`` — a commit
compares the shard token only, not the group key's revision;
``BugActAfterLeaseExpired`` — an owner keeps acting after its lease
expired: it neither stops when its keep-alives go unanswered nor compares
the shard token, so an owner paused past its lease still writes;
``BugNoTakeoverGrace`` — a new owner counts every broker as last heard long
ago, so it deposes a master it simply had not heard yet.

All shard counts must agree: the first controller records its
``--shards`` in etcd (``CONFIG``) and a controller with another count is
refused (a group would hash into two shards, two owners).
"""

from __future__ import annotations

import zlib

import attrs

from reference.failover.controller import ControllerConfig, ControllerCore
from reference.failover.effects import MetadataRecord

SHARDS_DEFAULT = 16
LEASE_TTL_S_DEFAULT = 3      # a controller's etcd lease: its shards are free this long after it dies
MAX_SHARDS = 1024
ORPHAN_TURNS = 3             # surveys a free shard waits for its preferred member before anyone takes it
MAX_MEMBERS = 64
MAX_CONTROLLER_ID_BYTES = 64
LEASE_SAFE_FRACTION = 2 / 3  # act for the shards only this far into the lease since the last keep-alive
MAX_GROUPS_PER_TXN = 32      # etcd's --max-txn-ops (128): two puts per group, the shard compare and one per group
SHARD_BUG_NAMES = ("BugCommitWithoutCompare", "BugOwnerSkipsMetadataCompare", "BugNoTakeoverGrace",
                   "BugActAfterLeaseExpired")      # tla/AckOrderControllers.tla's, same names and order

ROOT = "/ackorder/rc/"
MEMBERS = ROOT + "members/"
CONFIG = ROOT + "config"
SHARDS = ROOT + "shards/"
GROUPS = ROOT + "g/"


def shard_of(group: str, shards: int) -> int:
    assert 1 <= shards <= MAX_SHARDS, shards
    return zlib.crc32(group.encode()) % shards


def preferred(shard: int, members) -> str | None:
    """Rendezvous hashing: the live member with the highest weight for this shard."""
    return max(members, key=lambda m: (zlib.crc32(f"{shard}/{m}".encode()), m), default=None)


def shard_key(shard: int) -> bytes:
    return f"{SHARDS}{shard:04d}".encode()


def member_key(member: str) -> bytes:
    return (MEMBERS + member).encode()


def shard_prefix(shard: int) -> bytes:
    return f"{GROUPS}{shard:04d}/".encode()


def group_prefix(shard: int, group: str) -> bytes:
    """Hex of the name: no group name can be a prefix of another's keys."""
    return shard_prefix(shard) + group.encode().hex().encode() + b"/"


def meta_key(shard: int, group: str) -> bytes:
    return group_prefix(shard, group) + b"m"


def address_key(shard: int, group: str) -> bytes:
    return group_prefix(shard, group) + b"a"


def owner_value(member: str, address: str) -> bytes:
    """``<id> <HOST:PORT>``; an IPv6 host is bracketed (``[::1]:9878``)."""
    return f"{member} {address}".encode()


def parse_owner(value: bytes) -> tuple[str, str] | None:
    """(member id, HOST:PORT) of a shard or member key's value, None if malformed."""
    try:
        member, address = value.decode().split(" ")
    except ValueError:
        return None
    host, sep, port = address.rpartition(":")
    if not member or not sep or not host or not port.isdigit() or (":" in host and not host.startswith("[")):
        return None
    return member, address


def split_address(address: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 bracketed) -> (host, port), the form a socket connects to."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@attrs.frozen
class Survey:
    """One read of the members and the shard keys (etcd, linearizable)."""
    members: dict[str, str]                 # live member id -> HOST:PORT it serves brokers on
    owners: dict[int, tuple[str, int]]      # shard -> (owner member id, the key's create_revision)


@attrs.frozen
class Put:
    key: bytes
    value: bytes
    expect_mod_revision: int | None         # None: no compare for this key


@attrs.frozen
class Commit:
    """One fenced transaction of a shard: what the runtime sends to etcd as it is."""
    shard: int
    token: int                              # the shard key's create_revision we hold (0: not compared)
    puts: tuple[Put, ...]
    up_to: int                              # the last PersistMetadata token of the shard's core it covers


@attrs.define
class Owned:
    """A shard this controller owns: its core and what its commits know."""
    shard: int
    token: int                              # create_revision of our shard key
    core: ControllerCore
    revisions: dict[str, int] = attrs.Factory(dict)    # group -> mod_revision of its meta key, last read or written
    staged: dict[str, MetadataRecord] = attrs.Factory(dict)
    staged_first: dict[str, int] = attrs.Factory(dict)   # group -> the first core token its staged record covers
    staged_up_to: int = 0
    addresses_dirty: set[str] = attrs.Factory(set)
    in_flight: Commit | None = None


class ShardTable:
    """What one controller owns, and where the others' shards are."""

    def __init__(self, me: str, shards: int, config: ControllerConfig, bugs=frozenset(),
                 routing_lag_ms: int = 0) -> None:
        """``routing_lag_ms``: how long after a takeover a broker's heartbeat may still go astray (the
        other controllers learn the new owner on their next survey; a broker moves on from a
        controller that answers CONTROLLER_NOT_LEADER): added to the takeover grace."""
        assert 1 <= shards <= MAX_SHARDS and set(bugs) <= set(SHARD_BUG_NAMES), (shards, bugs)
        assert routing_lag_ms >= 0, routing_lag_ms
        self.me, self.shards, self.cfg, self.bugs = me, shards, config, frozenset(bugs)
        self.routing_lag_ms = routing_lag_ms
        self.owned: dict[int, Owned] = {}
        self.taking: set[int] = set()
        self.owners: dict[int, tuple[str, int]] = {}
        self.members: dict[str, str] = {}
        self._free_turns: dict[int, int] = {}

    # ------------------------------------------------------------------ ownership

    def plan(self, survey: Survey) -> tuple[list[int], list[int], list[int]]:
        """From one survey: (shards to take, shards to give back, owned shards lost: their key is
        gone or another's)."""
        assert len(survey.members) <= MAX_MEMBERS, len(survey.members)
        self.members, self.owners = dict(survey.members), dict(survey.owners)
        lost = [s for s, o in self.owned.items() if survey.owners.get(s) != (self.me, o.token)]
        take, give = [], []
        for s in range(self.shards):
            owner = survey.owners.get(s)
            if owner is None:
                turns = self._free_turns[s] = self._free_turns.get(s, 0) + 1
                if s not in self.taking and (preferred(s, survey.members) == self.me or turns > ORPHAN_TURNS):
                    take.append(s)
                continue
            self._free_turns.pop(s, None)
            want = preferred(s, survey.members)
            if owner[0] != self.me or s in lost or s in self.taking:
                continue
            if s not in self.owned:
                # ours in etcd but not here (dropped when a keep-alive stalled, or a malformed shard):
                # given back, or nobody could take it while our lease lives
                give.append(s)
            elif want not in (None, self.me):
                give.append(s)
        return take, give, lost

    def adopt(self, shard: int, token: int, records: list[tuple[MetadataRecord, int]], now_ms: int) -> Owned:
        """We took the shard (its key, created at ``token``) and read its groups: (record, mod_revision).
        ValueError when a record belongs to another shard (etcd holds what this code never writes)."""
        assert shard not in self.owned and token > 0, (shard, token)
        if stray := [r.group for r, _ in records if shard_of(r.group, self.shards) != shard]:
            raise ValueError(f"shard {shard} holds groups of other shards: {stray[:3]}")
        self.taking.discard(shard)
        core = ControllerCore(self.cfg, now_ms, [r for r, _ in records])
        # the grace: every broker counts as heard from now (ControllerCore._restore), and for as long
        # again as its heartbeats may take to find the new owner
        heard_ms = now_ms + self.routing_lag_ms
        if "BugNoTakeoverGrace" in self.bugs:
            heard_ms = now_ms - self.cfg.controller_broker_heartbeat_timeout_ms - 1
        for g in core.groups.values():
            for b in g.brokers.values():
                b.last_heartbeat_ms = heard_ms
        o = self.owned[shard] = Owned(shard, token, core, {r.group: rev for r, rev in records})
        self.owners[shard] = (self.me, token)
        return o

    def drop(self, shard: int) -> Owned | None:
        self.taking.discard(shard)
        if self.owners.get(shard, ("",))[0] == self.me:
            del self.owners[shard]
        return self.owned.pop(shard, None)

    def lease_fresh(self, since_keepalive_s: float, lease_ttl_s: int) -> bool:
        """Whether this controller may still act for its shards: etcd counts the lease from when it
        processed the last keep-alive, at most ``since_keepalive_s`` ago, so up to 2/3 of the TTL
        (clock rates, the answer's way back) it cannot have expired.  BugActAfterLeaseExpired
        acts on regardless."""
        return "BugActAfterLeaseExpired" in self.bugs or since_keepalive_s <= lease_ttl_s * LEASE_SAFE_FRACTION

    # ------------------------------------------------------------------ routing

    def route(self, group: str) -> tuple[str, int, str | None]:
        """("local", shard, None), ("forward", shard, owner's HOST:PORT) or ("none", shard, None)."""
        s = shard_of(group, self.shards)
        if s in self.owned:
            return "local", s, None
        owner = self.owners.get(s)
        if owner is not None and owner[0] != self.me and owner[0] in self.members:
            return "forward", s, self.members[owner[0]]
        return "none", s, None

    # ------------------------------------------------------------------ commits

    def stage(self, shard: int, token: int, record: MetadataRecord) -> None:
        o = self.owned[shard]
        assert token > o.staged_up_to, (token, o.staged_up_to)
        o.staged[record.group] = record
        o.staged_first.setdefault(record.group, token)
        o.staged_up_to = token

    def next_commit(self, shard: int, addresses: dict[str, dict[int, str]], encode, encode_addresses) -> Commit | None:
        """The shard's staged records (the last of each group; at most MAX_GROUPS_PER_TXN groups,
        the rest in the next), as one fenced transaction; None if one is in flight or nothing waits."""
        o = self.owned[shard]
        if o.in_flight is not None or not (o.staged or o.addresses_dirty):
            return None
        groups = list(dict.fromkeys([*o.staged, *sorted(o.addresses_dirty)]))[:MAX_GROUPS_PER_TXN]
        blind = "BugCommitWithoutCompare" in self.bugs
        puts = []
        for g in groups:
            if g in o.staged:
                expect = None if blind or "BugOwnerSkipsMetadataCompare" in self.bugs else o.revisions.get(g, 0)
                puts.append(Put(meta_key(shard, g), encode(o.staged.pop(g)), expect))
                del o.staged_first[g]
            if g in o.addresses_dirty:
                o.addresses_dirty.discard(g)
                puts.append(Put(address_key(shard, g), encode_addresses(addresses.get(g, {})), None))
        # the core's token this commit makes durable: all of them if nothing is left staged, else
        # every token before the first one a record still staged covers
        up_to = o.staged_up_to if not o.staged else max(o.core.durable_token, min(o.staged_first.values()) - 1)
        fenced = not blind and "BugActAfterLeaseExpired" not in self.bugs
        o.in_flight = Commit(shard, o.token if fenced else 0, tuple(puts), up_to)
        return o.in_flight

    def committed(self, commit: Commit, revision: int) -> int:
        """The transaction succeeded at ``revision``: the core token now durable."""
        o = self.owned[commit.shard]
        assert o.in_flight is commit, (o.in_flight, commit)
        o.in_flight = None
        for p in commit.puts:
            if p.key.endswith(b"/m"):
                o.revisions[group_of(p.key)] = revision
        return commit.up_to

    def settle(self, commit: Commit, answer: tuple) -> tuple[str, int]:
        """The runtime's answer to a commit — ("ok", revision), ("failed", the shard key's owner now,
        {key: (value, mod_revision)}) from the transaction's failure branch, or ("error", reason): no
        answer (etcd unreachable: it may or may not have applied it) — as (what to do, the core
        token now durable)."""
        o = self.owned.get(commit.shard)
        if o is None or o.in_flight is not commit:
            return STALE, 0                # lost and perhaps taken again since: its replies failed already
        if answer[0] == "ok":
            return DURABLE, self.committed(commit, answer[1])
        if answer[0] == "error":
            return LOSE, 0
        verdict = self.judge(commit, answer[1], answer[2])
        if verdict == "ours":
            return DURABLE, commit.up_to
        return (LOSE if verdict == "lost" else GIVE_BACK), 0

    def judge(self, commit: Commit, shard_now: tuple[str, int] | None, held: dict[bytes, tuple[bytes, int]]) -> str:
        """A failed compare, with what the failure branch read: "lost" (the shard key is not ours),
        "ours" (every key holds what we wrote: an earlier attempt committed), or "conflict"."""
        o = self.owned[commit.shard]
        if shard_now != (self.me, o.token):
            return "lost"
        if all(held.get(p.key, (None,))[0] == p.value for p in commit.puts if p.expect_mod_revision is not None):
            o.in_flight = None
            for p in commit.puts:
                if p.key in held and p.key.endswith(b"/m"):
                    o.revisions[group_of(p.key)] = held[p.key][1]
            return "ours"
        return "conflict"


# What a commit's answer means for its shard (ShardTable.settle): release the replies up to a token;
# nothing (the shard was lost and taken again meanwhile); lose the shard; lose it and give its key back
# (another controller wrote: take it afresh from a new read).
DURABLE, STALE, LOSE, GIVE_BACK = "durable", "stale", "lose", "give back"


def group_of(key: bytes) -> str:
    return bytes.fromhex(key.rsplit(b"/", 2)[-2].decode()).decode()
