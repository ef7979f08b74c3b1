"""Trace validation by TLC: a trace (spec/traceformat.py) becomes the literal sequence of a generated
module, checked by tla/AckOrderTrace.tla against the bound-free spec with every bug switch off.

TLC 2.15 reads no JSON, so each step is written as a TLA+ record whose observations are linear in
what the step changed (appends, truncations, changed fields), never whole values.  The first run
searches every behaviour that follows the trace; the deepest position it reaches (Reached prints
them) is the number of steps explained, plus one.  When that falls short of the trace, a second run
prints the states at that position (ReportState), which are the states the report shows.  Several
traces, of any configurations, are checked by the same two runs (a batch: the spec is instantiated
with each trace's configuration, each behaviour follows one trace, and each trace gets its own
verdict), which saves a JVM and TLC start-up per trace.
tla.tracecheck and spec.tracecheck (the twin, ``--twin``) must reach the same verdict on every trace.

A trace with checkpoints (the whole state every so many steps, spec/traceformat.py) is checked in
segments, each from its checkpoint's state (the first from Init) as a trace of its own, in batches:
one module of every step of a long trace is more than TLC parses and holds.  A segment must also
end at the next checkpoint's state (one more level, as a complete trace's end), so that a
checkpoint cannot hide a step none explains.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path

import attrs

from spec.config import BUG_NAMES, Config
from spec.state import State
from spec.traceformat import PER_REPLICA, SETS, Checkpoint, Step, TraceError
from spec.tracecheck import TraceVerdict, checkpoint_reason, end_problems
from tla.manifest import TLA_DIR, Model
from tla.tlc import TlcOptions, TlcRun, log_tail, run_model
from tla.trace import state_from_tlc

SPEC_MODULES = ("AckOrderTypes.tla", "AckOrderFunctions.tla", "AckOrder.tla", "AckOrderProperties.tla",
                "AckOrderTrace.tla")


class TraceCheckError(RuntimeError):
    """TLC gave no verdict on a generated trace module (a bug of ackorder, or of the environment)."""


# ------------------------------------------------------------------ TLA+ text

# (configuration, steps, whether it claims to be complete), and for a segment of a trace with
# checkpoints two more: the state it starts from (None: Init) and the checkpoint it must end at.
TraceInput = tuple


def _parts(item: TraceInput) -> tuple[Config, list[Step], bool, State | None, Checkpoint | None]:
    cfg, steps, complete, *rest = item
    start, end = (*rest, None, None)[:2]
    return cfg, steps, complete, start, end


def _end_levels(item: TraceInput) -> int:
    """Levels after the last step: one when the end is checked (complete, or a checkpoint)."""
    _, _, complete, _, end = _parts(item)
    return 1 if complete or end is not None else 0

TLC_INT_MIN, TLC_INT_MAX = -2**31, 2**31 - 1      # TLC's integers are Java ints


def tla_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


ITEMS_PER_LINE = 16      # SANY's time grows with the square of a line's length: a long sequence is cut


def tla_items(items: list[str]) -> str:
    """Items of a sequence or set, ``ITEMS_PER_LINE`` to a line (a checkpoint's log is a whole run)."""
    if len(items) <= ITEMS_PER_LINE:
        return ", ".join(items)
    return ",\n    ".join(", ".join(items[i:i + ITEMS_PER_LINE]) for i in range(0, len(items), ITEMS_PER_LINE))


def tla(v) -> str:
    """A JSON value as TLA+: lists are sequences, dicts records (sets are built by the caller)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        if not TLC_INT_MIN <= v <= TLC_INT_MAX:    # TLC would stop with no verdict, as if the machine failed
            raise TraceError(f"{v}: beyond the integers TLC holds ({TLC_INT_MIN} to {TLC_INT_MAX}); "
                             "the twin has no such bound (`--twin`)")
        return str(v)
    if isinstance(v, str):
        return tla_string(v)
    if isinstance(v, (list, tuple)):
        return "<<" + tla_items([tla(x) for x in v]) + ">>"
    if isinstance(v, dict):
        return "[" + ", ".join(f"{k} |-> {tla(x)}" for k, x in v.items()) + "]"
    raise TypeError(f"no TLA+ form for {v!r}")


def tla_set(items) -> str:
    return "{" + tla_items(list(items)) + "}"


def _pair(var: str, k: str | None) -> str:
    return f"<<{tla_string(var)}, {tla_string(k or '')}>>"


def _seq_obs(var: str, k: str | None, obs) -> str:
    head = f'v |-> {tla_string(var)}, k |-> {tla_string(k or "")}'
    if isinstance(obs, list):
        return f'[f |-> "eq", {head}, x |-> {tla(obs)}]'
    app = tla(obs.get("append", []))
    if "take" in obs:
        return f'[f |-> "take", {head}, n |-> {tla(obs["take"])}, x |-> {app}]'
    return f'[f |-> "app", {head}, x |-> {app}]'


def _request(fields: dict) -> str:
    return tla(fields)


def observations(obs: dict) -> list[str]:
    """One step's observations as TLA+ records (see tla/AckOrderTrace.tla)."""
    out = []
    for var, value in obs.items():
        if var in PER_REPLICA:
            for r, x in value.items():
                if var == "rlog":
                    out.append(_seq_obs(var, r, x))
                else:
                    out.append(f'[f |-> "eq", v |-> "{var}", k |-> {tla_string(r)}, x |-> {tla(x)}]')
        elif var == "log":
            out.append(_seq_obs(var, None, value))
        elif var == "reqs":
            if isinstance(value, list):
                out.append(f'[f |-> "eq", v |-> "reqs", k |-> "", x |-> {tla(value)}]')
                continue
            if value.get("append"):
                out.append(f'[f |-> "grow", v |-> "reqs", k |-> "", x |-> {tla(value["append"])}]')
            for i, fields in value.get("set", {}).items():
                for name, x in fields.items():
                    out.append(f'[f |-> "fld", v |-> "reqs", k |-> "", i |-> {tla(int(i))}, n |-> {tla_string(name)}, '
                               f'x |-> {tla(x)}]')
        elif var in SETS:
            out.append(f'[f |-> "eq", v |-> "{var}", k |-> "", x |-> {tla_set(tla(x) for x in value)}]')
        else:
            out.append(f'[f |-> "eq", v |-> "{var}", k |-> "", x |-> {tla(value)}]')
    return out


def state_record(cfg: Config, s: State) -> str:
    """A whole state (ghosts left out) as a TLA+ record (AckOrderTrace's StateIs reads it)."""
    def per_replica(values) -> str:
        if not cfg.replicas:
            return "<<>>"
        return "(" + "\n    @@ ".join(f"{tla_string(r)} :> {tla(v)}" for r, v in zip(cfg.replicas, values)) + ")"

    reqs = tla_items([f"[off |-> {tla(r.off)}, flushDone |-> {tla(r.flush_done)}, status |-> {tla_string(r.status)}]"
                      for r in s.reqs])
    fields = {"mstate": tla(s.mstate), "log": tla(tuple(s.log)), "committed": tla(s.committed),
              "flushed": tla(s.flushed), "durable": tla(s.durable), "writable": tla(s.writable),
              "unwritten": tla_set(tla(x) for x in sorted(s.unwritten)), "landed": tla(s.landed),
              "reqs": f"<<{reqs}>>", "connected": per_replica(s.connected), "ack": per_replica(s.ack),
              "push2SlaveMaxOffset": tla(s.push2SlaveMaxOffset),
              "syncStateSet": tla_set(tla_string(r) for r in sorted(s.syncStateSet)),
              "rlog": per_replica(tuple(x) for x in s.rlog), "rUp": per_replica(s.rUp)}
    return "[" + ", ".join(f"{k} |-> {v}" for k, v in fields.items()) + "]"


def config_record(cfg: Config) -> str:
    """A trace's configuration, as the spec's constants (AckOrderTrace's S(c) instantiates them)."""
    return ("[" + ", ".join(f"{k} |-> {v}" for k, v in {
        "Replicas": tla_set(tla_string(r) for r in cfg.replicas), "FlushMode": tla_string(cfg.flush_mode),
        "ReplMode": tla_string(cfg.repl_mode), "TransientStorePool": tla(cfg.transient_store_pool),
        "AckPolicy": tla_string(cfg.ack_policy), "InSyncReplicas": tla(cfg.in_sync_replicas),
        "FileSize": tla(cfg.file_size), "CommitOnReplicaWait": tla(cfg.commit_on_replica_wait)}.items()) + "]")


def data_module(traces: list[TraceInput], report_at: tuple[int, ...] | None = None) -> str:
    """The generated module: each trace as a literal sequence, one record per step (``Trace1``,
    ``Trace2``...), its configuration, and the position whose states ReportState prints (0: none)."""
    assert traces, "a batch of no traces"
    report_at = report_at or (0,) * len(traces)
    assert len(report_at) == len(traces)
    observes: dict[frozenset, str] = {}
    states: dict[int, tuple[str, str]] = {}     # id(state) -> (name, record): a checkpoint ends one segment
    bodies = []                                 # and starts the next, and is written once

    def state_name(cfg: Config, s: State | None) -> str:
        if s is None:
            return "NoState"
        if id(s) not in states:
            states[id(s)] = (f"State{len(states) + 1}", state_record(cfg, s))
        return states[id(s)][0]

    starts, ends = [], []
    for cfg, _, _, start, end in map(_parts, traces):
        starts.append(state_name(cfg, start))
        ends.append(state_name(cfg, end.state if end is not None else None))
    for index, (_, steps, *_) in enumerate(traces, 1):
        lines = []
        for n, step in enumerate(steps, 1):
            if step.observes not in observes:
                observes[step.observes] = f"Observes{len(observes) + 1}"
            actions = tla_set(f"<<{tla_string(a)}, {tla(p) if p is not None else tla_string('')}>>"
                              for a, p in step.actions)
            mentioned = tla_set(_pair(v, k) for v, k in sorted(step.mentioned(), key=lambda p: (p[0], p[1] or "")))
            comma = "," if n < len(steps) else ""
            # (the file's name, in a comment: as ASCII on one line, whatever the name holds)
            where = step.where().encode("ascii", "backslashreplace").decode().replace("\n", " ").replace("\r", " ")
            lines.append(f"  [a |-> {actions}, o |-> <<{', '.join(observations(step.obs))}>>, m |-> {mentioned}, "
                         f"ob |-> {observes[step.observes]}]{comma}   \\* {n}: {where}")
        bodies.append((f"Trace{index}", "\n".join(lines)))
    defs = [f"{name} == {tla_set(_pair(v, k) for v, k in sorted(names, key=lambda p: (p[0], p[1] or '')))}"
            for names, name in observes.items()]
    names = [name for name, _ in bodies]
    return ("---------------------------- MODULE AckOrderTraceData ----------------------------\n"
            "\\* Generated by `ackorder trace-check`: the traces as literal sequences (see AckOrderTrace.tla).\n"
            "EXTENDS Sequences, TLC\n"
            + "\n".join(defs) + "\n"
            + "NoState == [none |-> TRUE]\n"
            + "".join(f"{name} == {record}\n" for name, record in states.values())
            + "".join(f"{name} == <<\n{body}\n>>\n" for name, body in bodies)
            + f"Traces == <<{', '.join(names)}>>\n"
            f"Complete == <<{', '.join(tla(complete) for _, _, complete, *_ in traces)}>>\n"
            f"Configs == <<{', '.join(config_record(cfg) for cfg, *_ in traces)}>>\n"
            f"HasStart == <<{', '.join(tla(name != 'NoState') for name in starts)}>>\n"
            f"Starts == <<{', '.join(starts)}>>\n"
            f"HasEnd == <<{', '.join(tla(name != 'NoState') for name in ends)}>>\n"
            f"Ends == <<{', '.join(ends)}>>\n"
            f"ReportAt == <<{', '.join(str(n) for n in report_at)}>>\n"
            "=============================================================================\n")


def trace_cfg(invariant: str | None) -> str:
    # every bug switch is off (AckOrderTrace's S(c)); each trace's configuration is in the module
    return ("\\* Generated by `ackorder trace-check`.\nINIT TraceInit\nNEXT TraceNext\nVIEW TraceView\n"
            + (f"INVARIANT {invariant}\n" if invariant else ""))


# ------------------------------------------------------------------ running TLC

def _run(workdir: Path, invariant: str | None, options: TlcOptions, log_dir: Path, kept: bool) -> TlcRun:
    name = invariant or "Search"
    cfg_path = workdir / f"AckOrderTrace_{name}.cfg"
    cfg_path.write_text(trace_cfg(invariant))
    model = Model(model=f"trace-{name}", cfg=str(cfg_path), kind="adhoc", size="small",
                  expected="pass", title="trace validation", spec=str(workdir / "AckOrderTrace.tla"))
    # Only the states that agree with the trace: a short run unless the caller says otherwise.
    run = run_model(model, options if options.short is not None else attrs.evolve(options, short=True), log_dir)
    if run.outcome != "pass" or run.depth is None:
        detail = "; ".join(run.errors) or f"outcome {run.outcome}"
        raise TraceCheckError(f"TLC gave no verdict on the trace module: {detail} ({_log_note(run.log_path, kept)})")
    return run


def _log_note(log_path: Path, kept: bool) -> str:
    """Where TLC's log is, or, when it is not kept, its last lines."""
    if kept:
        return f"log: {log_path}"
    try:
        return "log's end: " + log_tail(log_path.read_text(errors="replace"))
    except OSError as err:
        return f"log unreadable: {err.strerror}"


STATE_MARK = "ackorder-trace-state"
REACHED_MARK = "ackorder-trace-reached"
_REACHED = re.compile(r'^<<"' + REACHED_MARK + r'", (\d+), (\d+)>>$')


def reached_depths(run: TlcRun, traces: int) -> list[int]:
    """Per trace of the batch, the deepest position a behaviour reached (what Reached printed):
    its search depth, as TLC's own is for a batch of one."""
    depths = [0] * traces
    for text in run.printed:
        if (m := _REACHED.match(text.strip())) is not None:
            index, position = int(m.group(1)), int(m.group(2))
            assert 1 <= index <= traces, f"Reached printed trace {index} of {traces}"
            depths[index - 1] = max(depths[index - 1], position)
    if not all(depths) or max(depths) != run.depth:
        raise TraceCheckError(f"TLC's Reached output does not give every trace's depth ({depths}, search depth "
                              f"{run.depth}; log: {run.log_path})")
    return depths


def printed_states(cfg: Config, run: TlcRun, index: int = 1) -> tuple:
    """The states ReportState printed (TLC's PrintT output) for trace ``index``, as twin states."""
    from tla.values import ValueParseError, parse_value

    out = []
    for text in run.printed:
        if STATE_MARK not in text:
            continue
        try:
            value = parse_value(text)
        except ValueParseError:
            continue
        if isinstance(value, tuple) and value[:2] == (STATE_MARK, index):
            out.append(state_from_tlc(cfg, {k: _tla_text(v) for k, v in value[2].items()}))
    return tuple(dict.fromkeys(out))


def _tla_text(v) -> str:
    from tla.diff import format_value

    return format_value(v)


MAX_BATCH_STEPS = 20_000                         # steps in one TLC run of a batch (bounds the module)


def check_batch_tlc(traces: list[TraceInput], options: TlcOptions | None = None, log_dir: Path | None = None,
                    keep: Path | None = None) -> list[tuple[TraceVerdict, dict]]:
    """TLC's verdict on each of several traces, from one search run (and one report run when some
    trace is not explained), and timings (seconds of each TLC run; a batch's runs are shared by its
    traces, ``batch`` says by how many)."""
    options = options or TlcOptions(workers=1)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ackorder-trace-") as tmp:
        workdir = Path(tmp)
        for name in SPEC_MODULES:
            shutil.copy(TLA_DIR / name, workdir / name)
        data = workdir / "AckOrderTraceData.tla"
        data.write_text(data_module(traces))
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for f in workdir.iterdir():
                shutil.copy(f, keep / f.name)
            (keep / "AckOrderTrace.cfg").write_text(trace_cfg(None))
        # logs nobody asked to keep go with the work directory (an error quotes the log's end instead)
        logs = log_dir if log_dir is not None else workdir / "logs"
        # one trace: TLC's search depth is its depth, and nothing needs printing for every state
        first = _run(workdir, "Reached" if len(traces) > 1 else None, options, logs, kept=log_dir is not None)
        depths = reached_depths(first, len(traces)) if len(traces) > 1 else [first.depth]
        shared = {"batch": len(traces), "search_s": first.seconds, "search_check_s": first.check_seconds}
        unexplained = [depth - 1 != len(item[1]) + _end_levels(item) for depth, item in zip(depths, traces)]
        second = None
        if any(unexplained):
            data.write_text(data_module(traces, tuple(d if u else 0 for d, u in zip(depths, unexplained))))
            second = _run(workdir, "ReportState", options, logs, kept=log_dir is not None)
            shared["report_s"] = second.seconds
    seconds = time.perf_counter() - start
    shared["total_s"] = seconds
    out = []
    for index, (item, depth, bad) in enumerate(zip(traces, depths, unexplained), 1):
        cfg, steps, _, _, end = _parts(item)
        explained = min(depth - 1, len(steps))
        if not bad:
            verdict = TraceVerdict(True, len(steps), len(steps), None, (), "valid", seconds, "tlc")
        else:
            assert second is not None
            states = printed_states(cfg, second, index)
            failed = None
            if explained == len(steps) and end is not None:
                reason = checkpoint_reason(cfg, end, states, len(steps)) if states else \
                    f"the checkpoint at {end.where()} is not a state the steps before it reach"
            elif explained == len(steps):
                problems = end_problems(cfg, states[0]) if states else []
                reason = "the trace ends complete, but " + "; ".join(problems or ["its end is not a resting state"])
            else:
                failed = steps[explained]
                reason = _reason(cfg, failed, states)
            verdict = TraceVerdict(False, len(steps), explained, failed, states, reason, seconds, "tlc",
                                   checkpoint=end if failed is None and end is not None else None)
        out.append((verdict, dict(shared)))
    return out


def check_many_tlc(items: list[TraceInput], options: TlcOptions | None = None, log_dir: Path | None = None,
                   keep: Path | None = None, jobs: int = 1) -> list[tuple[TraceVerdict, dict] | TraceCheckError]:
    """TLC's verdict on many traces, in as few TLC runs as MAX_BATCH_STEPS allows (``check_batch_tlc``).
    A batch TLC gives no verdict on is checked again trace by trace, so that the error is the one
    trace's and the others keep their verdicts.  ``keep``: each batch's module and cfg in
    ``keep/batchN``; ``jobs``: batches run at once (each its own TLC; the traces are independent)."""
    from concurrent.futures import ThreadPoolExecutor

    batches: list[list[int]] = [[]]
    for i, item in enumerate(items):
        if batches[-1] and sum(len(items[j][1]) for j in batches[-1]) + len(item[1]) > MAX_BATCH_STEPS:
            batches.append([])
        batches[-1].append(i)

    def one_batch(number: int, batch: list[int]) -> list:
        kept = None if keep is None else keep / f"batch{number}"
        # (batches that run at once write their logs apart: each names its log after its run)
        logs = None if log_dir is None else log_dir if len(batches) == 1 else log_dir / f"batch{number}"
        try:
            return check_batch_tlc([items[i] for i in batch], options, logs, kept)
        except TraceCheckError as err:
            if len(batch) == 1:
                return [err]
            results = []
            for i in batch:
                try:
                    results.append(check_batch_tlc([items[i]], options, logs)[0])
                except TraceCheckError as one:
                    results.append(one)
            return results

    out: list = [None] * len(items)
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(batches)))) as pool:
        for batch, results in zip(batches, pool.map(one_batch, range(1, len(batches) + 1), batches)):
            for i, result in zip(batch, results):
                out[i] = result
    assert all(r is not None for r in out)
    return out


def check_steps_tlc(cfg: Config, steps: list[Step], complete: bool, options: TlcOptions | None = None,
                    log_dir: Path | None = None, keep: Path | None = None) -> tuple[TraceVerdict, dict]:
    """TLC's verdict on the steps, and timings (seconds of each TLC run)."""
    return check_batch_tlc([(cfg, steps, complete)], options, log_dir, keep)[0]


def _reason(cfg: Config, step: Step, states) -> str:
    """The same wording as the twin's (tests compare verdicts, and users read both)."""
    from spec.tracecheck import spec_steps

    if states and not any(spec_steps(cfg, s, a, p) for s in states for a, p in step.actions):
        return f"{step.label} is not enabled in the state before it"
    return f"no spec step {step.label} from the state before it agrees with what the step observed"


# ------------------------------------------------------------------ files in, verdict out

@attrs.frozen
class TraceCheck:
    """A verdict on one or more trace files (merged by causality), by TLC or the twin."""
    verdict: TraceVerdict
    config: Config
    steps: tuple[Step, ...]              # the merged steps (none when a file was checked as it was read)
    paths: tuple[str, ...]
    complete: bool
    writer_verdicts: tuple[tuple[str, str, str], ...]    # (file, property, message) the writers reported
    read_seconds: float                                  # 0 when the file was checked as it was read
    check_seconds: float                                 # the checker's own time (TLC: every run, JVMs included)
    timings: dict = attrs.Factory(dict)
    step_count: int = 0
    warnings: tuple[str, ...] = ()                       # irregular stamps ("file:line: ...")

    @property
    def per_thousand_steps_s(self) -> float | None:
        return self.check_seconds / self.step_count * 1000 if self.step_count else None


def read_and_merge(paths: list[Path], strict: bool = False) -> tuple[Config, list[Step], bool, list]:
    """Read, validate and merge the files (TraceError / MergeError on bad input, MergeViolation
    on steps no order of the files can place)."""
    from spec.traceformat import read_trace
    from spec.tracemerge import adopt_config, merge, spec_ids

    traces = adopt_config([read_trace(p, strict=strict) for p in paths])
    steps, complete = merge(traces)
    return traces[0].config, spec_ids(traces, steps), complete, traces


def check_files(paths: list[Path], twin: bool = False, options: TlcOptions | None = None,
                keep: Path | None = None, log_dir: Path | None = None, coverage=None, strict: bool = False,
                keep_steps: bool = False) -> TraceCheck:
    """``keep_steps``: the result holds the merged steps even when the twin checks one file as
    it reads it (for --merged)."""
    from spec.traceformat import read_trace
    from spec.tracecheck import check_steps
    from spec.tracemerge import MergeViolation, adopt_config, merge, spec_ids

    if twin and len(paths) == 1:
        return _check_file_twin(paths[0], coverage, strict, keep_steps)
    start = time.perf_counter()
    traces = adopt_config([read_trace(p, strict=strict) for p in paths])
    cfg, unplaced = traces[0].config, None
    try:
        steps, complete = merge(traces)
        steps = spec_ids(traces, steps)
    except MergeViolation as v:
        # valid input: the steps merged before the one without a place are checked, and then it fails
        steps, complete, unplaced = v.prefix, False, v
    read_s = time.perf_counter() - start
    checkpoints = traces[0].checkpoints if len(traces) == 1 else ()
    timings: dict = {}
    if twin:
        verdict = check_steps(cfg, steps, complete, coverage=coverage)
    else:
        if checkpoints:
            verdict, timings = check_segments_tlc(cfg, steps, complete, checkpoints, options, log_dir, keep)
        else:
            verdict, timings = check_steps_tlc(cfg, steps, complete, options, log_dir, keep)
        if coverage is not None:            # the twin names the branches of the steps TLC explained
            check_steps(cfg, steps[: verdict.explained], False, coverage=coverage)
    total = sum(len(t.steps) for t in traces)
    if unplaced is not None and verdict.valid:
        verdict = attrs.evolve(verdict, valid=False, steps=total, failed=unplaced.step, reason=unplaced.reason,
                               conflict=unplaced.other)
    elif unplaced is not None:
        verdict = attrs.evolve(verdict, steps=total)
    said = tuple((t.path, *t.writer_verdict) for t in traces if t.writer_verdict)
    return TraceCheck(verdict, cfg, tuple(steps), tuple(str(p) for p in paths), complete, said, read_s,
                      verdict.seconds, timings, verdict.steps, tuple(w for t in traces for w in t.warnings))


def _check_file_twin(path: Path, coverage, strict: bool, keep_steps: bool) -> TraceCheck:
    """One file, checked by the twin as it is read: neither the file nor its steps are held."""
    from spec.traceformat import Checkpoint, Step, TraceReader
    from spec.tracecheck import TwinCheck
    from spec.tracemerge import MergeError, MergeViolation, iter_spec_ids

    start = time.perf_counter()
    reader = TraceReader(path, strict=strict)
    if not reader.config_known:
        raise MergeError(f"{reader.name}: no file gives the configuration (a slave's file is checked together "
                         "with its master's)")
    cfg = reader.config
    check = TwinCheck(cfg, coverage=coverage)
    kept: list[Step] = []

    def steps_of():
        for item in reader.items():
            if isinstance(item, Checkpoint):
                check.checkpoint(item)
            elif isinstance(item, Step):
                yield item

    items = steps_of()
    try:
        for step in iter_spec_ids(reader.ids, cfg.transient_store_pool, items):
            check.step(step)
            if keep_steps:
                kept.append(step)
    except MergeViolation as v:
        check.conflict(v.step, v.reason, v.other)
        for _ in items:                 # the rest is still validated (malformed input is exit 2) and counted
            check.steps += 1
    verdict = check.verdict(reader.complete)
    said = ((reader.name, *reader.verdict),) if reader.verdict else ()
    return TraceCheck(verdict, cfg, tuple(kept), (str(path),), reader.complete, said, 0.0,
                      time.perf_counter() - start, {}, verdict.steps, reader.all_warnings())


def segments(cfg: Config, steps: list[Step], complete: bool, checkpoints) -> list[TraceInput]:
    """A single file's steps cut at its checkpoints: each segment from the state its checkpoint
    gives (the first from Init) to the next checkpoint's (the last to the file's end)."""
    out: list[TraceInput] = []
    begin, start = 0, None
    for cp in checkpoints:
        out.append((cfg, steps[begin:cp.after], False, start, cp))
        begin, start = cp.after, cp.state
    out.append((cfg, steps[begin:], complete, start, None))
    return out


def check_segments_tlc(cfg: Config, steps: list[Step], complete: bool, checkpoints,
                       options: TlcOptions | None = None, log_dir: Path | None = None,
                       keep: Path | None = None) -> tuple[TraceVerdict, dict]:
    """TLC's verdict on a trace with checkpoints, from its segments checked as traces of their own
    (in batches): the first segment refuted is the verdict, at its place in the whole trace."""
    start = time.perf_counter()
    items = segments(cfg, steps, complete, checkpoints)
    # the segments are independent: TLC's workers are TLC processes, one segment batch each
    options = options or TlcOptions(workers=1)
    jobs = options.workers or 1
    results = check_many_tlc(items, attrs.evolve(options, workers=1), log_dir, keep, jobs)
    seconds = time.perf_counter() - start
    # each batch's TLC seconds in trace order (its segments carry the same copy): how the cost grows
    batch_s: list[float] = []
    for r in results:
        if not isinstance(r, TraceCheckError) and (not batch_s or r[1]["total_s"] != batch_s[-1]):
            batch_s.append(r[1]["total_s"])
    timings = {"segments": len(items), "total_s": seconds, "batch_s": [round(b, 1) for b in batch_s]}
    offset = 0
    for item, result in zip(items, results):
        if isinstance(result, TraceCheckError):
            raise result
        verdict, _ = result
        if not verdict.valid:
            return attrs.evolve(verdict, steps=len(steps), explained=offset + verdict.explained,
                                seconds=seconds), timings
        offset += len(item[1])
    return TraceVerdict(True, len(steps), len(steps), None, (), "valid", seconds, "tlc"), timings
