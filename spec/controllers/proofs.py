"""Unbounded proofs with z3 for the controllers module (tla/AckOrderControllers.tla).

TLC checks two controllers, three brokers and two elections.  Here epochs,
revisions and fencing tokens are unbounded integers, and OneMasterPerEpoch is
proved for one *arbitrary epoch* E (symbolic, >= 1): a ghost ``eM`` holds the
master elected in epoch E (-1: none yet) and ``bad`` records a second one.
What holds for E holds for every epoch.  Every action of the spec is here,
with no bound on how often it is taken.

For the green configuration: base ``Init => Inv`` and step ``Inv /\\ Next =>
Inv'`` for every conjunct (the properties, then the strengthening), and both
action properties on every step from a state of the invariant.  For every
bug: the twin's breadth-first counterexample on the bug's TLC model, pinned
in z3 step by step, and on it the first step where the inductive invariant
breaks: a reachable CTI (spec/proofs.py's ``cti_on_path``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
import z3

from spec import proofmemo
from spec import proofs as write_path
from spec.controllers.config import ControllersConfig

NONE = -1
PATH_FROM_TWIN = "the twin's BFS counterexample, pinned in z3"


@attrs.frozen
class Abstract:
    cfg: ControllersConfig

    @property
    def n(self) -> int:
        return len(self.cfg.brokers)

    @property
    def k(self) -> int:
        return len(self.cfg.controllers)

    @property
    def first(self) -> int:
        return self.cfg.brokers.index(self.cfg.initial_master)


class CS:
    """One abstract state: z3 variables by name (scalars), (name, i) or (name, c, b)."""

    SCALARS = ("mId", "mEp", "sEp", "rev", "own", "tok", "eM")
    BROKER_BOOLS = ("sss", "up", "silent")
    CTL_INTS = ("snM", "snE", "snSE", "snRev", "held")
    CTL_BROKER_BOOLS = ("snS", "heard")

    def __init__(self, a: Abstract, tag: str, e: z3.ArithRef) -> None:
        self.a, self.tag, self.E = a, tag, e
        v: dict = {n: z3.Int(f"{n}_{tag}") for n in self.SCALARS}
        v["bad"] = z3.Bool(f"bad_{tag}")
        for b in range(a.n):
            for n in self.BROKER_BOOLS:
                v[n, b] = z3.Bool(f"{n}_{b}_{tag}")
        for c in range(a.k):
            for n in self.CTL_INTS:
                v[n, c] = z3.Int(f"{n}_{c}_{tag}")
            for b in range(a.n):
                for n in self.CTL_BROKER_BOOLS:
                    v[n, c, b] = z3.Bool(f"{n}_{c}_{b}_{tag}")
        self.v = v

    def __getitem__(self, key):
        return self.v[key]

    def all_vars(self) -> list:
        return list(self.v.values())


def frame(s: CS, t: CS, changes: dict) -> z3.BoolRef:
    """Every variable of ``t`` equals ``s``'s, except those in ``changes`` (key -> new value)."""
    return z3.And([t[key] == (changes[key] if key in changes else s[key]) for key in s.v])


def init(a: Abstract, s: CS) -> z3.BoolRef:
    parts = [s["mId"] == a.first, s["mEp"] == 1, s["sEp"] == 1, s["rev"] == 1, s["own"] == NONE, s["tok"] == 0,
             s["eM"] == z3.If(s.E == 1, a.first, NONE), z3.Not(s["bad"]), s.E >= 1]
    for b in range(a.n):
        parts += [s["sss", b] == (b == a.first), s["up", b], z3.Not(s["silent", b])]
    for c in range(a.k):
        parts += [s["snM", c] == NONE, s["snE", c] == 0, s["snSE", c] == 0, s["snRev", c] == 0, s["held", c] == 0]
        for b in range(a.n):
            parts += [z3.Not(s["snS", c, b]), z3.Not(s["heard", c, b])]
    return z3.And(parts)


def fenced(a: Abstract, s: CS, c: int) -> z3.BoolRef:
    cfg = a.cfg
    token_ok = z3.BoolVal(cfg.bug("BugCommitWithoutCompare") or cfg.bug("BugActAfterLeaseExpired"))
    rev_ok = z3.BoolVal(cfg.bug("BugCommitWithoutCompare") or cfg.bug("BugOwnerSkipsMetadataCompare"))
    return z3.And(z3.Or(token_ok, z3.And(s["own"] == c, s["tok"] == s["held", c])),
                  z3.Or(rev_ok, s["rev"] == s["snRev", c]))


def _heard_at(a: Abstract, s: CS, c: int, who) -> z3.BoolRef:
    """heard[c][who] for a broker index held in a z3 term (False for NONE)."""
    return z3.Or([z3.And(who == b, s["heard", c, b]) for b in range(a.n)])


def _elected(s: CS, epoch, n: int) -> dict:
    """The ghosts of an election of broker ``n`` in ``epoch``."""
    first_at_e = z3.And(epoch == s.E, s["eM"] == NONE)
    return {"eM": z3.If(first_at_e, n, s["eM"]),
            "bad": z3.Or(s["bad"], z3.And(epoch == s.E, s["eM"] != NONE, s["eM"] != n))}


def actions(a: Abstract, s: CS, t: CS) -> dict[str, z3.BoolRef]:
    cfg, acts = a.cfg, {}
    grace = not cfg.bug("BugNoTakeoverGrace")
    for c, cn in enumerate(cfg.controllers):
        ch = {"own": c, "tok": s["tok"] + 1, ("held", c): s["tok"] + 1}
        ch |= {("heard", c, b): z3.BoolVal(grace) for b in range(a.n)}
        ch |= {("silent", b): z3.Not(s["up", b]) for b in range(a.n)}
        acts[f"TakeShard({cn})"] = z3.And(s["own"] == NONE, frame(s, t, ch))
        ch = {("snM", c): s["mId"], ("snE", c): s["mEp"], ("snSE", c): s["sEp"], ("snRev", c): s["rev"]}
        ch |= {("snS", c, b): s["sss", b] for b in range(a.n)}
        acts[f"Read({cn})"] = frame(s, t, ch)
        decides = z3.And(s["snRev", c] > 0, s["held", c] > 0, fenced(a, s, c),
                         z3.Or(s["snM", c] == NONE, z3.Not(_heard_at(a, s, c, s["snM", c]))))
        epoch = s["snE", c] + 1
        options = []
        for n in range(a.n):
            ch = {"rev": s["rev"] + 1, "mEp": epoch, "mId": n, "sEp": s["snSE", c] + 1,
                  **{("sss", b): z3.BoolVal(b == n) for b in range(a.n)}, **_elected(s, epoch, n)}
            options.append(z3.And(s["snS", c, n], s["heard", c, n], frame(s, t, ch)))
        no_candidate = z3.Not(z3.Or([z3.And(s["snS", c, b], s["heard", c, b]) for b in range(a.n)]))
        ch = {"rev": s["rev"] + 1, "mEp": epoch, "mId": NONE, "sEp": s["snSE", c],
              **{("sss", b): s["snS", c, b] for b in range(a.n)}}
        options.append(z3.And(no_candidate, s["snM", c] != NONE, frame(s, t, ch)))
        acts[f"ElectMaster({cn})"] = z3.And(decides, z3.Or(options))
        for b, bn in enumerate(cfg.brokers):
            acts[f"Expire({cn},{bn})"] = z3.And(s["heard", c, b], z3.Or(z3.Not(s["up", b]), s["own"] != c),
                                                frame(s, t, {("heard", c, b): z3.BoolVal(False)}))
            new = {x: z3.If(z3.BoolVal(x == b), z3.Not(s["snS", c, x]), s["snS", c, x]) for x in range(a.n)}
            ch = {"sEp": s["snSE", c] + 1, "rev": s["rev"] + 1, **{("sss", x): new[x] for x in range(a.n)}}
            acts[f"AlterSyncStateSet({cn},{bn})"] = z3.And(
                s["snRev", c] > 0, s["held", c] > 0, s["snM", c] != NONE, s["snM", c] != b, fenced(a, s, c),
                z3.And([z3.Implies(new[x], s["heard", c, x]) for x in range(a.n)]), frame(s, t, ch))
    acts["LeaseExpires"] = z3.And(s["own"] != NONE, frame(s, t, {"own": NONE}))
    for b, bn in enumerate(cfg.brokers):
        owner_heard = z3.Or([z3.And(s["own"] == c, z3.Not(s["heard", c, b])) for c in range(a.k)])
        acts[f"Heartbeat({bn})"] = z3.And(s["up", b], owner_heard, frame(s, t, {
            **{("heard", c, b): z3.Or(s["heard", c, b], s["own"] == c) for c in range(a.k)},
            ("silent", b): z3.BoolVal(False)}))
        acts[f"BrokerCrash({bn})"] = z3.And(s["up", b], frame(s, t, {("up", b): z3.BoolVal(False),
                                                                      ("silent", b): z3.BoolVal(True)}))
        acts[f"BrokerRestart({bn})"] = z3.And(z3.Not(s["up", b]), frame(s, t, {("up", b): z3.BoolVal(True)}))
    return acts


def next_rel(a: Abstract, s: CS, t: CS) -> z3.BoolRef:
    return z3.And(t.E == s.E, z3.Or(list(actions(a, s, t).values())))


def _register_same(s: CS, t: CS, a: Abstract) -> z3.BoolRef:
    return z3.And(t["mId"] == s["mId"], t["mEp"] == s["mEp"], t["sEp"] == s["sEp"],
                  *[t["sss", b] == s["sss", b] for b in range(a.n)])


def _in_sss(a: Abstract, s: CS, who) -> z3.BoolRef:
    return z3.Or([z3.And(who == b, s["sss", b]) for b in range(a.n)])


def store_refines_failover(a: Abstract, s: CS, t: CS) -> z3.BoolRef:
    elect = z3.And(t["mEp"] == s["mEp"] + 1, z3.Or(
        z3.And(t["mId"] == NONE, t["sEp"] == s["sEp"], *[t["sss", b] == s["sss", b] for b in range(a.n)]),
        z3.And(_in_sss(a, s, t["mId"]), t["sEp"] == s["sEp"] + 1,
               *[t["sss", b] == (t["mId"] == b) for b in range(a.n)])))
    alter = z3.And(t["mId"] == s["mId"], t["mEp"] == s["mEp"], s["mId"] != NONE, t["sEp"] == s["sEp"] + 1,
                   _in_sss(a, t, s["mId"]))
    return z3.Or(_register_same(s, t, a), elect, alter)


def elect_only_a_silent_master(a: Abstract, s: CS, t: CS) -> z3.BoolRef:
    silent = z3.Or([z3.And(s["mId"] == b, s["silent", b]) for b in range(a.n)])
    return z3.Implies(z3.And(t["mEp"] > s["mEp"], s["mId"] != NONE), silent)


STATE_PROPERTIES: dict[str, Callable[[Abstract, CS], z3.BoolRef]] = {
    "OneMasterPerEpoch": lambda a, s: z3.Not(s["bad"]),
}
ACTION_PROPERTIES: dict[str, Callable[[Abstract, CS, CS], z3.BoolRef]] = {
    "StoreRefinesFailover": store_refines_failover,
    "ElectOnlyASilentMaster": elect_only_a_silent_master,
}


def strengthening(a: Abstract) -> dict[str, Callable[[CS], z3.BoolRef]]:
    """What makes the properties inductive, conjunct by conjunct (each proved inductive too)."""
    n, k = range(a.n), range(a.k)
    out: dict[str, Callable[[CS], z3.BoolRef]] = {
        "EpochsPositive": lambda s: z3.And(s["mEp"] >= 1, s["sEp"] >= 1, s["rev"] >= 1, s["tok"] >= 0, s.E >= 1),
        "OwnerIsKnown": lambda s: z3.And(s["own"] >= NONE, s["own"] < a.k, s["mId"] >= NONE, s["mId"] < a.n),
        # the shard owner holds the newest token, and no one else does
        "OwnerHoldsTheToken": lambda s: z3.And([z3.Implies(s["own"] == c, s["held", c] == s["tok"]) for c in k]),
        "TokensIssued": lambda s: z3.And([z3.And(s["held", c] >= 0, s["held", c] <= s["tok"]) for c in k]),
        "OneTokenHolder": lambda s: z3.And([z3.Not(z3.And(s["tok"] > 0, s["held", c] == s["tok"], s["held", d] == s["tok"]))
                                            for c in k for d in k if c < d]),
        # a snapshot at the store's revision is the store (every write bumps the revision)
        "SnapshotsAtRevisionAreCurrent": lambda s: z3.And([z3.And(
            s["snRev", c] >= 0, s["snRev", c] <= s["rev"],
            z3.Implies(s["snRev", c] == s["rev"], z3.And(
                s["snM", c] == s["mId"], s["snE", c] == s["mEp"], s["snSE", c] == s["sEp"],
                *[s["snS", c, b] == s["sss", b] for b in n]))) for c in k]),
        "SSSContainsMaster": lambda s: z3.Implies(s["mId"] != NONE, _in_sss(a, s, s["mId"])),
        "DownIsSilent": lambda s: z3.And([z3.Implies(z3.Not(s["up", b]), s["silent", b]) for b in n]),
        # the owner counts a broker dead only once it went down unheard
        "OwnerViewSound": lambda s: z3.And([z3.Implies(z3.And(s["own"] == c, z3.Not(s["heard", c, b])), s["silent", b])
                                            for c in k for b in n]),
        # the ghost of epoch E: the master elected in it, while it is the current epoch
        "EpochGhost": lambda s: z3.And(
            z3.Implies(s["mEp"] < s.E, s["eM"] == NONE),
            z3.Implies(s["mEp"] == s.E, s["eM"] == s["mId"]),
            s["eM"] >= NONE, s["eM"] < a.n),
    }
    return out


def _every(a: Abstract) -> dict[str, Callable[[CS], z3.BoolRef]]:
    return {**{name: (lambda s, f=f: f(a, s)) for name, f in STATE_PROPERTIES.items()}, **strengthening(a)}


def _model_state(m: z3.ModelRef, s: CS) -> dict:
    def val(x):
        v = m.eval(x, model_completion=True)
        return v.as_long() if z3.is_int_value(v) else z3.is_true(v)
    return {"_".join(map(str, key)) if isinstance(key, tuple) else key: val(x) for key, x in s.v.items()} | \
        {"E": val(s.E)}


def _action_taken(a: Abstract, m: z3.ModelRef, s: CS, t: CS) -> str:
    return next(name for name, rel in actions(a, s, t).items() if z3.is_true(m.eval(rel, model_completion=True)))


@proofmemo.memo("controllers.prove")
def prove(name: str, cfg: ControllersConfig) -> list[write_path.Result]:
    """Every conjunct of the inductive invariant, and both action properties on every step from it."""
    a = Abstract(cfg)
    every = _every(a)
    e = z3.Int("E")
    s0, s, t = CS(a, "init", e), CS(a, "pre", e), CS(a, "post", e)
    base, step = write_path.conjunct_checks(init(a, s0), [*[f(s) for f in every.values()], next_rel(a, s, t)])
    checks = [(p, (lambda x, f=f: f(x)), True) for p, f in every.items()]
    checks += [(p, (lambda x, f=f: f(a, s, x)), False) for p, f in ACTION_PROPERTIES.items()]
    results = []
    for i, (pname, prop, has_base) in enumerate(checks):
        start = time.perf_counter()
        if has_base:
            answer = write_path.satisfiable_with(base, z3.Not(prop(s0)), f"base{i}")
            if answer != z3.unsat:
                results.append(write_path.Result(name, pname, "base fails" if answer == z3.sat else "unknown",
                                                 round(time.perf_counter() - start, 3)))
                continue
        answer = write_path.satisfiable_with(step, z3.Not(prop(t)), f"step{i}")
        if answer != z3.sat:
            results.append(write_path.Result(name, pname, "proved" if answer == z3.unsat else "unknown",
                                             round(time.perf_counter() - start, 3)))
            continue
        mdl = step.model()
        results.append(write_path.Result(name, pname, "CTI", round(time.perf_counter() - start, 3),
                                         {"action": _action_taken(a, mdl, s, t), "pre": _model_state(mdl, s),
                                          "post": _model_state(mdl, t), "reachable_in": None}))
    return results


@proofmemo.memo("controllers.vacuous_actions")
def vacuous_actions(cfg: ControllersConfig) -> list[str]:
    """Actions no state satisfying the invariant can take (a proof over them would be empty)."""
    a = Abstract(cfg)
    e = z3.Int("E")
    s, t = CS(a, "vpre", e), CS(a, "vpost", e)
    solver = z3.Solver()
    solver.add(*[f(s) for f in _every(a).values()])
    return [name for i, (name, rel) in enumerate(actions(a, s, t).items())
            if write_path.satisfiable_with(solver, rel, f"action{i}") != z3.sat]


def pinned_path(cfg: ControllersConfig, labels: tuple[str, ...], expected: str):
    """z3's answer on the path whose every step is the named action, its last step violating
    ``expected`` (a state or an action property), and when sat the path as (states, model)."""
    a = Abstract(cfg)
    e = z3.Int("E_pin")
    states = [CS(a, f"pin_{j}", e) for j in range(len(labels) + 1)]
    solver = z3.Solver()
    solver.add(init(a, states[0]))
    for j, label in enumerate(labels):
        solver.add(actions(a, states[j], states[j + 1])[label], states[j + 1].E == states[j].E)
    if expected in STATE_PROPERTIES:
        solver.add(z3.Not(STATE_PROPERTIES[expected](a, states[-1])))
    else:
        solver.add(z3.Not(ACTION_PROPERTIES[expected](a, states[-2], states[-1])))
    answer = write_path.check(solver)
    return answer, ((states, solver.model()) if answer == z3.sat else None)


@proofmemo.memo("controllers.bug_witness")
def _bug_witness(cfg: ControllersConfig, expected: str, labels: tuple[str, ...]) -> write_path.Witness | None:
    a = Abstract(cfg)
    _, found = pinned_path(cfg, labels, expected)
    return write_path.witness(a, found, _every(a), _model_state, _action_taken, list(labels))


def bug_cti(name: str, cfg: ControllersConfig, expected: str, twin_path: tuple[str, ...] | None) -> write_path.Result:
    """The twin's counterexample pinned in z3 and, on it, the first step that breaks the inductive
    invariant: a CTI reachable by construction ("no CTI" when the path is not the abstraction's)."""
    start = time.perf_counter()
    if twin_path is None:
        return write_path.Result(name, expected, "no CTI", 0.0)
    w = _bug_witness(cfg, expected, tuple(twin_path))
    if w is not None and all(all(h.values()) for h in w.holds):
        # the strengthening holds all along: the action property broke on a step from the invariant
        j = len(w.actions) - 1
        r = write_path.Result(name, expected, "CTI", round(time.perf_counter() - start, 3),
                              {"action": w.actions[j], "pre": w.states[j], "post": w.states[j + 1],
                               "reachable_in": j, "violated": [expected], "property_violated_after": j + 1,
                               "path": list(w.actions)})
    else:
        r = write_path.cti_on_path(name, expected, w, round(time.perf_counter() - start, 3))
    return r if r.cti is None else attrs.evolve(r, cti={**r.cti, "path_from": PATH_FROM_TWIN})


def prove_all(green: list[tuple[str, ControllersConfig, str]], bugs: list[tuple[str, ControllersConfig, str]],
              on_done: Callable[[str], None] = lambda name: None,
              twin_paths: dict[str, tuple[str, ...]] | None = None) -> write_path.ProofReport:
    start = time.perf_counter()
    proofs = []
    for name, cfg, _ in green:
        proofs.append(write_path.GreenProof(name, tuple(prove(name, cfg)),
                                            frozenset([*STATE_PROPERTIES, *ACTION_PROPERTIES]),
                                            tuple(vacuous_actions(cfg))))
        on_done(name)
    ctis = []
    for name, cfg, expected in bugs:
        ctis.append(bug_cti(name, cfg, expected, (twin_paths or {}).get(name)))
        on_done(name)
    return write_path.ProofReport(tuple(proofs), tuple(ctis), round(time.perf_counter() - start, 2))
