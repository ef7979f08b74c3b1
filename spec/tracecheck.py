"""Trace validation with the Python twin: is a trace (spec/traceformat.py) a behaviour of the spec?

The checker keeps the set of spec states consistent with the steps so far (one state when the trace
observes everything, several when it leaves variables unobserved) and, for each step, the successors
by the named action whose new values agree with the step's observations.  When none is left, that
step is the first one no spec step can explain, and the states before it are the report.  The spec is
the bound-free one (tla/AckOrder.tla, not the MC module's bounds), with every bug switch off.  The
same question, asked of TLC, is tla/tracecheck.py; both must give the same verdict.

The cost of a step does not grow with the trace: the states' sequences (``log``, ``reqs``, each
``rlog``) are Seqs (spec/seq.py), which a step extends or updates without copying and which compare
chunk by chunk by identity; the ghosts are blanked after each step (the response history would be
copied at every response); a master crash reads only the chunks of ``reqs`` that hold a waiting
request; and ``TwinCheck`` takes the steps one at a time, so that a file is checked as it is read
(tla/tracecheck.py's ``check_files``).  A checkpoint (the whole state, spec/traceformat.py) must be
one of the states the steps before it reach; the check goes on from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import attrs

from spec import actions as sa
from spec.config import Config
from spec.functions import page_cache_end
from spec.properties import caught_up, diverged
from spec.seq import CHUNK, Seq, same_prefix
from spec.state import PROC_DOWN, UP, WAITING, Counters, Request, State
from spec.traceformat import PER_REPLICA, SETS, VARIABLES, Checkpoint, Name, Step, Trace, TraceError

MAX_FRONTIER = 100_000        # states consistent with a trace prefix (unobserved variables searched)


@attrs.frozen
class TraceVerdict:
    valid: bool
    steps: int                        # steps in the trace
    explained: int                    # steps some spec behaviour explains, in order
    failed: Step | None               # the first step no spec step explains (None: all were)
    states: tuple[State, ...]         # the states before that step (or at the end), ghosts blank
    reason: str
    seconds: float
    checker: str = "twin"
    conflict: object = None               # a step of another file the failed one conflicts with (a merge's)
    checkpoint: Checkpoint | None = None  # a checkpoint the steps before it do not reach

    @property
    def first_unexplained(self) -> int | None:
        """1-based index of the failing step in the trace (None when all steps were explained)."""
        return None if self.failed is None else self.explained + 1


def _no_ghosts(s: State) -> State:
    """The ghost history and the counters are derived, never observed, and no guard of the
    bound-free spec reads them: blanking them merges states that differ only there."""
    if not s.inv_responses and s.aux_ctrs == _ZERO:
        return s
    return attrs.evolve(s, inv_responses=frozenset(), aux_ctrs=_ZERO)


_ZERO = Counters()


def spec_steps(cfg: Config, s: State, action: str, param) -> list[State]:
    """The successors of ``s`` by one action of the bound-free spec (AckOrder!Next's disjuncts)."""
    index = {r: k for k, r in enumerate(cfg.replicas)}
    if action in ("Respond", "Timeout"):
        if not 1 <= param <= len(s.reqs):
            return []
        return (sa.respond if action == "Respond" else sa.timeout)(cfg, s, param)
    if param is not None:
        fn = _REPLICA[action]
        return fn(cfg, s, index[param])
    if action == "MasterProcessCrash":
        return sa.master_process_crash(cfg, s, _waiting(s.reqs))
    if action == "MasterMachineCrash":
        return _master_machine_crash(cfg, s)
    return _MASTER[action](cfg, s)


def _master_machine_crash(cfg: Config, s: State) -> list[State]:
    """sa.master_machine_crash, with the waiting requests found by ``_waiting``."""
    if s.mstate not in (UP, PROC_DOWN):
        return []
    end = page_cache_end(s)
    aborted = sa.abort_waiting(cfg, s, _waiting(s.reqs))
    return [t for keep in range(min(s.durable, end), end + 1) for torn in (False, True)
            if (t := sa.master_machine_crash_to(cfg, s, keep, torn, aborted))]


_WAITING_MEMO: dict[int, tuple[tuple, tuple[int, ...]]] = {}   # id(chunk) -> (chunk, its waiting positions)
_WAITING_MEMO_MAX = 1 << 16          # entries; emptied when full (a cache, never an answer by itself)


def _waiting(reqs) -> list[int]:
    """The ids of the waiting requests.  A crash answers every one of them; reading all of
    ``reqs`` at every crash made a long trace's check quadratic.  A Seq's full chunks never change
    (a step that changes a request makes a new chunk), so each one's answer is remembered (the
    memo holds the chunk: its id stays its own)."""
    if not isinstance(reqs, Seq):
        return [i for i, r in enumerate(reqs, 1) if r.status == WAITING]
    out: list[int] = []
    base = 1
    for chunk in reqs._chunks:
        hit = _WAITING_MEMO.get(id(chunk))
        if hit is None or hit[0] is not chunk:
            if len(_WAITING_MEMO) >= _WAITING_MEMO_MAX:
                _WAITING_MEMO.clear()
            hit = _WAITING_MEMO[id(chunk)] = (chunk, tuple(j for j, r in enumerate(chunk) if r.status == WAITING))
        out += [base + j for j in hit[1]]
        base += len(chunk)
    out += [base + j for j, r in enumerate(reqs._tail) if r.status == WAITING]
    return out


_MASTER: dict[str, Callable] = {
    "Put": sa.put, "Commit": sa.commit, "Flush": sa.flush, "FlushFail": sa.flush_fail, "WriteFail": sa.write_fail,
    "MasterProcessCrash": sa.master_process_crash, "MasterMachineCrash": sa.master_machine_crash,
    "Recover": sa.recover,
}
_REPLICA: dict[str, Callable] = {
    "ReplicaConnect": sa.replica_connect, "Transfer": sa.transfer, "ReplicaAck": sa.replica_ack,
    "ForgedAck": sa.forged_ack, "ReplicaDisconnect": sa.replica_disconnect, "ReplicaCrash": sa.replica_crash,
    "ReplicaRestart": sa.replica_restart,
}


# ------------------------------------------------------------------ observations

def _seq_ok(obs, before: tuple, after: tuple) -> bool:
    if isinstance(obs, list):
        return len(after) == len(obs) and tuple(after) == tuple(obs)
    take = obs.get("take", len(before))
    if take > len(before):
        return False
    app = obs.get("append", ())
    return (len(after) == take + len(app) and _same_prefix(after, before, take)
            and tuple(after[take + j] for j in range(len(app))) == tuple(app))


def _same_prefix(a, b, n: int) -> bool:
    """``a[:n] == b[:n]``; for two versions of one Seq, their shared chunks are compared by
    identity at C speed (spec.seq.same_prefix walks them in Python: too slow at every step)."""
    if len(a) < n or len(b) < n:
        return False
    if not (isinstance(a, Seq) and isinstance(b, Seq)):
        return same_prefix(a, b, n) if isinstance(a, Seq) or isinstance(b, Seq) else a[:n] == b[:n]
    k = n // CHUNK
    if not (a._chunks is b._chunks or a._chunks[:k] == b._chunks[:k]):
        return False
    return a[k * CHUNK: n] == b[k * CHUNK: n] if n > k * CHUNK else True


def _request_ok(fields: dict, r: Request) -> bool:
    return all((r.off if k == "off" else r.flush_done if k == "flushDone" else r.status) == v
               for k, v in fields.items())


def _reqs_ok(obs, before: tuple, after: tuple) -> bool:
    if isinstance(obs, list):
        return len(after) == len(obs) and all(_request_ok(f, r) for f, r in zip(obs, after))
    app = obs.get("append", ())
    if len(after) != len(before) + len(app):
        return False
    if not all(_request_ok(f, r) for f, r in zip(app, after[len(before):])):
        return False
    for key, fields in obs.get("set", {}).items():
        i = int(key)
        if not (1 <= i <= len(after) and _request_ok(fields, after[i - 1])):
            return False
    return True


def observation_holds(cfg: Config, step: Step, s: State, t: State, unchanged: Iterable[Name]) -> bool:
    """The step's observations hold of the spec step s -> t; ``unchanged``: observed names it does
    not mention, which must keep their values."""
    index = {r: k for k, r in enumerate(cfg.replicas)}
    for var, v in step.obs.items():
        a, b = getattr(s, var), getattr(t, var)
        if var in PER_REPLICA:
            for r, x in v.items():
                k = index[r]
                if not (_seq_ok(x, a[k], b[k]) if var == "rlog" else b[k] == x):
                    return False
        elif var == "log":
            if not _seq_ok(v, a, b):
                return False
        elif var == "reqs":
            if not _reqs_ok(v, a, b):
                return False
        elif var in SETS:
            if b != frozenset(v):
                return False
        elif b != v:
            return False
    for var, r in unchanged:
        a, b = getattr(s, var), getattr(t, var)
        if r is None:
            if a is not b and a != b:
                return False
        elif a[index[r]] != b[index[r]]:
            return False
    return True


def end_problems(cfg: Config, s: State) -> list[str]:
    """Why a state cannot be where a complete trace stops: the finite reading of
    EveryRequestAnswered and ReplicasCatchUp (the trace claims nothing more would happen)."""
    out = []
    if s.mstate != UP:
        out.append(f"EveryRequestAnswered: the master is {s.mstate} at the end")
    waiting = [i for i, r in enumerate(s.reqs, 1) if r.status == WAITING]
    if waiting:
        out.append(f"EveryRequestAnswered: request(s) {', '.join(map(str, waiting[:8]))} still waiting at the end")
    behind = [r for k, r in enumerate(cfg.replicas) if not (diverged(cfg, s, k) or caught_up(cfg, s, k))]
    if behind:
        out.append(f"ReplicasCatchUp: {', '.join(behind)} neither caught up nor diverged at the end")
    return out


# ------------------------------------------------------------------ the check

def _cover(coverage, cfg: Config, step: Step, frontier: list[State], unchanged) -> None:
    from spec.traceformat import label_text

    for s in frontier:
        for action, param in step.actions:
            for t in spec_steps(cfg, s, action, param):
                if observation_holds(cfg, step, s, t, unchanged):
                    coverage.step(cfg, label_text(action, param), s, t)
                    return


def _cheap_key(s: State) -> tuple:
    """A key of a state that costs nothing to hash (hashing a whole state is linear in its size)."""
    return (s.mstate, s.committed, s.flushed, s.durable, s.writable, s.landed, len(s.log), s.log[-1:],
            len(s.reqs), s.reqs[-1:], s.connected, s.ack, s.push2SlaveMaxOffset, s.rUp,
            tuple(len(r) for r in s.rlog), s.unwritten)


def _distinct(states: list[State]) -> list[State]:
    """The states without repeats; equal states are compared only within a cheap key's bucket
    (and usually share their large parts, which == compares by identity first)."""
    buckets: dict[tuple, list[State]] = {}
    out = []
    for t in states:
        bucket = buckets.setdefault(_cheap_key(t), [])
        if not any(u is t or u == t for u in bucket):
            bucket.append(t)
            out.append(t)
    return out


def as_seqs(s: State) -> State:
    """``s`` with its sequences as Seqs (the same values; see the module's docstring)."""
    return attrs.evolve(s, log=Seq(s.log), reqs=Seq(s.reqs), rlog=tuple(Seq(r) for r in s.rlog))


def plain(s: State) -> State:
    """``s`` with its sequences as tuples, as every other part of ackorder has them (a report)."""
    if not isinstance(s.log, Seq):
        return s
    return attrs.evolve(s, log=tuple(s.log), reqs=tuple(s.reqs), rlog=tuple(tuple(r) for r in s.rlog))


class TwinCheck:
    """The twin's check, a step at a time: ``step`` and ``checkpoint`` as they come (False once
    the trace is refuted: the later ones are only counted), then ``verdict``."""

    def __init__(self, cfg: Config, max_frontier: int = MAX_FRONTIER, coverage=None) -> None:
        self.cfg, self.max_frontier, self.coverage = cfg, max_frontier, coverage
        self.frontier: list[State] = [as_seqs(_no_ghosts(sa.initial_state(cfg)))]
        self.steps = 0                      # steps seen
        self.explained = 0
        self.failure: tuple | None = None   # (failed step, states before it, reason, conflict, checkpoint)
        self.start = time.perf_counter()

    def step(self, step: Step) -> bool:
        self.steps += 1
        if self.failure is not None:
            return False
        cfg, frontier = self.cfg, self.frontier
        unchanged = tuple(step.observes - step.mentioned())
        nxt: list[State] = []
        for s in frontier:
            for action, param in step.actions:
                for t in spec_steps(cfg, s, action, param):
                    if observation_holds(cfg, step, s, t, unchanged):
                        nxt.append(_no_ghosts(t))
        if self.coverage is not None and nxt:
            _cover(self.coverage, cfg, step, frontier, unchanged)
        if len(nxt) > 1:
            nxt = _distinct(nxt)
        if not nxt:
            reason = f"no spec step {step.label} from the state before it agrees with what the step observed"
            if not any(spec_steps(cfg, s, a, p) for s in frontier for a, p in step.actions):
                reason = f"{step.label} is not enabled in the state before it"
            self.failure = (step, frontier, reason, None, None)
            return False
        if len(nxt) > self.max_frontier:
            raise TraceError(f"{step.where()}: more than {self.max_frontier:,} spec states agree with the trace so "
                             "far: it observes too little to be checked")
        self.frontier = nxt
        self.explained += 1
        return True

    def checkpoint(self, cp: Checkpoint) -> bool:
        """The state the steps so far reach must be the checkpoint's (one of them, when they
        leave several); the check goes on from it."""
        if self.failure is not None:
            return False
        state = as_seqs(cp.state)
        if any(s == state for s in self.frontier):
            self.frontier = [state]
            return True
        self.failure = (None, self.frontier, checkpoint_reason(self.cfg, cp, self.frontier, self.steps), None, cp)
        return False

    def conflict(self, step: Step, reason: str, other) -> None:
        """A step the merge could not place (spec/tracemerge.py's MergeViolation), once the steps
        before it were checked."""
        self.steps += 1
        if self.failure is None:
            self.failure = (step, self.frontier, reason, other, None)

    def verdict(self, complete: bool) -> TraceVerdict:
        seconds = time.perf_counter() - self.start
        if self.failure is not None:
            step, states, reason, other, cp = self.failure
            return TraceVerdict(False, self.steps, self.explained, step, tuple(map(plain, states)), reason, seconds,
                                conflict=other, checkpoint=cp)
        if complete:
            problems = [end_problems(self.cfg, s) for s in self.frontier]
            if all(problems):
                return TraceVerdict(False, self.steps, self.steps, None, tuple(map(plain, self.frontier)),
                                    "the trace ends complete, but " + "; ".join(problems[0]), seconds)
        return TraceVerdict(True, self.steps, self.steps, None, tuple(map(plain, self.frontier)), "valid", seconds)


def checkpoint_reason(cfg: Config, cp: Checkpoint, reached, steps: int) -> str:
    """Why a checkpoint is not where the steps before it lead (against the closest state they reach)."""
    best = min((state_differences(cfg, s, cp.state) for s in reached), key=len)
    return (f"the checkpoint at {cp.where()} is not a state the {steps:,} step(s) before it reach: "
            + "; ".join(best[:4]) + (f"; and {len(best) - 4} more" if len(best) > 4 else ""))


def state_differences(cfg: Config, reached: State, claimed: State) -> list[str]:
    """Where two states differ, briefly (their sequences may hold a whole run)."""
    out = []
    for var in VARIABLES:
        a, b = getattr(reached, var), getattr(claimed, var)
        entries = zip(cfg.replicas, a, b) if var in PER_REPLICA else [(None, a, b)]
        for r, x, y in entries:
            if x == y:
                continue
            name = f"{var}[{r}]" if r else var
            if isinstance(x, (tuple, Seq)):
                n = min(len(x), len(y))
                first = next((i for i in range(n) if x[i] != y[i]), n)
                at = (f"from position {first + 1}: {tla_text(x[first])} vs {tla_text(y[first])}" if first < n
                      else "one is a prefix of the other")
                out.append(f"{name}: the steps reach {len(x):,} element(s), the checkpoint says {len(y):,} ({at})")
            else:
                out.append(f"{name}: the steps reach {tla_text(x)}, the checkpoint says {tla_text(y)}")
    return out


def check_steps(cfg: Config, steps: Iterable[Step], complete: bool = False, max_frontier: int = MAX_FRONTIER,
                coverage=None, checkpoints: Iterable[Checkpoint] = ()) -> TraceVerdict:
    """``coverage``: a spec.coverage.Coverage that counts the branch and antecedents of each step
    (of the first spec step that explains it, when the trace leaves several).  ``checkpoints``:
    a single file's (each after its ``after`` steps)."""
    check = TwinCheck(cfg, max_frontier, coverage)
    pending = sorted(checkpoints, key=lambda cp: cp.after)
    k = 0
    for step in steps:
        while k < len(pending) and pending[k].after == check.steps:
            check.checkpoint(pending[k])
            k += 1
        check.step(step)
    for cp in pending[k:]:
        check.checkpoint(cp)
    return check.verdict(complete)


def check_trace(trace: Trace) -> TraceVerdict:
    """One trace file (in spec ids, or keys translated by its own order)."""
    from spec.tracemerge import MergeViolation, adopt_config, iter_spec_ids

    (trace,) = adopt_config([trace])
    check = TwinCheck(trace.config)
    pending = list(trace.checkpoints)
    try:
        for step in iter_spec_ids(trace.ids, trace.config.transient_store_pool, trace.steps):
            while pending and pending[0].after == check.steps:
                check.checkpoint(pending.pop(0))
            check.step(step)
    except MergeViolation as v:
        check.conflict(v.step, v.reason, v.other)
        check.steps = len(trace.steps)
    for cp in pending:
        check.checkpoint(cp)
    return check.verdict(trace.complete)


# ------------------------------------------------------------------ reports

def tla_text(v) -> str:
    """A twin value in TLA+ notation (for the report's table of variables)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, Request):
        return f'[off |-> {v.off}, flushDone |-> {tla_text(v.flush_done)}, status |-> "{v.status}"]'
    if isinstance(v, (tuple, Seq)):
        return "<<" + ", ".join(tla_text(x) for x in v) + ">>"
    if isinstance(v, frozenset):
        return "{" + ", ".join(sorted(tla_text(x) for x in v)) + "}"
    return repr(v)


def state_table(cfg: Config, s: State) -> list[tuple[str, str]]:
    """(variable, value) rows of a state, per-replica functions by replica, ghosts left out."""
    from spec.traceformat import VARIABLES

    rows = []
    for var in VARIABLES:
        v = getattr(s, var)
        if var in PER_REPLICA:
            v = "(" + " @@ ".join(f'"{r}" :> {tla_text(x)}' for r, x in zip(cfg.replicas, v)) + ")"
            rows.append((var, v))
        else:
            rows.append((var, tla_text(v)))
    return rows


def _observed_value(var: str, r, obs, before):
    """What an observation says the new value is (for showing it beside the spec's)."""
    if var in ("log", "rlog") and isinstance(obs, dict):
        take = obs.get("take", len(before))
        return tuple(before[:take]) + tuple(obs.get("append", ()))
    if var in SETS:
        return frozenset(obs)
    if isinstance(obs, list):
        return tuple(obs)
    return obs


def mismatches(cfg: Config, step: Step, s: State) -> list[str]:
    """How the spec's successors by the step's actions differ from what the step observed (the
    closest successor), or why none exists."""
    options = [(a, p, t) for a, p in step.actions for t in spec_steps(cfg, s, a, p)]
    if not options:
        return [f"{step.label} is not enabled"]
    index = {r: k for k, r in enumerate(cfg.replicas)}
    unchanged = step.observes - step.mentioned()
    best: list[str] | None = None
    for a, p, t in options:
        diffs = []
        for var, v in step.obs.items():
            if var in PER_REPLICA:
                for r, x in v.items():
                    single = Step(step.file, step.line, step.proc, step.seq, step.actions, {var: {r: x}},
                                  frozenset())
                    if not observation_holds(cfg, single, s, t, ()):
                        diffs.append(f"{var}[{r}]: the spec has {tla_text(getattr(t, var)[index[r]])}, the trace "
                                     f"{tla_text(_observed_value(var, r, x, getattr(s, var)[index[r]]))}")
            elif var == "reqs":
                diffs += _reqs_diffs(v, s.reqs, t.reqs)
            else:
                single = Step(step.file, step.line, step.proc, step.seq, step.actions, {var: v}, frozenset())
                if not observation_holds(cfg, single, s, t, ()):
                    diffs.append(f"{var}: the spec has {tla_text(getattr(t, var))}, "
                                 f"the trace {tla_text(_observed_value(var, None, v, getattr(s, var)))}")
        for var, r in sorted(unchanged, key=lambda n: (n[0], n[1] or "")):
            a_, b_ = getattr(s, var), getattr(t, var)
            if (a_ != b_) if r is None else (a_[index[r]] != b_[index[r]]):
                shown = tla_text(b_ if r is None else b_[index[r]])
                diffs.append(f"{var}{f'[{r}]' if r else ''}: the spec changes it to {shown}, the trace says unchanged")
        label = a if p is None else f"{a}({p})"
        diffs = [f"{label}: {d}" for d in diffs]
        if best is None or len(diffs) < len(best):
            best = diffs
    return best or []


def _reqs_diffs(obs, before: tuple, after: tuple) -> list[str]:
    """The requests (and fields) where the spec's new reqs differs from the observation."""
    if isinstance(obs, list):
        wanted = dict(enumerate(obs, 1))
        if len(obs) != len(after):
            return [f"reqs: the spec has {len(after)} requests, the trace {len(obs)}"]
    else:
        app = obs.get("append", ())
        if len(after) != len(before) + len(app):
            return [f"reqs: the spec has {len(after)} requests, the trace {len(before) + len(app)}"]
        wanted = {len(before) + j: f for j, f in enumerate(app, 1)}
        for key, fields in obs.get("set", {}).items():
            wanted[int(key)] = {**wanted.get(int(key), {}), **fields}
    out = []
    for i, fields in sorted(wanted.items()):
        if not 1 <= i <= len(after):
            out.append(f"reqs[{i}]: the spec has no request {i}")
            continue
        r = after[i - 1]
        got = {"off": r.off, "flushDone": r.flush_done, "status": r.status}
        for name, x in fields.items():
            if got[name] != x:
                out.append(f"reqs[{i}].{name}: the spec has {tla_text(got[name])}, the trace {tla_text(x)}")
    return out


# ------------------------------------------------------------------ states from observations

def apply_obs(cfg: Config, s: State, step: Step) -> State:
    """The state after ``step`` when its observations say everything that changed (a trace that
    observes every variable, as the simulator's does); ghosts are left as they were."""
    from spec.traceformat import VARIABLES

    index = {r: k for k, r in enumerate(cfg.replicas)}
    changes = {}
    for var, v in step.obs.items():
        old = getattr(s, var)
        if var in PER_REPLICA:
            new = list(old)
            for r, x in v.items():
                new[index[r]] = _seq_after(x, old[index[r]]) if var == "rlog" else x
            changes[var] = tuple(new)
        elif var == "log":
            changes[var] = _seq_after(v, old)
        elif var == "reqs":
            changes[var] = _reqs_after(v, old)
        elif var in SETS:
            changes[var] = frozenset(v)
        else:
            changes[var] = v
    assert set(changes) <= set(VARIABLES)
    return attrs.evolve(s, **changes)


def _seq_after(obs, old: tuple) -> tuple:
    if isinstance(obs, list):
        return tuple(obs)
    return tuple(old[: obs.get("take", len(old))]) + tuple(obs.get("append", ()))


def _request(fields: dict, base: Request | None = None) -> Request:
    base = base or Request(0, False, WAITING)
    return Request(fields.get("off", base.off), fields.get("flushDone", base.flush_done),
                   fields.get("status", base.status))


def _reqs_after(obs, old: tuple) -> tuple:
    if isinstance(obs, list):
        return tuple(_request(f) for f in obs)
    new = list(old) + [_request(f) for f in obs.get("append", ())]
    for key, fields in obs.get("set", {}).items():
        new[int(key) - 1] = _request(fields, new[int(key) - 1])
    return tuple(new)


def behaviour(trace: Trace) -> tuple[list[str], list[State]]:
    """The labels and states of a trace that observes every variable, from Init, with the bug
    switches its header records (to drive the reference along it)."""
    from spec.traceformat import SIM_OBSERVES, expand_observes

    cfg = attrs.evolve(trace.config, bugs=frozenset(trace.bugs))
    if trace.observes != expand_observes(SIM_OBSERVES, cfg.replicas, trace.path):
        raise ValueError(f"{trace.path}: the trace does not observe every variable (process {trace.process}): "
                         "its states cannot be rebuilt from it")
    states = [sa.initial_state(cfg)]
    labels = ["Init"]
    for step in trace.steps:
        if len(step.actions) != 1:
            raise ValueError(f"{step.where()}: a step of several possible actions")
        labels.append(step.label)
        states.append(apply_obs(cfg, states[-1], step))
    return labels, states
