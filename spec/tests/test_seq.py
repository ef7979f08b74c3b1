"""spec/seq.py: a Seq is the tuple it stands for under every operation the twin uses, and the
refinement checker's shadow keeps Seqs through every kind of step (crashes included)."""

import random

import pytest

from spec.seq import CHUNK, Seq


@pytest.mark.parametrize("seed", range(6))
def test_seq_behaves_as_its_tuple(seed):
    rng = random.Random(seed)
    for _ in range(60):
        t = tuple(rng.randrange(50) for _ in range(rng.randrange(0, 3 * CHUNK)))
        s = Seq(t)
        for _ in range(40):
            r = rng.random()
            if r < 0.4:
                add = tuple(rng.randrange(50) for _ in range(rng.randrange(0, 2 * CHUNK if rng.random() < 0.1 else 3)))
                t, s = t + add, s + add
            elif r < 0.6 and t:
                k, v = rng.randrange(len(t)), rng.randrange(50)
                t, s = t[:k] + (v,) + t[k + 1:], s.set(k, v)
            elif r < 0.7:
                k = rng.randrange(len(t) + 2)
                t, s = t[:k], s[:k]
            elif r < 0.75 and t:
                t, s = t[:-1], s[:-1]
            assert isinstance(s, Seq)
            a, b = rng.randrange(-3, len(t) + 3), rng.randrange(-3, len(t) + 3)
            assert tuple(s[a:b]) == t[a:b] and tuple(s[::2]) == t[::2]
            assert len(s) == len(t) and tuple(s) == t and s == t and t == s and not s != t
            assert hash(s) == hash(t) and bool(s) == bool(t) and repr(s) == repr(t)
            if t:
                i = rng.randrange(-len(t), len(t))
                assert s[i] == t[i]
            assert (7 in s) == (7 in t)
            assert Seq(t) == s and Seq(t + (1,)) != s and (1,) + s == (1,) + t


def test_seq_refuses_what_a_tuple_refuses():
    s = Seq(range(3))
    with pytest.raises(IndexError):
        s[3]
    with pytest.raises(IndexError):
        s.set(-4, 0)
    with pytest.raises(TypeError):
        s + [1]


def test_the_checker_shadow_keeps_seqs_through_every_kind_of_step():
    from reference.sim.params import draw
    from reference.sim.world import World

    world = World(draw(0))             # master process and machine crashes, recoveries, write failures
    out = world.run(3_000, liveness=False)
    assert out.violation is None and out.actions.get("MasterMachineCrash") and out.actions.get("Recover")
    shadow = world.cluster.checker.shadow
    assert isinstance(shadow.log, Seq) and isinstance(shadow.reqs, Seq)
    assert all(isinstance(r, Seq) for r in shadow.rlog)


@pytest.mark.parametrize("seed", range(4))
def test_same_prefix_and_any_field_answer_as_on_tuples(seed):
    """The checker's shortcuts (shared chunks compared by identity, per-chunk answers
    remembered) give the answers of the plain definitions, over versions of one Seq."""
    import attrs

    from spec.seq import any_field, same_prefix

    @attrs.frozen
    class R:
        status: str

    rng = random.Random(seed)
    t = tuple(R(rng.choice("ab")) for _ in range(rng.randrange(3 * CHUNK)))
    s = Seq(t)
    for _ in range(200):
        old_t, old_s = t, s
        r = rng.random()
        if r < 0.5:
            add = tuple(R(rng.choice("ab")) for _ in range(rng.randrange(5)))
            t, s = t + add, s + add
        elif r < 0.8 and t:
            k, v = rng.randrange(len(t)), R(rng.choice("abc"))
            t, s = t[:k] + (v,) + t[k + 1:], s.set(k, v)
        else:
            k = rng.randrange(len(t) + 1)
            t, s = t[:k], s[:k]
        n = rng.randrange(max(len(t), len(old_t)) + 2)
        want = len(t) >= n and len(old_t) >= n and t[:n] == old_t[:n]
        assert same_prefix(s, old_s, n) == want == same_prefix(t, old_t, n)
        for status in "abc":
            want = any(x.status == status for x in t)
            assert any_field(s, "status", status) == want == any_field(s, "status", status, reverse=True)


def test_equal_seqs_share_their_chunks_after_one_comparison():
    """A slave's log is built item by item, the master's too: equal values in chunks of their own.
    The first comparison reads the items; it leaves the two sharing one tuple of chunks, so the
    next versions of either compare by identity, and no value changes."""
    from spec.seq import CHUNK, Seq

    master = Seq(range(5 * CHUNK + 7))
    slave = Seq()
    for x in range(5 * CHUNK + 3):
        slave = slave + (x,)
    before = (tuple(slave), hash(slave), tuple(master))
    assert not any(a is b for a, b in zip(slave._chunks, master._chunks))
    assert master[:len(slave)] == slave
    assert all(a is b for a, b in zip(slave._chunks, master._chunks))
    assert (tuple(slave), hash(slave), tuple(master)) == before
    later = slave + (5 * CHUNK + 3,) + tuple(range(5 * CHUNK + 4, 6 * CHUNK + 1))
    assert later == Seq(range(6 * CHUNK + 1)) and all(a is b for a, b in zip(later._chunks[:5], master._chunks))
    forged = Seq(range(5 * CHUNK + 3))[:CHUNK] + (-1,) + tuple(range(CHUNK + 1, 5 * CHUNK + 3))
    chunks = forged._chunks
    assert master[:len(forged)] != forged and forged._chunks is chunks     # unequal: nothing shared
