"""The nemeses of a chaos run (OpenChaos's and Jepsen's word): what each fault does to which
processes, drawn from a seeded random stream, so one seed is one schedule.

The processes are the controller ``c0`` and the brokers ``b1``..``b3`` (the fault domain: a
partition splits them; with several controllers, ``c0``..``cN`` and the etcd members ``m0``..``m2``
too), and the ``client`` (the producers and the consumer, outside the domain:
a partition never cuts it off, so it still reaches a master the controller has deposed, which is
the case election protocols are written for; delays and drops reach its links too).

| nemesis | what it does for its window |
|---|---|
| kill | SIGKILL a process of the domain (the master one time in two); started again at the heal |
| partition | isolate one process from the domain, or split the domain into two halves |
| isolate-master | cut the master from the controllers only: producers and slaves still reach it |
| bridge | two halves and one process that reaches both (Jepsen's bridge) |
| one-way | one process's bytes to the others held (or theirs to it), the other way open |
| pause | SIGSTOP a process (the master one time in two), SIGCONT at the heal: a long GC pause |
| delay | every link of one process 20-500 ms slower each way |
| drop | every link of one process resets its connections at random (a lossy link) |
"""

from __future__ import annotations

import random

import attrs

from reference.real.netfault import NetRules
from spec.config import ConfigError

CONTROLLER = "c0"
BROKERS = ("b1", "b2", "b3")
DOMAIN = (CONTROLLER, *BROKERS)
CLIENT = "client"
NEMESES = ("kill", "partition", "isolate-master", "bridge", "one-way", "pause", "delay", "drop")
DELAYS_MS = (20, 50, 100, 200, 500)
DROPS_PER_MILLE = (10, 50, 200)
# each window long enough for the controller to count a silent broker dead (1 s in a chaos run)
# and a master to propose a shrink (1 s more), short enough that most runs heal many times
WINDOW_S = {"kill": (1.5, 4.0), "partition": (2.0, 6.0), "isolate-master": (3.0, 4.5), "bridge": (2.0, 6.0),
            "one-way": (2.0, 6.0), "pause": (1.5, 5.0), "delay": (2.0, 6.0), "drop": (2.0, 6.0)}


def parse_nemeses(text: str) -> tuple[str, ...]:
    """``kill,partition,...`` (or ``all``): ConfigError naming an unknown one."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if names == ("all",):
        return NEMESES
    if not names or (bad := [n for n in names if n not in NEMESES]):
        raise ConfigError(f"--nemesis {text!r}: a comma-separated list of {', '.join(NEMESES)} (or all)")
    return names


@attrs.frozen
class Fault:
    kind: str
    what: str                  # for the report: which processes, how
    window_s: float
    rules: NetRules = NetRules()
    kill: tuple[str, ...] = ()
    pause: tuple[str, ...] = ()


def cut(side_a, side_b) -> frozenset[tuple[str, str]]:
    """Both directions between every process of one side and every process of the other."""
    return frozenset((a, b) for a in side_a for b in side_b) | frozenset((b, a) for a in side_a for b in side_b)


def _someone(rng: random.Random, master: str | None, domain: tuple[str, ...]) -> str:
    """The master one time in two (the faults that matter most), else any process of the domain."""
    pick, coin = rng.choice(domain), rng.random()
    return master if master is not None and coin < 0.5 else pick


def draw(rng: random.Random, kind: str, master: str | None, domain: tuple[str, ...] = DOMAIN) -> Fault:
    """One fault of ``kind`` while ``master`` (b1..b3, or None) is the master.  ``domain``: the processes
    a partition splits (the controllers c0.., the brokers, and with several controllers the etcd
    members m0..)."""
    assert kind in NEMESES, kind
    low, high = WINDOW_S[kind]
    window_s = round(rng.uniform(low, high), 2)
    who = _someone(rng, master, domain)
    others = [p for p in domain if p != who]
    controllers = [p for p in domain if p.startswith("c")]
    if kind == "kill":
        return Fault(kind, f"kill -9 {who}", window_s, kill=(who,))
    if kind == "pause":
        return Fault(kind, f"SIGSTOP {who}", window_s, pause=(who,))
    if kind == "partition":
        if rng.random() < 0.5:
            return Fault(kind, f"isolate {who}", window_s, NetRules(cut([who], others)))
        shuffled = list(domain)
        rng.shuffle(shuffled)
        half_a, half_b = sorted(shuffled[:len(domain) // 2]), sorted(shuffled[len(domain) // 2:])
        return Fault(kind, f"{'+'.join(half_a)} | {'+'.join(half_b)}", window_s, NetRules(cut(half_a, half_b)))
    if kind == "isolate-master":
        alternative = rng.choice(BROKERS)        # drawn always: the seed's later draws never depend on it
        m = master or alternative
        return Fault(kind, f"{m} | {'+'.join(controllers)} (the rest connected)", window_s,
                     NetRules(cut([m], controllers)))
    if kind == "bridge":
        rest = list(others)
        rng.shuffle(rest)
        half_a, half_b = sorted(rest[:len(rest) // 2]), sorted(rest[len(rest) // 2:])
        return Fault(kind, f"{'+'.join(half_a)} | {'+'.join(half_b)}, bridged by {who}", window_s,
                     NetRules(cut(half_a, half_b)))
    if kind == "one-way":
        if rng.random() < 0.5:
            return Fault(kind, f"{who} -> everyone held", window_s, NetRules(frozenset((who, o) for o in others)))
        return Fault(kind, f"everyone -> {who} held", window_s, NetRules(frozenset((o, who) for o in others)))
    peers = [*others, CLIENT]
    if kind == "delay":
        ms = rng.choice(DELAYS_MS)
        return Fault(kind, f"{who}'s links +{ms} ms each way", window_s,
                     NetRules(delay_ms=tuple((a, b, ms) for o in peers for a, b in ((who, o), (o, who)))))
    per_mille = rng.choice(DROPS_PER_MILLE)
    return Fault(kind, f"{who}'s links reset {per_mille / 10:g}% of chunks", window_s,
                 NetRules(drop_per_mille=tuple((a, b, per_mille) for o in peers for a, b in ((who, o), (o, who))),
                          seed=rng.randrange(2**31)))

