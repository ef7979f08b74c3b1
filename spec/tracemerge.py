"""Merging the trace files of several processes into one sequence of spec steps, by causality.

Each process writes its own file (a master, each replica) and sees only its own variables.  The merge
orders their steps so that every step comes after what it causally depends on:

* the order within each file;
* ``after`` references a writer may give ([process, seq]);
* what the HA protocol itself carries, so that no extra stamp has to travel on the wire:

  - a replica's ``Transfer`` that makes its log k records long, ending with record v, follows the
    master step that accepted the replica's current connection (matched with the replica's
    ``HANDSHAKE`` note) and the first master step after it at which the master's own log holds v at
    position k, committed (data is only shipped once the master has it);
  - the master's ``ReplicaConnect(r)`` reporting n records follows r's ``HANDSHAKE`` note reporting n
    (notes and connects are matched in order; a refused handshake has no connect);
  - the master's ``ReplicaAck(r)`` recording n (n at most what it committed) follows the replica step
    at which r's log became n records long (a slave acks what it holds).

Among the orders these allow, the merge picks one deterministically: a replica's transfers and notes
as early as possible, the master's steps next, a replica's crash and restart as late as possible (a
crash is seen by the master as a dropped connection first; records already in a socket arrive
before a close).  Then request keys become spec ids (``ids: keys``): the spec numbers requests in
the order of the steps that create them.

What the files say may leave a step no place, because of what a process did: a slave holding a
record at a position the master's log never had it at, a causal cycle through what the HA protocol
carries, a step naming a request no step before it created.  That is a violation (MergeViolation,
exit 1, naming the steps that conflict), not malformed input: the checker reports it as the first
step no behaviour of the spec explains, after checking the steps the merge placed before it.  A
cycle made only of the files' own order and their ``after`` references is the writers' stamps
contradicting themselves: malformed (MergeError).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Iterator

import attrs

from spec.traceformat import TORN, Note, Step, Trace, TraceError

PRIORITY_EARLY, PRIORITY_MASTER, PRIORITY_LATE = 0, 1, 2
LATE_ACTIONS = frozenset({"ReplicaCrash", "ReplicaRestart"})


class MergeError(TraceError):
    """Files that cannot be merged (different configurations, a cycle of their own stamps...)."""


class MergeViolation(Exception):
    """A step no order of the files can place, because of what the processes did: ``step`` (with
    ``other``, the step of another file it conflicts with, if one), and the steps placed before it,
    in spec ids (``prefix``; None when the caller checked them as they came), which a checker
    checks first: an earlier unexplained step is the verdict."""

    def __init__(self, step: Step, other: Step | Note | None, reason: str, prefix: list[Step] | None) -> None:
        super().__init__(reason)
        self.step, self.other, self.reason, self.prefix = step, other, reason, prefix


# Why each kind of edge the HA protocol gives orders its two ends (for a cycle's report).
WHY = {"handshake": "the master accepts a handshake the slave sent",
       "connection": "a slave receives records on a connection the master accepted",
       "holder": "a slave receives a record once the master holds it, committed, at that position",
       "ack": "the master records a slave's report of what the slave holds",
       "close": "a slave's crash follows the master's close of its connection"}


def _priority(item) -> int:
    if isinstance(item, Note):
        return PRIORITY_EARLY
    names = {a for a, _ in item.actions}
    if names == {"Transfer"}:
        return PRIORITY_EARLY
    if names <= LATE_ACTIONS:
        return PRIORITY_LATE
    return PRIORITY_MASTER


def _touches_replica(step: Step) -> set[str]:
    return {p for _, p in step.actions if isinstance(p, str)}


def adopt_config(traces: list[Trace]) -> list[Trace]:
    """The files of one run, each with the run's configuration: a slave's file that gives none
    (its runtime does not know the master's) takes the one the other files give."""
    if not traces:
        raise MergeError("no trace files")
    known = [t for t in traces if t.config_known]
    if not known:
        raise MergeError(f"{traces[0].path}: no file gives the configuration (a slave's file is checked together "
                         "with its master's)")
    source = known[0]
    out = []
    for t in traces:
        if not t.config_known:
            if t.process not in source.config.replicas:
                raise MergeError(f"{t.path}: slave {t.process!r} is not among the Replicas of {source.path} "
                                 f"({', '.join(source.config.replicas)})")
            t = attrs.evolve(t, config=source.config, config_known=True)
        out.append(t)
    return out


def merge(traces: list[Trace]) -> tuple[list[Step], bool]:
    """The steps of all files in one causal order, and whether every file ended complete
    (``traces`` as ``adopt_config`` returns them)."""
    if not traces:
        raise MergeError("no trace files")
    if not all(t.config_known for t in traces):
        traces = adopt_config(traces)
    first = traces[0]
    for t in traces[1:]:
        if t.config != first.config:
            raise MergeError(f"{t.path}: another configuration than {first.path}: the files are not of one run")
        if t.ids != first.ids:
            raise MergeError(f"{t.path}: ids={t.ids}, but {first.path} has ids={first.ids}")
    procs = [t.process for t in traces]
    if len(set(procs)) != len(procs):
        raise MergeError(f"two files of process {sorted(p for p in procs if procs.count(p) > 1)[0]!r}")
    complete = all(t.complete for t in traces)
    if len(traces) == 1:
        return list(first.steps), complete
    for t in traces:
        if t.checkpoints:
            raise MergeError(f"{t.checkpoints[0].where()}: checkpoint: a file with checkpoints sees everything, "
                             "and is checked on its own, not merged with others")

    items: list = []                      # every step and note
    file_of: list[int] = []               # the index of each item's file (ties go in the files' order)
    by_proc: dict[str, list] = {}
    for index, t in enumerate(traces):
        seq_items = sorted([*t.steps, *t.notes], key=lambda x: x.seq)
        by_proc[t.process] = seq_items
        items += seq_items
        file_of += [index] * len(seq_items)
    ident = {id(x): n for n, x in enumerate(items)}
    preds: dict[int, dict[int, str]] = defaultdict(dict)      # b -> {a: kind of the edge a -> b}
    conflicts: dict[int, tuple[str, object]] = {}             # item -> (why it has no place, the other step)

    def edge(a, b, kind: str = "file") -> None:
        if a is not None and b is not None and a is not b:
            preds[ident[id(b)]].setdefault(ident[id(a)], kind)

    def conflict(x, reason: str, other) -> None:
        conflicts.setdefault(ident[id(x)], (reason, other))

    for seq_items in by_proc.values():
        for a, b in zip(seq_items, seq_items[1:]):
            edge(a, b)
    by_ref = {(x.proc, x.seq): x for x in items}
    for x in items:
        if isinstance(x, Step):
            for ref in x.after:
                if ref not in by_ref:
                    raise MergeError(f"{x.where()}: after {list(ref)}: no such step in the files given")
                edge(by_ref[ref], x, "after")

    master = by_proc.get("master")
    if master is not None:
        master_trace = next(t for t in traces if t.process == "master")
        _ha_edges(first, master, by_proc, edge, conflict if ("log", None) in master_trace.observes else None)

    # Kahn's algorithm with the priorities above; ties in file order.
    indegree = {n: len(preds[n]) for n in range(len(items))}
    succs: dict[int, list[int]] = defaultdict(list)
    for b, ps in preds.items():
        for a in ps:
            succs[a].append(b)

    def rank(n: int) -> tuple:
        return _priority(items[n]), file_of[n], items[n].seq, n

    ready = [rank(n) for n in range(len(items)) if indegree[n] == 0]
    heapq.heapify(ready)
    out: list[Step] = []
    done = 0
    while ready:
        n = heapq.heappop(ready)[-1]
        done += 1
        if isinstance(items[n], Step):
            if n in conflicts:
                reason, other = conflicts[n]
                out.append(attrs.evolve(items[n], conflict=(reason, other)))
            else:
                out.append(items[n])
        for m in succs[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                heapq.heappush(ready, rank(m))
    if done != len(items):
        _cycle(traces, items, preds, indegree, out)
    return out, complete


def _cycle(traces: list[Trace], items: list, preds: dict[int, dict[int, str]], indegree: dict, out: list[Step]):
    """Report a cycle among the items Kahn's algorithm could not place: through an edge the HA
    protocol gives, a violation naming its two ends; of the files' own order and ``after``
    references alone, malformed stamps."""
    n = next(n for n in range(len(items)) if indegree[n] > 0)
    path: list[int] = []
    seen: dict[int, int] = {}
    while n not in seen:              # walk back along unplaced predecessors until one repeats
        seen[n] = len(path)
        path.append(n)
        n = next(a for a in preds[n] if indegree[a] > 0)
    cycle = path[seen[n]:]            # each item's predecessor follows it
    edges = [(cycle[(i + 1) % len(cycle)], b) for i, b in enumerate(cycle)]     # (a, b): a before b
    protocol = [(a, b) for a, b in edges if preds[b][a] in WHY]
    if not protocol:
        stuck = items[cycle[0]]
        raise MergeError(f"{stuck.file}:{stuck.line}: the files' order and their \"after\" references form a cycle "
                         "through this line")
    a, b = protocol[0]
    first, then = items[a], items[b]
    step, other = (then, first) if isinstance(then, Step) else (first, then)
    reason = (f"{_named(then)} must follow {_named(first)} ({WHY[preds[b][a]]}), but the files' order and "
              f"references put {first.file}:{first.line} after it: no order of the files explains both")
    raise MergeViolation(step, other, reason, spec_ids(traces, out))


def _named(x) -> str:
    return f"{x.file}:{x.line} ({x.label if isinstance(x, Step) else x.note})"


def _ha_edges(cfg_trace: Trace, master: list, by_proc: dict[str, list], edge, conflict=None) -> None:
    """The causal edges the HA protocol carries (see the module's docstring).  ``conflict(step,
    reason, other)``, when the master's file observes its log: a slave's record the master's log
    never held at that position.  Linear in the files: the master's log is kept once, with the
    stretch of its steps during which each position held each record, never copied per step."""
    replicas = cfg_trace.config.replicas
    end_of_file = len(master)
    log: list = []
    stretches: list[list[int]] = []      # per log position: [first, end) of master items it holds its record
    held: dict[tuple[int, object], list[list[int]]] = defaultdict(list)    # (position, record) -> stretches
    first_held: dict[object, Step] = {}  # where each record first entered the master's log
    committed_at: list[int] = []         # the committed watermark after each master item

    def change_log(take: int, appended, pos: int, x: Step) -> None:
        for stretch in stretches[take:]:
            stretch[1] = pos
        del log[take:], stretches[take:]
        for value in appended:
            log.append(value)
            stretches.append([pos, end_of_file])
            held[len(log), value].append(stretches[-1])
            first_held.setdefault(value, x)

    committed = 0
    connects: dict[str, list[tuple[int, Step, int]]] = defaultdict(list)   # r -> (position, step, records)
    closes: dict[tuple[str, object], Step] = {}                              # (r, conn) -> the step that closed it
    acks: list[tuple[Step, str, int]] = []
    ack = {r: 0 for r in replicas}
    for pos, x in enumerate(master):
        if isinstance(x, Step):
            obs = x.obs
            names = {a for a, _ in x.actions}
            if "log" in obs:
                seen = obs["log"]
                if isinstance(seen, list):
                    change_log(0, seen, pos, x)
                else:
                    change_log(min(seen.get("take", len(log)), len(log)), seen.get("append", ()), pos, x)
            if "committed" in obs:
                committed = obs["committed"]
            elif "Recover" in names:           # the spec's Recover: every watermark at the recovered end
                committed = len(log)
            elif ("committed", None) not in x.observes:
                committed = min(committed, len(log))     # an unobserved crash keeps at most the log
            if "Recover" in names and "log" not in obs and committed < len(log):
                change_log(committed, (), pos, x)          # (after a crash the files did not observe)
            ack.update(obs.get("ack", {}))
            for r, up in obs.get("connected", {}).items():
                if up and "ReplicaConnect" in names:
                    connects[r].append((pos, x, ack[r]))
                elif not up and x.conn is not None:
                    closes.setdefault((r, x.conn), x)
            if names & {"ReplicaAck", "ForgedAck"}:
                for r, n in obs.get("ack", {}).items():
                    if obs.get("connected", {}).get(r) is not False and 0 < n <= committed:
                        acks.append((x, r, n))
        committed_at.append(committed)

    def holder(length: int, value, start: int) -> int | None:
        """The first master item from ``start`` on at which the log holds ``value`` at ``length``,
        committed (else the first at which it holds it at all)."""
        fallback = None
        for first, end in held.get((length, value), ()):
            if end <= start:
                continue
            p = max(first, start)
            fallback = p if fallback is None else fallback
            while p < end and committed_at[p] < length:
                p += 1
            if p < end:
                return p
        return fallback

    for r in replicas:
        mine = by_proc.get(r)
        if mine is None:
            continue
        by_conn = {c.conn: (pos, c) for pos, c, _ in connects.get(r, []) if c.conn is not None}
        matched = _match_handshakes(r, mine, connects.get(r, []), by_conn, edge)
        rlog: list = []
        reached: dict[int, Step] = {}
        conn_pos, conn_step, current = None, None, None
        for x in mine:
            if isinstance(x, Note):
                if id(x) in matched:
                    conn_pos, conn_step = matched[id(x)]
                current = x.data.get("conn")
                continue
            if {a for a, _ in x.actions} == {"ReplicaCrash"}:
                # after the master saw the connection it was on close (if it did)
                edge(closes.get((r, x.conn if x.conn is not None else current)), x, "close")
                continue
            mine_obs = x.obs.get("rlog", {}).get(r)
            if mine_obs is None:
                continue
            before = len(rlog)
            if isinstance(mine_obs, list):
                rlog[:] = mine_obs
            else:
                del rlog[mine_obs.get("take", len(rlog)):]
                rlog.extend(mine_obs.get("append", ()))
            for length in range(before + 1, len(rlog) + 1):
                reached.setdefault(length, x)
            if {a for a, _ in x.actions} != {"Transfer"} or not rlog:
                continue
            if x.conn is not None and x.conn in by_conn:
                conn_pos, conn_step = by_conn[x.conn]
            length, value = len(rlog), rlog[-1]
            if value == TORN:
                edge(conn_step, x, "connection")
                continue
            if conflict is not None and (length, value) not in held:
                other = first_held.get(value)
                where = (f"the master's log has it first at {other.file}:{other.line} ({other.label})"
                         if other is not None else "the master's file never has it")
                conflict(x, f"{x.file}:{x.line} ({x.label}): the slave holds record {value} at position {length}, "
                            f"where the master's log never had it ({where}): a slave holds only what it received",
                         other)
                continue
            edge(conn_step, x, "connection")
            found = holder(length, value, conn_pos if conn_pos is not None else 0)
            edge(master[found] if found is not None and isinstance(master[found], Step) else None, x, "holder")
        for step, who, n in acks:
            if who == r and n in reached:
                edge(reached[n], step, "ack")


def _match_handshakes(r: str, mine: list, connects: list, by_conn: dict, edge) -> dict:
    """HANDSHAKE notes paired with the master's ReplicaConnect steps: by connection id when the
    files give one, else in order by the record count reported (a refused handshake has none)."""
    notes = [x for x in mine if isinstance(x, Note) and x.note == "HANDSHAKE"]
    matched: dict[int, tuple[int, Step]] = {}
    if by_conn:
        for note in notes:
            if note.data.get("conn") in by_conn:
                pos, connect = by_conn[note.data["conn"]]
                edge(note, connect, "handshake")
                matched[id(note)] = (pos, connect)
        return matched
    k = 0
    for pos, connect, n in connects:
        while k < len(notes) and notes[k].data.get("records") != n:
            k += 1
        if k == len(notes):
            break
        edge(notes[k], connect, "handshake")
        matched[id(notes[k])] = (pos, connect)
        k += 1
    return matched


# ------------------------------------------------------------------ keys -> spec ids

def _creates_request(step: Step, pool: bool) -> bool:
    names = {a for a, _ in step.actions}
    return "Put" in names or ("WriteFail" in names and not pool)


def spec_ids(traces: list[Trace], steps: list[Step] | None = None) -> list[Step]:
    """The steps (merged when several files) with producer keys turned into spec request ids."""
    if steps is None:
        steps, _ = merge(traces)
    out: list[Step] = []
    for step in iter_spec_ids(traces[0].ids, traces[0].config.transient_store_pool, steps, out):
        out.append(step)
    return out


def iter_spec_ids(ids: str, pool: bool, steps: Iterable[Step], done: list[Step] | None = None) -> Iterator[Step]:
    """``spec_ids`` one step at a time (a long single file is checked as it is read).  A step the
    merge could not place, or that names a request no step before it created, is a
    MergeViolation; ``done``, when given, is where the caller collects the steps yielded, which the
    violation carries (a caller that checks them as they come passes none)."""
    known: dict[int, int] = {}

    def violation(step: Step, reason: str, other=None):
        return MergeViolation(step, other, reason, None if done is None else list(done))

    for step in steps:
        if step.conflict is not None:
            reason, other = step.conflict
            raise violation(step, reason, other)
        if ids == "spec":
            yield step
            continue
        if _creates_request(step, pool) and step.key is not None:
            if step.key in known:
                raise MergeError(f"{step.where()}: key {step.key} names a request created before: producer keys "
                                 "must name one request each")
            known[step.key] = len(known) + 1

        def to_id(key, what: str):
            if key == TORN:
                return TORN
            if key not in known:
                raise violation(step, f"{step.where()} ({step.label}): {what}: key {key} names no request any step "
                                      "before it created")
            return known[key]

        actions = tuple((a, to_id(p, "action") if a in ("Respond", "Timeout") else p) for a, p in step.actions)
        obs = dict(step.obs)
        if "log" in obs:
            obs["log"] = _map_seq(obs["log"], lambda v: to_id(v, "obs.log"))
        if "rlog" in obs:
            obs["rlog"] = {r: _map_seq(v, lambda x: to_id(x, f"obs.rlog.{r}")) for r, v in obs["rlog"].items()}
        if "reqs" in obs and isinstance(obs["reqs"], dict) and "set" in obs["reqs"]:
            obs["reqs"] = {**obs["reqs"], "set": {str(to_id(int(k), "obs.reqs.set")): v
                                                   for k, v in obs["reqs"]["set"].items()}}
        yield attrs.evolve(step, actions=actions, obs=obs)


def _map_seq(obs, f):
    if isinstance(obs, list):
        return [f(v) for v in obs]
    return {**obs, **({"append": [f(v) for v in obs["append"]]} if "append" in obs else {})}

