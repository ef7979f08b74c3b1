r"""Liveness of the twin under AckOrder!FairnessOver: EveryRequestAnswered and
ReplicasCatchUp.

For each request id i, a counterexample to ``Waiting(i) ~> Answered(i)`` is
a fair behaviour that stays among the states where i waits.  Answered is
permanent, so such a behaviour ends in one strongly connected component of
that subgraph, or stutters forever in one state.  For each replica r, a
counterexample to ``<>[](Diverged(r) \/ CaughtUp(r))`` is a fair behaviour
that visits a state outside that set infinitely often: a fair SCC of the
whole graph holding such a state, or such a state stuttered in forever.
Under weak fairness an SCC holds a fair cycle iff every fair action is
disabled somewhere in it or taken on one of its edges; a state can be
stuttered in forever iff no fair action is enabled there.
"""

from __future__ import annotations

from spec.actions import FAIR_ACTIONS
from spec.config import Bounds, Config
from spec.state import WAITING

EVERY_REQUEST_ANSWERED = "EveryRequestAnswered"
REPLICAS_CATCH_UP = "ReplicasCatchUp"


def _is_fair(label: str, fair_actions: tuple[str, ...] = FAIR_ACTIONS) -> bool:
    return label.split("(")[0] in fair_actions


def _sccs(nodes: set[int], edges) -> list[list[int]]:
    """Tarjan's algorithm, iterative, on the subgraph induced by ``nodes``."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, pos = work.pop()
            if pos == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            succ = [w for _, w in edges[v] if w in nodes]
            for j in range(pos, len(succ)):
                w = succ[j]
                if w not in index:
                    work.append((v, j + 1))
                    work.append((w, 0))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
    return out


def _fair_lasso(prop: str, graph, within: set[int], bad: set[int], fair_actions: tuple[str, ...] = FAIR_ACTIONS):
    """A fair behaviour that stays in ``within`` and visits ``bad`` forever:
    a bad state no fair action leaves, or a fair SCC of ``within`` meeting ``bad``."""
    from spec.explore import Violation, _trace

    states, edges = graph.states, graph.edges
    enabled = {k: {lab for lab, _ in edges[k] if _is_fair(lab, fair_actions)} for k in within}
    # A state where no fair action is enabled can be stuttered in forever.
    for k in sorted(bad):
        if not enabled[k]:
            trace = _trace(states, graph.parent, graph.label, k)
            return Violation(prop, trace + (("Stuttering", states[k]),))
    for comp in _sccs(within, edges):
        if bad.isdisjoint(comp):
            continue
        members = set(comp)
        inner = [(lab, w) for v in comp for lab, w in edges[v] if w in members]
        if not inner:
            continue  # a single state without a self-loop: handled above
        taken = {lab for lab, _ in inner}
        always_enabled = set.intersection(*(enabled[v] for v in comp))
        if always_enabled <= taken:
            entry = min(members & bad)
            trace = _trace(states, graph.parent, graph.label, entry)
            cycle = tuple(sorted(taken))
            return Violation(prop, trace + ((f"Cycle through {len(comp)} states: {', '.join(cycle)}",
                                             states[entry]),))
    return None


def check_every_request_answered(cfg: Config, bounds: Bounds, graph):
    """Waiting(i) ~> Answered(i) for every request id the model can issue."""
    for i in range(1, bounds.max_puts + 1):
        waiting = {
            k for k, s in enumerate(graph.states) if len(s.reqs) >= i and s.reqs[i - 1].status == WAITING
        }
        if waiting and (v := _fair_lasso(EVERY_REQUEST_ANSWERED, graph, waiting, waiting)) is not None:
            return v
    return None


def check_replicas_catch_up(cfg: Config, bounds: Bounds, graph):
    """<>[](Diverged(r) \\/ CaughtUp(r)) for every replica r."""
    from spec.properties import caught_up, diverged

    everything = set(range(len(graph.states)))
    for k in range(len(cfg.replicas)):
        bad = {j for j, s in enumerate(graph.states) if not (diverged(cfg, s, k) or caught_up(cfg, s, k))}
        if bad and (v := _fair_lasso(REPLICAS_CATCH_UP, graph, everything, bad)) is not None:
            return v
    return None


CHECKS = {EVERY_REQUEST_ANSWERED: check_every_request_answered, REPLICAS_CATCH_UP: check_replicas_catch_up}
