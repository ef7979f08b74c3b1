"""Where a simulated event's CPU time goes, beside the time per event that each of issue 17's
speed goals allows (`ackorder bench sim`'s bound table, docs/benchmarks.md "What bounds the
simulator").

A workload is either many short seeds (a default campaign's: ``steps`` events each, then the
liveness phase) or one long run of one seed.  Each workload runs four times, each in a fresh
process from this tree, timed by the process's own CPU time:

- plain, unchecked and checked: the CPU time per event, and their difference, the checker's;
- timed, unchecked and checked: a timer around each part (below), at its outermost call only, so
  a part that calls itself or another method of the same part is counted once.  A timer reads
  the process's CPU clock (as the totals do, so other jobs on the machine do not count); what the
  two reads themselves add to a part (about half a microsecond a call, measured in the same
  process) is taken off it.  The timers cost time outside the parts too, so the parts are read
  beside the timed run's total, not the plain one's.

The parts: **the cores** (every public method of MasterCore and ReplicaCore: the protocol
itself), and in the checked run **the checker's step** (RefinementChecker.step) and within it
**the twin's actions** (RefinementChecker._apply: the spec's action functions on the shadow
state), **the incremental invariants** (IncrementalInvariants.check) and **the abstraction's
comparison** (Abstraction.compare).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reference.bench.simrates import HERE

POINT_TIMEOUT_S = 3600
CAMPAIGN_FIRST_SEED = 1_000_000     # seeds of their own: draw(seed) for seed, seed + 1, ...

_WORKLOAD = """
import inspect, json, sys, time
from time import process_time
import reference.master, reference.replica, reference.refinement, reference.sim.abstraction
from reference.sim.params import draw
from reference.sim.world import World

kind, first, count, steps, checked, timed = sys.argv[1], *map(int, sys.argv[2:7])
spent, calls = {}, {}

def timer_cost():
    # What one timed call adds to its part: the CPU between the two clock reads around nothing (a
    # clock read is a system call, about half a microsecond; the median of many).
    gaps = []
    for _ in range(20_000):
        t0 = process_time()
        gaps.append(process_time() - t0)
    gaps.sort()
    return gaps[len(gaps) // 2]

def timer(part, cls, name, depth):
    # cls.name's time goes to part, at the outermost call of any method that shares depth
    inner = getattr(cls, name)
    def timed_call(*args, **kwargs):
        if depth[0]:
            return inner(*args, **kwargs)
        depth[0] = 1
        t0 = process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[part] = spent.get(part, 0.0) + process_time() - t0
            calls[part] = calls.get(part, 0) + 1
            depth[0] = 0
    setattr(cls, name, timed_call)

if timed:
    core_depth = [0]        # one for both cores: a core's method called from within a core is inside
    for cls in (reference.master.MasterCore, reference.replica.ReplicaCore):
        for name, member in list(vars(cls).items()):
            if inspect.isfunction(member) and not name.startswith("_") and name != "check_invariants":
                timer("cores", cls, name, core_depth)
    for part, cls, name in (("checker", reference.refinement.RefinementChecker, "step"),
                            ("twin actions", reference.refinement.RefinementChecker, "_apply"),
                            ("invariants", reference.refinement.IncrementalInvariants, "check"),
                            ("abstraction", reference.sim.abstraction.Abstraction, "compare")):
        timer(part, cls, name, [0])

params = [draw(first + k) for k in range(count)]
events = 0
cpu0 = time.process_time()
for p in params:          # as a campaign's task does: each seed's world built, run and dropped
    out = World(p, check=bool(checked)).run(steps, liveness=(kind == "campaign"))
    assert out.violation is None, (p.seed, out.violation, out.message)
    events += out.steps
cpu = time.process_time() - cpu0
bias = timer_cost() if timed else 0.0
print(json.dumps({"events": events, "cpu_s": cpu, "spent": {part: spent[part] - calls[part] * bias for part in spent},
                  "calls": calls, "timer_cost_s": bias, "code": reference.__file__}))
"""


def _run(kind: str, first: int, count: int, steps: int, checked: bool, timed: bool) -> dict:
    proc = subprocess.run([sys.executable, "-c", _WORKLOAD, kind, str(first), str(count), str(steps),
                           str(int(checked)), str(int(timed))],
                          cwd=HERE, capture_output=True, text=True, timeout=POINT_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"the {kind} workload (seed {first}, {count} x {steps} steps, checked={checked}, "
                           f"timed={timed}) failed:\n{proc.stderr[-2000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    if Path(r.pop("code")).resolve().parents[1] != HERE:
        raise RuntimeError("the workload imported another tree's code")
    assert r["events"] > 0, r
    return r


def _us(seconds: float, events: int) -> float:
    return round(1e6 * seconds / events, 2)


def workload_costs(kind: str, first: int, count: int, steps: int) -> dict:
    """One workload's CPU time per event, plain and timed, unchecked and checked, with its parts."""
    assert kind in ("campaign", "long") and count >= 1 and steps >= 1, (kind, count, steps)
    runs = {(checked, timed): _run(kind, first, count, steps, checked, timed)
            for checked in (False, True) for timed in (False, True)}
    events = runs[(False, False)]["events"]
    # The checker changes no event: both runs must be the same events, or the difference is not the checker's.
    assert all(r["events"] == events for r in runs.values()), {k: r["events"] for k, r in runs.items()}
    unchecked, checked = (_us(runs[(c, False)]["cpu_s"], events) for c in (False, True))
    timed_unchecked, timed_checked = runs[(False, True)], runs[(True, True)]
    parts = timed_checked["spent"]
    inner = sum(parts.get(p, 0.0) for p in ("twin actions", "invariants", "abstraction"))
    return {
        "workload": kind, "first_seed": first, "seeds": count, "steps": steps, "events": events,
        "events_per_seed": round(events / count, 1),
        "unchecked_us": unchecked, "checked_us": checked, "checker_us": round(checked - unchecked, 2),
        "timed_unchecked_us": _us(timed_unchecked["cpu_s"], events),
        "cores_us": _us(timed_unchecked["spent"].get("cores", 0.0), events),
        "timed_checked_us": _us(timed_checked["cpu_s"], events),
        "step_us": _us(parts.get("checker", 0.0), events),
        "twin_us": _us(parts.get("twin actions", 0.0), events),
        "invariants_us": _us(parts.get("invariants", 0.0), events),
        "abstraction_us": _us(parts.get("abstraction", 0.0), events),
        "step_rest_us": _us(parts.get("checker", 0.0) - inner, events),
        "timer_cost_us": round(1e6 * timed_checked["timer_cost_s"], 3),
        "timed_calls_per_event": {part: round(n / events, 2)
                                  for part, n in sorted({**timed_unchecked["calls"], **timed_checked["calls"]}.items())},
    }


def event_costs(campaign_seeds: int, campaign_steps: int, long_seeds: tuple[int, ...], long_steps: int,
                progress=print) -> list[dict]:
    """The campaign workload (``campaign_seeds`` seeds of ``campaign_steps`` events and their
    liveness phases) and one long run of ``long_steps`` events for each of ``long_seeds``."""
    rows = []
    if campaign_seeds:
        progress(f"sim: where an event's time goes, {campaign_seeds} campaign seeds x {campaign_steps} steps")
        rows.append(workload_costs("campaign", CAMPAIGN_FIRST_SEED, campaign_seeds, campaign_steps))
    for seed in long_seeds:
        progress(f"sim: where an event's time goes, seed {seed}, {long_steps:,} steps")
        rows.append(workload_costs("long", seed, 1, long_steps))
    return rows


def budgets(result: dict, goal_checked: int, goal_unchecked: int, goal_campaign_over_before: float) -> dict:
    """The CPU time per event each goal allows.  The campaign's: the baseline's seconds per seed on
    local[1] (Spark included, a few percent) over the goal's factor, spread over this tree's events
    per seed; what is left of it after the unchecked event is the checker's budget."""
    out = {"checked_us": round(1e6 / goal_checked, 2), "unchecked_us": round(1e6 / goal_unchecked, 2)}
    before = result.get("before local[1]")
    campaign = next((r for r in result.get("event_costs", []) if r["workload"] == "campaign"), None)
    if before and campaign:
        per_seed_s = 1 / before["seeds_per_s"] / goal_campaign_over_before
        out["campaign_us"] = round(1e6 * per_seed_s / campaign["events_per_seed"], 2)
        out["campaign_checker_us"] = round(out["campaign_us"] - campaign["unchecked_us"], 2)
    return out


COLUMNS = ("workload", "events", "unchecked µs/event", "checked µs/event", "the checker µs/event",
           "timed unchecked: all / the cores", "timed checked: all / the checker's step",
           "in the step: twin actions / invariants / abstraction / the rest")


def cells(row: dict) -> tuple[str, ...]:
    """One workload's row, in COLUMNS' order."""
    what = (f"{row['seeds']:,} campaign seeds x {row['steps']:,}" if row["workload"] == "campaign"
            else f"seed {row['first_seed']}, {row['steps']:,} steps")
    return (what, f"{row['events']:,}", f"{row['unchecked_us']}", f"{row['checked_us']}", f"{row['checker_us']}",
            f"{row['timed_unchecked_us']} / {row['cores_us']}", f"{row['timed_checked_us']} / {row['step_us']}",
            f"{row['twin_us']} / {row['invariants_us']} / {row['abstraction_us']} / {row['step_rest_us']}")


def budget_lines(result: dict, goals: dict) -> list[str]:
    """Each speed goal's time per event beside what the event costs now, as Markdown rows."""
    rows = result.get("event_costs", [])
    if not rows:
        return []
    b = budgets(result, goals["checked"], goals["unchecked"], goals["campaign"])
    longs = [r for r in rows if r["workload"] == "long"]
    lines = ["| goal | allows per event | now | what alone exceeds it or not |", "|---|---|---|---|"]
    for r in longs:
        lines.append(f"| >= {goals['checked']:,} checked steps/s (seed {r['first_seed']}) | {b['checked_us']} µs | "
                     f"{r['checked_us']} µs | the checker alone: {r['checker_us']} µs; the twin's actions, the "
                     f"invariants and the comparison alone: {round(r['twin_us'] + r['invariants_us'] + r['abstraction_us'], 2)} µs |")
    for r in longs:
        lines.append(f"| >= {goals['unchecked']:,} unchecked steps/s (seed {r['first_seed']}) | {b['unchecked_us']} µs | "
                     f"{r['unchecked_us']} µs | the cores alone: {r['cores_us']} µs; the simulator around them: "
                     f"{round(r['unchecked_us'] - r['cores_us'], 2)} µs |")
    if "campaign_us" in b:
        c = next(r for r in rows if r["workload"] == "campaign")
        lines.append(f"| campaign >= {goals['campaign']}x the baseline's seeds/s | {b['campaign_us']} µs, of which "
                     f"the checker {b['campaign_checker_us']} µs after this tree's unchecked event | "
                     f"{c['checked_us']} µs (the checker {c['checker_us']} µs) | the twin's actions alone: "
                     f"{c['twin_us']} µs |")
    return lines
