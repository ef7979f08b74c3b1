"""Breadth-first exploration of the Python twin, with TLC's semantics.

States are identified by the cfg's VIEW (``View`` of MCAckOrder.tla, or the
whole state when the cfg has none).  Invariants are checked on every new
state in cfg order; action properties on every transition.  The counts this
produces are the ones TLC prints ("distinct states found", "depth"), which
tests compare against tla/manifest.json.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable

import attrs

from spec.actions import initial_state, successors
from spec.cfgfile import CfgFile, model_from_cfg
from spec.config import Bounds, Config, ConfigError
from spec.gcpause import no_full_collections
from spec.properties import ACTION_PROPERTIES, INVARIANTS, LIVENESS_PROPERTIES, response_digest
from spec.state import State

# Each state's bookkeeping in a search: parent index (-1 for an initial
# state), the action that reached it, and its depth (initial = 1).
MAX_STATES_DEFAULT = 5_000_000


@attrs.frozen
class Violation:
    property: str
    trace: tuple[tuple[str, State], ...]  # (action label, state); label "Init" first
    also_violated: tuple[str, ...] = ()    # first-violated properties of other states at that depth


@attrs.frozen
class ExploreResult:
    distinct_states: int
    depth: int
    violation: Violation | None
    seconds: float
    graph: Graph | None = None

    @property
    def outcome(self) -> str:
        return "pass" if self.violation is None else self.violation.property


@attrs.define
class Graph:
    """The explored state graph, kept when liveness needs it."""

    states: list[State]
    edges: list[list[tuple[str, int]]]
    parent: list[int]
    label: list[str]


def view_function(cfg: Config, cfgfile_view: str | None) -> Callable[[State], Hashable]:
    """MCAckOrder's View or SymmetricView, or the whole state when the cfg has no VIEW."""
    if cfgfile_view is None:
        return lambda s: s

    def view(s: State) -> Hashable:
        return (
            s.mstate, s.log, s.committed, s.flushed, s.durable, s.writable, s.unwritten, s.landed, s.reqs,
            s.connected, s.ack, s.push2SlaveMaxOffset, s.syncStateSet, s.rlog, s.rUp,
            s.aux_ctrs, response_digest(cfg, s),
        )

    def symmetric_view(s: State) -> Hashable:
        per_replica = Counter(
            (s.connected[k], s.ack[k], s.rlog[k], s.rUp[k], r in s.syncStateSet)
            for k, r in enumerate(cfg.replicas)
        )
        return (
            s.mstate, s.log, s.committed, s.flushed, s.durable, s.writable, s.unwritten, s.landed, s.reqs,
            s.push2SlaveMaxOffset, s.aux_ctrs, response_digest(cfg, s), frozenset(per_replica.items()),
        )

    views = {"View": view, "SymmetricView": symmetric_view}
    if cfgfile_view not in views:
        raise ConfigError(f"VIEW {cfgfile_view}: the twin knows {', '.join(views)}")
    return views[cfgfile_view]


def _trace(states: list[State], parent: list[int], label: list[str], idx: int):
    out = []
    while idx >= 0:
        out.append((label[idx], states[idx]))
        idx = parent[idx]
    return tuple(reversed(out))


def explore(
    cfg: Config,
    bounds: Bounds,
    invariants: tuple[str, ...] = (),
    action_properties: tuple[str, ...] = (),
    view: str | None = "View",
    keep_graph: bool = False,
    max_states: int = MAX_STATES_DEFAULT,
    progress: Callable[[int, int], None] | None = None,
) -> ExploreResult:
    """BFS over the reachable states of the bounded model."""
    unknown = [p for p in invariants if p not in INVARIANTS]
    unknown += [p for p in action_properties if p not in ACTION_PROPERTIES]
    if unknown:
        raise ConfigError(f"unknown properties {', '.join(unknown)}")
    checks = [(name, lambda s, f=INVARIANTS[name]: f(cfg, s)) for name in invariants]
    action_checks = [(name, lambda s, t, f=ACTION_PROPERTIES[name]: f(cfg, s, t)) for name in action_properties]
    return search(initial_state(cfg), lambda s: successors(cfg, bounds, s), view_function(cfg, view),
                  checks, action_checks, keep_graph, max_states, progress)


def search(
    init: Hashable,
    next_states: Callable[[Hashable], Iterable[tuple[str, Hashable]]],
    key: Callable[[Hashable], Hashable],
    checks: list[tuple[str, Callable[[Hashable], bool]]],
    action_checks: list[tuple[str, Callable[[Hashable, Hashable], bool]]],
    keep_graph: bool = False,
    max_states: int = MAX_STATES_DEFAULT,
    progress: Callable[[int, int], None] | None = None,
) -> ExploreResult:
    """TLC's breadth-first search: states are identified by ``key`` (a VIEW,
    or a symmetry orbit), invariants are checked on every new state in cfg
    order, action properties on every transition; the search stops at the
    level holding the first violation."""
    with no_full_collections():
        return _search(init, next_states, key, checks, action_checks, keep_graph, max_states, progress)


def _search(init, next_states, key, checks, action_checks, keep_graph, max_states, progress) -> ExploreResult:
    start = time.perf_counter()

    states: list = []
    parent: list[int] = []
    label: list[str] = []
    depth_of: list[int] = []
    edges: list[list[tuple[str, int]]] = []
    index: dict[Hashable, int] = {}

    def first_violated(s) -> str | None:
        return next((name for name, check in checks if not check(s)), None)

    def add(s, p: int, lab: str, depth: int) -> int:
        states.append(s)
        parent.append(p)
        label.append(lab)
        depth_of.append(depth)
        if keep_graph:
            edges.append([])
        return len(states) - 1

    index[key(init)] = add(init, -1, "Init", 1)
    if (bad := first_violated(init)) is not None:
        return ExploreResult(1, 1, Violation(bad, _trace(states, parent, label, 0)),
                             time.perf_counter() - start)

    frontier = [0]
    depth = 1
    while frontier:
        next_frontier: list[int] = []
        found: list[tuple[str, int]] = []
        for src in frontier:
            s = states[src]
            for lab, t in next_states(s):
                for name, check in action_checks:
                    if not check(s, t):
                        idx = add(t, src, lab, depth + 1)
                        return ExploreResult(len(states), depth + 1,
                                             Violation(name, _trace(states, parent, label, idx)),
                                             time.perf_counter() - start)
                k = key(t)
                dst = index.get(k)
                if dst is None:
                    dst = add(t, src, lab, depth + 1)
                    index[k] = dst
                    next_frontier.append(dst)
                    if checks and (bad := first_violated(t)) is not None:
                        found.append((bad, dst))
                    if len(states) > max_states:
                        raise RuntimeError(f"more than {max_states} states: bounds too large for the twin")
                if keep_graph:
                    edges[src].append((lab, dst))
        if found:
            bad, idx = found[0]
            others = tuple(sorted({name for name, _ in found[1:]} - {bad}))
            return ExploreResult(len(states), depth + 1,
                                 Violation(bad, _trace(states, parent, label, idx), others),
                                 time.perf_counter() - start)
        if next_frontier:
            depth += 1
        frontier = next_frontier
        if progress:
            progress(len(states), depth)
    graph = Graph(states, edges, parent, label) if keep_graph else None
    return ExploreResult(len(states), depth, None, time.perf_counter() - start, graph)


def explore_cfg(cfgfile: CfgFile, **kwargs) -> ExploreResult:
    """Explore the model a TLC cfg describes, checking what the cfg checks."""
    from spec.liveness import CHECKS

    cfg, bounds = model_from_cfg(cfgfile)
    if cfgfile.symmetry is not None:
        raise ConfigError(f"{cfgfile.path}: SYMMETRY is not supported by the twin; use VIEW SymmetricView")
    invariants = tuple(cfgfile.invariants)
    action_props = tuple(p for p in cfgfile.properties if p in ACTION_PROPERTIES)
    liveness = tuple(p for p in cfgfile.properties if p in LIVENESS_PROPERTIES)
    unknown = [p for p in cfgfile.properties if p not in ACTION_PROPERTIES and p not in LIVENESS_PROPERTIES]
    if unknown:
        raise ConfigError(f"{cfgfile.path}: unknown PROPERTY {', '.join(unknown)}")
    if liveness and cfgfile.view is not None:
        raise ConfigError(f"{cfgfile.path}: liveness with a VIEW is not supported (TLC would be unsound)")
    result = explore(cfg, bounds, invariants, action_props, view=cfgfile.view,
                     keep_graph=bool(liveness), **kwargs)
    with no_full_collections():     # the lasso searches walk the graph the search kept
        for prop in liveness:
            if result.violation is not None:
                break
            violation = CHECKS[prop](cfg, bounds, result.graph)
            if violation is not None:
                result = attrs.evolve(result, violation=violation)
    return attrs.evolve(result, graph=None)
