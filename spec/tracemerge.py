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
"""

from __future__ import annotations

import heapq
from collections import defaultdict

import attrs

from spec.traceformat import TORN, Note, Step, Trace, TraceError

PRIORITY_EARLY, PRIORITY_MASTER, PRIORITY_LATE = 0, 1, 2
LATE_ACTIONS = frozenset({"ReplicaCrash", "ReplicaRestart"})


class MergeError(TraceError):
    """Files that cannot be merged (different configurations, a causal cycle...)."""


def _apply_seq(obs, current: list) -> list:
    if isinstance(obs, list):
        return list(obs)
    take = obs.get("take", len(current))
    return current[:take] + list(obs.get("append", ()))


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

    items: list = []                      # every step and note
    by_proc: dict[str, list] = {}
    for t in traces:
        seq_items = sorted([*t.steps, *t.notes], key=lambda x: x.seq)
        by_proc[t.process] = seq_items
        items += seq_items
    ident = {id(x): n for n, x in enumerate(items)}
    preds: dict[int, set[int]] = defaultdict(set)

    def edge(a, b) -> None:
        if a is not None and b is not None and a is not b:
            preds[ident[id(b)]].add(ident[id(a)])

    for seq_items in by_proc.values():
        for a, b in zip(seq_items, seq_items[1:]):
            edge(a, b)
    by_ref = {(x.proc, x.seq): x for x in items}
    for x in items:
        if isinstance(x, Step):
            for ref in x.after:
                if ref not in by_ref:
                    raise MergeError(f"{x.where()}: after {list(ref)}: no such step in the files given")
                edge(by_ref[ref], x)

    master = by_proc.get("master")
    if master is not None:
        _ha_edges(first, master, by_proc, edge)

    # Kahn's algorithm with the priorities above; ties in file order.
    order_of_proc = {p: n for n, p in enumerate(procs)}
    indegree = {n: len(preds[n]) for n in range(len(items))}
    succs: dict[int, list[int]] = defaultdict(list)
    for b, ps in preds.items():
        for a in ps:
            succs[a].append(b)
    ready = [(_priority(items[n]), order_of_proc[items[n].proc], items[n].seq, n)
             for n in range(len(items)) if indegree[n] == 0]
    heapq.heapify(ready)
    out: list[Step] = []
    done = 0
    while ready:
        _, _, _, n = heapq.heappop(ready)
        done += 1
        if isinstance(items[n], Step):
            out.append(items[n])
        for m in succs[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                heapq.heappush(ready, (_priority(items[m]), order_of_proc[items[m].proc], items[m].seq, m))
    if done != len(items):
        stuck = next(items[n] for n in range(len(items)) if indegree[n] > 0)
        raise MergeError(f"{stuck.file}:{stuck.line}: the files' causal order has a cycle through this line")
    return out, complete


def _ha_edges(cfg_trace: Trace, master: list, by_proc: dict[str, list], edge) -> None:
    """The causal edges the HA protocol carries (see the module's docstring)."""
    replicas = cfg_trace.config.replicas
    # The master's own log and committed watermark after each of its steps.
    log: list = []
    committed = 0
    master_states = []             # (step, log, committed) after each master item
    connects: dict[str, list[tuple[int, Step, int]]] = defaultdict(list)   # r -> (position, step, records)
    closes: dict[tuple[str, object], Step] = {}                              # (r, conn) -> the step that closed it
    acks: list[tuple[Step, str, int]] = []
    ack = {r: 0 for r in replicas}
    for pos, x in enumerate(master):
        if isinstance(x, Step):
            obs = x.obs
            names = {a for a, _ in x.actions}
            if "log" in obs:
                log = _apply_seq(obs["log"], log)
            if "committed" in obs:
                committed = obs["committed"]
            elif "Recover" in names:           # the spec's Recover: every watermark at the recovered end
                committed = len(log)
            elif ("committed", None) not in x.observes:
                committed = min(committed, len(log))     # an unobserved crash keeps at most the log
            if "Recover" in names and "log" not in obs:
                log = log[:committed]           # (after a crash the files did not observe)
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
        master_states.append((x, log, committed))

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
                edge(closes.get((r, x.conn if x.conn is not None else current)), x)
                continue
            mine_obs = x.obs.get("rlog", {}).get(r)
            if mine_obs is None:
                continue
            before = len(rlog)
            rlog = _apply_seq(mine_obs, rlog)
            for length in range(before + 1, len(rlog) + 1):
                reached.setdefault(length, x)
            if {a for a, _ in x.actions} != {"Transfer"} or not rlog:
                continue
            if x.conn is not None and x.conn in by_conn:
                conn_pos, conn_step = by_conn[x.conn]
            length, value = len(rlog), rlog[-1]
            edge(conn_step, x)
            start = conn_pos if conn_pos is not None else 0
            holder = None
            for y, mlog, mcommitted in master_states[start:]:
                if len(mlog) >= length and mlog[length - 1] == value and value != TORN:
                    if mcommitted >= length:
                        holder = y
                        break
                    holder = holder or y
            edge(holder if isinstance(holder, Step) else None, x)
        for step, who, n in acks:
            if who == r and n in reached:
                edge(reached[n], step)


def _match_handshakes(r: str, mine: list, connects: list, by_conn: dict, edge) -> dict:
    """HANDSHAKE notes paired with the master's ReplicaConnect steps: by connection id when the
    files give one, else in order by the record count reported (a refused handshake has none)."""
    notes = [x for x in mine if isinstance(x, Note) and x.note == "HANDSHAKE"]
    matched: dict[int, tuple[int, Step]] = {}
    if by_conn:
        for note in notes:
            if note.data.get("conn") in by_conn:
                pos, connect = by_conn[note.data["conn"]]
                edge(note, connect)
                matched[id(note)] = (pos, connect)
        return matched
    k = 0
    for pos, connect, n in connects:
        while k < len(notes) and notes[k].data.get("records") != n:
            k += 1
        if k == len(notes):
            break
        edge(notes[k], connect)
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
    if traces[0].ids == "spec":
        return list(steps)
    pool = traces[0].config.transient_store_pool
    ids: dict[int, int] = {}
    out = []
    for step in steps:
        if _creates_request(step, pool) and step.key is not None:
            if step.key in ids:
                raise MergeError(f"{step.where()}: key {step.key} names a request created before")
            ids[step.key] = len(ids) + 1

        def to_id(key, what: str):
            if key == TORN:
                return TORN
            if key not in ids:
                raise MergeError(f"{step.where()}: {what}: key {key} names no request created before this step")
            return ids[key]

        actions = tuple((a, to_id(p, "action") if a in ("Respond", "Timeout") else p) for a, p in step.actions)
        obs = dict(step.obs)
        if "log" in obs:
            obs["log"] = _map_seq(obs["log"], lambda v: to_id(v, "obs.log"))
        if "rlog" in obs:
            obs["rlog"] = {r: _map_seq(v, lambda x: to_id(x, f"obs.rlog.{r}")) for r, v in obs["rlog"].items()}
        if "reqs" in obs and isinstance(obs["reqs"], dict) and "set" in obs["reqs"]:
            obs["reqs"] = {**obs["reqs"], "set": {str(to_id(int(k), "obs.reqs.set")): v
                                                   for k, v in obs["reqs"]["set"].items()}}
        out.append(attrs.evolve(step, actions=actions, obs=obs))
    return out


def _map_seq(obs, f):
    if isinstance(obs, list):
        return [f(v) for v in obs]
    return {**obs, **({"append": [f(v) for v in obs["append"]]} if "append" in obs else {})}

