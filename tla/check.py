"""Checking models and judging the results: the library behind `ackorder tlc` and
`ackorder run`.

A verdict is more than pass/fail.  Its kind is one of

* ``as_expected`` — the outcome the manifest names, and (for an exhaustive
  check of a model with stable counts) its distinct states and depth;
* ``unexpected_violation`` — a property the model must keep was violated, or
  another property than the one the bug model names;
* ``missed_violation`` — a bug or reach model passed: its property did not bite;
* ``tlc_error`` — TLC gave no verdict (a parse error, a crash, a timeout);
* ``count_mismatch`` — the expected outcome, but other counts than recorded:
  the spec changed under the manifest (``--update-manifest`` records new ones).

Models run concurrently (``jobs``), each a TLC process with its own workers: with
one worker per model TLC's breadth-first search is level by level, so distinct
states *and* depth are reproducible and compared; with more, only a passing
run's distinct states are.
"""

from __future__ import annotations

import datetime
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from tla.manifest import TLA_DIR, Model
from tla.tlc import TlcOptions, TlcRun, kill_all, run_model

VERDICT_KINDS = ("as_expected", "unexpected_violation", "missed_violation", "tlc_error", "count_mismatch")
LOG_ROOT = TLA_DIR.parent / ".ackorder" / "tlc-logs"


@attrs.frozen
class Verdict:
    run: TlcRun
    kind: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "as_expected"

    @property
    def model(self) -> Model:
        return self.run.model


def count_problems(run: TlcRun) -> list[str]:
    """How the run's counts differ from the manifest's record (empty: they agree or are
    not comparable for this run)."""
    m, opts = run.model, run.options
    if not opts.exhaustive or not m.counts_are_stable or (run.outcome != "pass" and opts.workers != 1):
        return []
    if m.distinct_states is None or m.depth is None:
        return ["no counts recorded in the manifest (record them with --update-manifest)"]
    out = []
    if run.distinct_states != m.distinct_states:
        out.append(f"{run.distinct_states:,} distinct states, the manifest records {m.distinct_states:,}"
                   if run.distinct_states is not None else "no state count from TLC")
    if opts.workers == 1 and run.depth != m.depth:
        out.append(f"depth {run.depth}, the manifest records {m.depth}")
    return out


def judge(run: TlcRun, check_counts: bool = True) -> Verdict:
    m = run.model
    if run.outcome == "error":
        return Verdict(run, "tlc_error", "; ".join(run.errors))
    if run.outcome != m.expected:
        if run.outcome == "pass":
            return Verdict(run, "missed_violation", f"expected {m.expected} to be violated, TLC found no violation")
        return Verdict(run, "unexpected_violation", f"{run.outcome} violated (expected {m.expected})")
    if check_counts and m.kind != "adhoc" and (problems := count_problems(run)):
        return Verdict(run, "count_mismatch", "; ".join(problems))
    return Verdict(run, "as_expected")


def new_log_dir() -> Path:
    """A directory of its own for one invocation's TLC logs (logs are kept, never overwritten)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = LOG_ROOT / f"{stamp}-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    latest = LOG_ROOT / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(path.name)
    except OSError:
        pass                # a convenience only
    return path


@attrs.define
class Events:
    """What a caller hears while models run (called from worker threads)."""
    started: Callable[[Model], None] = lambda m: None
    progress: Callable[[Model, int, int], None] = lambda m, distinct, queue: None
    finished: Callable[[Verdict], None] = lambda v: None


def check_models(models: list[Model], options: TlcOptions, jobs: int, log_dir: Path,
                 check_counts: bool = True, events: Events | None = None) -> list[Verdict]:
    """Run every model (``jobs`` at a time) and judge each; verdicts in the models' order.
    A KeyboardInterrupt stops every TLC process and propagates; the verdicts of the models
    that finished have been reported through ``events.finished`` by then."""
    assert jobs >= 1, jobs
    events = events or Events()
    lock = threading.Lock()

    def one(m: Model) -> Verdict:
        events.started(m)
        run = run_model(m, options, log_dir,
                        on_progress=lambda generated, distinct, queue: events.progress(m, distinct, queue))
        verdict = judge(run, check_counts)
        with lock:
            events.finished(verdict)
        return verdict

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="tlc")
    futures = []
    try:
        futures = [pool.submit(one, m) for m in models]
        return [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        kill_all()              # also refuses every TLC still to start
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def update_manifest(verdicts: list[Verdict], models: list[Model]) -> list[Model]:
    """The manifest's models with the counts (and checking seconds) of every run that had
    the expected outcome with one worker, exhaustively."""
    observed = {v.model.model: v.run for v in verdicts
                if v.kind in ("as_expected", "count_mismatch") and v.run.options.workers == 1
                and v.run.options.exhaustive}
    out = []
    for m in models:
        if (run := observed.get(m.model)) is not None:
            seconds = round(run.check_seconds if run.check_seconds is not None else run.seconds, 1)
            m = attrs.evolve(m, distinct_states=run.distinct_states, depth=run.depth, seconds=seconds)
        out.append(m)
    return out


def verdict_json(v: Verdict, counterexample: list[dict] | None = None) -> dict:
    run = v.run
    return {
        "model": run.model.model, "cfg": run.model.cfg, "kind": run.model.kind, "expected": run.model.expected,
        "outcome": run.outcome, "verdict": v.kind, "detail": v.detail, "errors": list(run.errors),
        "distinct_states": run.distinct_states, "generated_states": run.generated_states, "depth": run.depth,
        "manifest_distinct_states": run.model.distinct_states, "manifest_depth": run.model.depth,
        "seconds": round(run.seconds, 2),
        "check_seconds": None if run.check_seconds is None else round(run.check_seconds, 2),
        "states_per_second": None if run.states_per_second is None else round(run.states_per_second),
        "workers": run.options.workers, "log": str(run.log_path) if run.log_path else None,
        "counterexample": counterexample,
    }
