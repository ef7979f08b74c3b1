"""spec.state.evolve (by position) against attrs.evolve (by keyword) on the twin states of many
seeded runs: the twin's steps use the first, and must make exactly the states the second would."""

import random

import attrs

from reference.sim.params import draw
from reference.sim.world import World
from spec.state import Counters, Request, State, evolve


def _states(seeds: int) -> list[State]:
    out = []
    for seed in range(seeds):
        world = World(draw(seed))
        checker = world.cluster.checker
        step = checker.step

        def keep(labels, event="", page_cache_records=None, step=step):
            taken = step(labels, event, page_cache_records)
            out.extend(t for _, t in taken)
            return taken

        checker.step = keep
        world.run(300)
    return out


def test_evolve_equals_attrs_evolve_on_the_states_of_seeded_runs():
    rng = random.Random(0)
    states = _states(6)
    assert len(states) > 1000
    names = [f.name for f in attrs.fields(State)]
    for s in states:
        changes = {name: getattr(other, name) for other in [rng.choice(states)]
                   for name in rng.sample(names, rng.randint(0, len(names)))}
        mine, theirs = evolve(s, **changes), attrs.evolve(s, **changes)
        assert mine == theirs and type(mine) is State
        assert all(getattr(mine, n) is getattr(theirs, n) for n in names)
    r = Request(3, False, "WAITING")
    assert evolve(r, status="PUT_OK") == attrs.evolve(r, status="PUT_OK") == Request(3, False, "PUT_OK")
    c = Counters()
    assert evolve(c, writeFailure=2) == attrs.evolve(c, writeFailure=2) == Counters(writeFailure=2)


def test_evolve_refuses_a_field_the_class_does_not_have():
    try:
        evolve(Counters(), noSuchCounter=1)
    except KeyError:
        return
    raise AssertionError("evolve accepted a field Counters does not have")
