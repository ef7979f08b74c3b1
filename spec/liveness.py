"""Liveness of the twin: EveryRequestAnswered under AckOrder!FairnessOver.

For each request id i, a counterexample to ``Waiting(i) ~> Answered(i)`` is
a fair behaviour that stays among the states where i waits.  Answered is
permanent, so such a behaviour ends in one strongly connected component of
that subgraph, or stutters forever in one state.  Under weak fairness an
SCC holds a fair cycle iff every fair action is disabled somewhere in it or
taken on one of its edges; a state can be stuttered in forever iff no fair
action is enabled there.
"""

from __future__ import annotations

from spec.actions import FAIR_ACTIONS
from spec.config import Bounds, Config
from spec.state import WAITING

EVERY_REQUEST_ANSWERED = "EveryRequestAnswered"


def _is_fair(label: str) -> bool:
    return label.split("(")[0] in FAIR_ACTIONS


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


def check_every_request_answered(cfg: Config, bounds: Bounds, graph):
    from spec.explore import Violation, _trace

    states, edges = graph.states, graph.edges
    for i in range(1, bounds.max_puts + 1):
        waiting = {
            k for k, s in enumerate(states) if len(s.reqs) >= i and s.reqs[i - 1].status == WAITING
        }
        if not waiting:
            continue
        enabled = {k: {lab for lab, _ in edges[k] if _is_fair(lab)} for k in waiting}
        # A state where no fair action is enabled can be stuttered in forever.
        for k in waiting:
            if not enabled[k]:
                trace = _trace(states, graph.parent, graph.label, k)
                return Violation(EVERY_REQUEST_ANSWERED, trace + (("Stuttering", states[k]),))
        for comp in _sccs(waiting, edges):
            members = set(comp)
            inner = [(lab, w) for v in comp for lab, w in edges[v] if w in members]
            if not inner:
                continue  # a single state without a self-loop: handled above
            taken = {lab for lab, _ in inner}
            always_enabled = set.intersection(*(enabled[v] for v in comp))
            if always_enabled <= taken:
                entry = min(comp)
                trace = _trace(states, graph.parent, graph.label, entry)
                cycle = tuple(sorted(taken))
                return Violation(EVERY_REQUEST_ANSWERED,
                                 trace + ((f"Cycle through {len(comp)} states: {', '.join(cycle)}",
                                           states[entry]),))
    return None
