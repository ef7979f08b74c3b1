"""The kill suite a mutant faces, cheapest check first, stopping at the first that fails.

1. ``unit``: the unit tests of the mutated module (``UNIT_TESTS``, reviewed: the module's own test
   files and contracts, not every file that imports it), under pytest in the mutant's own copy of
   the tree.
2. ``fuzz``: a short seeded simulation campaign of each model the module runs in (the write path's
   simulator and the failover group over bytes), every step checked against the spec, in that copy.
3. ``machines``: the Hypothesis state machines under the ``ci`` profile (derandomized: the same
   programs for every mutant and for the baseline; unshrunk, profile ``mutation``) that drive the
   module's code: the write path's refinement and real-store machines, and the failover
   refinement machine.
4. ``chaos``: for the real runtime's modules (and the send queue, which only it runs), a kill -9
   run with corrupt tails, one with the transient store pool across segment rolls, and a power-loss
   run, on real processes of that copy (chaosstage.py), a few seconds each.

Each stage has a time budget measured on the clean tree (``Baseline``): a mutant that runs past it
is a kill only because the clean code finishes well within (``budget_s``).  A stage that fails on
the clean tree makes the campaign refuse to start: a kill by a red suite proves nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs

from spark_fuzz.mutation.mutants import ROOT, Mutant, diff_of, mutated_source

# The write path's bug switches, each replayed from TLC's counterexample through the cores
# (reference/tests/counterexamples/, `ackorder tlc --emit-test`): a switch's code lives in the core
# it breaks, and a mutant of that code is a switch that no longer bites.  (test_up_to_date.py, which
# runs TLC again, is left out: seconds per switch, and it checks the files, not the cores.)
COUNTEREXAMPLES = tuple(sorted(str(p.relative_to(ROOT)) for p in (ROOT / "reference/tests/counterexamples").glob(
    "test_*_bug.py")))

UNIT_TESTS = {
    "reference/decisions.py": ("reference/tests/test_master_core.py",
                               "reference/tests/test_contracts.py::test_contracts_hold[reference.decisions.replica_coverage]",
                               "reference/tests/test_contracts.py::test_contracts_hold[reference.decisions.covered_count]",
                               *COUNTEREXAMPLES),
    "reference/admission.py": ("reference/tests/test_admission.py",),
    "reference/master.py": ("reference/tests/test_master_core.py",
                            # its failover half (epoch labels, EPOCH_QUERY, begin_epoch), driven by hand
                            "reference/tests/test_follower.py", "reference/tests/test_broker_core.py",
                            "reference/tests/test_follower_machine.py::"
                            "test_a_re_elected_master_labels_a_connected_slaves_next_batches_with_its_new_epoch",
                            # the bounds and impostor handshakes a simulated run must reach
                            "reference/tests/test_sim_bounds.py",
                            *COUNTEREXAMPLES),
    "reference/replica.py": ("reference/tests/test_replica_core.py", "reference/tests/test_one_record_parser.py",
                             *COUNTEREXAMPLES),
    "reference/commitlog.py": ("reference/tests/test_commitlog.py", "reference/tests/test_master_core.py",
                               "reference/tests/test_replica_core.py",
                               "reference/tests/test_resumed_recovery.py",
                               "reference/tests/test_broker_core.py",       # held_log: the hand-over of a role
                               "reference/tests/test_sim_bounds.py",        # the pool's buffers, reached
                               *COUNTEREXAMPLES),
    "reference/record.py": ("reference/tests/test_record.py", "reference/tests/test_one_record_parser.py"),
    "reference/frames.py": ("reference/tests/test_frames.py",),
    "reference/failover/sss_policy.py": ("reference/tests/test_sss_policy.py",),
    "reference/failover/roles.py": ("reference/tests/test_roles.py",),
    "reference/failover/broker.py": ("reference/tests/test_broker_core.py",),
    "reference/failover/follower.py": ("reference/tests/test_follower.py",),
    "reference/failover/controller.py": ("reference/tests/test_controller_core.py",),
    "reference/failover/truncation.py": ("reference/tests/test_truncation.py",),
    "reference/failover/epochfile.py": ("reference/tests/test_epochfile.py",),
    "reference/real/disk.py": ("reference/tests/test_segment_store.py", "reference/tests/test_broker_runtime.py"),
}

# The simulators a module's code runs in.  The failover group drives the write path's MasterCore
# and ReplicaCore over bytes too; reference/real/ runs in neither: its mutants face short chaos runs.
FAILOVER_ONLY = "reference/failover/"
# The send queue (admission.py) runs only in the real master's runtime (reference/real/master_server.py):
# no simulator or machine drives it, so its mutants face the unit tests and the chaos runs.
NO_SIMULATOR = ("reference/real/", "reference/admission.py")
CHAOS_MODULES = NO_SIMULATOR

# The Hypothesis machines each module's code runs in (stateful_tests/): the write path's cores run in
# the refinement machine and, over bytes, in the failover one; the real store in the real-store machine.
WRITE_PATH_MACHINES = ("stateful_tests/test_machines.py::TestRefinementMachine",     # (the spec machine runs no reference code)
                       "stateful_tests/test_failover.py::test_the_reference_refines_the_failover_spec")
FAILOVER_MACHINES = ("stateful_tests/test_failover.py::test_the_reference_refines_the_failover_spec",)
REAL_STORE_MACHINES = ("stateful_tests/test_machines.py::TestRealStoreMachine",)

STAGES = ("unit", "fuzz", "machines", "chaos")
TREE_PARTS = ("cli", "spec", "reference", "stateful_tests", "tla", "spark_fuzz", "docs", "conftest.py", "pyproject.toml",
              "README.md", "Makefile")     # tests read the docs (a switch named there) and the README
MIN_BUDGET_S = 20.0          # beyond the clean run: a loaded worker is slower than the clean measurement
BUDGET_FACTOR = 4.0
OUTPUT_CHARS = 2_000


@attrs.frozen
class SuiteOptions:
    fuzz_seeds: int = 40         # per model
    fuzz_steps: int = 400
    # every stage on every mutant, past the first kill: which checks reach each guard (slower)
    all_stages: bool = False


def fuzz_models(module: str) -> tuple[str, ...]:
    if module.startswith(NO_SIMULATOR):
        return ()
    if module.startswith(FAILOVER_ONLY):
        return ("failover",)
    return ("write-path", "failover")


def machine_tests(module: str) -> tuple[str, ...]:
    if module == "reference/real/disk.py":
        return REAL_STORE_MACHINES
    if module.startswith(NO_SIMULATOR):
        return ()
    if module.startswith(FAILOVER_ONLY):
        return FAILOVER_MACHINES
    return WRITE_PATH_MACHINES


def budget_s(clean_s: float) -> float:
    """How long a stage may take on a mutant: well beyond its clean run."""
    return max(BUDGET_FACTOR * clean_s, clean_s + MIN_BUDGET_S)


def copy_tree(root: Path = ROOT, dest: Path | None = None) -> Path:
    """A private copy of the project's sources (in a new temporary directory, or ``dest``, which must
    not exist), where one mutant is applied and tested."""
    if dest is None:
        dest = Path(tempfile.mkdtemp(prefix="ackorder-mutant-"))
    else:
        dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", "states", "*.jsa")
    for part in TREE_PARTS:
        src = root / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=ignore)
        else:
            shutil.copy2(src, dest / part)
    return dest


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "PYTEST_"))}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(tree / ".hypothesis")
    env["HYPOTHESIS_PROFILE"] = "mutation"    # ci's derandomized programs, unshrunk (stateful_tests/profiles.py)
    return env


def _run(argv: list[str], tree: Path, timeout_s: float) -> tuple[str, float, str]:
    """("pass" | "fail" | "timeout", seconds, the output's tail)."""
    start = time.monotonic()
    # its own process group: a mutant that hangs is stopped with everything it started (a test's
    # broker processes), not only the pytest or simulation at its top
    proc = subprocess.Popen(argv, cwd=tree, env=_env(tree), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return "timeout", time.monotonic() - start, (out or "")[-OUTPUT_CHARS:]
    finally:
        if proc.poll() is None:          # an exception of our own (a Ctrl-C): nothing is left running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return ("pass" if proc.returncode == 0 else "fail"), time.monotonic() - start, out[-OUTPUT_CHARS:]


_PYTEST = (sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
           "--hypothesis-seed=0")


def stage_argv(stage: str, module: str, options: SuiteOptions) -> list[str] | None:
    """The command of ``stage`` for a mutant of ``module`` (None: the stage has nothing to run)."""
    if stage == "unit":
        # every test named, `-m full` ones too (the addopts' `-m 'not full'` is dropped): they are the module's;
        # Hypothesis's tests draw the same examples for every mutant and the baseline (a verdict is reproducible)
        return [*_PYTEST, *UNIT_TESTS[module]]
    if stage == "machines":
        tests = machine_tests(module)
        return [*_PYTEST, *tests] if tests else None
    if stage == "chaos":
        return [sys.executable, "-m", "spark_fuzz.mutation.chaosstage"] if module.startswith(CHAOS_MODULES) else None
    models = fuzz_models(module)
    if not models:
        return None
    return [sys.executable, "-m", "spark_fuzz.mutation.fuzzstage", "--seeds", str(options.fuzz_seeds),
            "--steps", str(options.fuzz_steps), *models]


@attrs.frozen
class Baseline:
    """The clean tree's time per (module, stage): what each mutant's budget comes from."""
    seconds: dict = attrs.field(factory=dict)     # "module|stage" -> seconds

    def of(self, module: str, stage: str) -> float | None:
        return self.seconds.get(f"{module}|{stage}")


class CleanSuiteFailed(RuntimeError):
    """A stage of the kill suite fails on the clean tree: no mutant can be judged by it."""


def measure_baseline(modules: tuple[str, ...], options: SuiteOptions, root: Path = ROOT) -> Baseline:
    tree = copy_tree(root)
    try:
        seconds = {}
        for module in modules:
            for stage in STAGES:
                argv = stage_argv(stage, module, options)
                if argv is None:
                    continue
                verdict, took, out = _run(argv, tree, 1_800)
                if verdict != "pass":
                    raise CleanSuiteFailed(f"the {stage} stage of {module} does not pass on the clean tree "
                                           f"({verdict}): {out.strip().splitlines()[-1:] or ''}")
                seconds[f"{module}|{stage}"] = round(took, 2)
        return Baseline(seconds)
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def judge(mutant: Mutant, baseline: Baseline, options: SuiteOptions, root: Path = ROOT) -> dict:
    """One mutant through the suite, in its own copy of the tree: its ledger row.  Whatever goes wrong
    around the checks (the copy, a stage that cannot start) is an ``error`` row, never a survivor."""
    start = time.monotonic()
    try:
        return _judge(mutant, baseline, options, root, start)
    except OSError:                        # the machine's (a full disk under the copies): the task fails
        raise
    except Exception as err:               # noqa: BLE001  (recorded, as the fuzz ledger records a crash)
        return {**_row(mutant), "outcome": "error", "detail": f"{type(err).__name__}: {err}"[:300],
                "wall_s": round(time.monotonic() - start, 2)}


def _row(mutant: Mutant) -> dict:
    return {"mutant_id": mutant.mutant_id, "module": mutant.module, "operator": mutant.operator,
            "occurrence": mutant.occurrence, "line": mutant.line, "definition": mutant.definition,
            "source_sha": mutant.source_sha, "outcome": "survived", "killed_by": "", "detail": "",
            "stages": "{}", "diff": "", "wall_s": 0.0}


def _judge(mutant: Mutant, baseline: Baseline, options: SuiteOptions, root: Path, start: float) -> dict:
    row = _row(mutant)
    try:
        original, mutated = mutated_source(mutant, root)
    except ValueError as err:
        row.update(outcome="error", detail=str(err))
        return row
    row["diff"] = diff_of(mutant, original, mutated)
    tree = copy_tree(root)
    stages = {}
    try:
        (tree / mutant.module).write_text(mutated, encoding="utf-8")
        for stage in STAGES:
            argv = stage_argv(stage, mutant.module, options)
            if argv is None:
                continue
            clean = baseline.of(mutant.module, stage)
            if clean is None:               # no budget: the stage cannot judge, and "survived" would be a lie
                row.update(outcome="error", detail=f"no clean time for the {stage} stage of {mutant.module}")
                break
            verdict, took, out = _run(argv, tree, budget_s(clean))
            stages[stage] = {"verdict": verdict, "s": round(took, 2)}
            if verdict != "pass":
                if not row["killed_by"]:        # the first kill names the outcome, in every mode
                    row.update(outcome="killed" if verdict == "fail" else "timeout", killed_by=stage,
                               detail=_why(out))
                if not options.all_stages:
                    break
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    row["stages"] = json.dumps(stages, sort_keys=True)
    row["wall_s"] = round(time.monotonic() - start, 2)
    return row


def _why(output: str) -> str:
    """The line that says what failed: pytest's FAILED/ERROR line, or the fuzz stage's verdict."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(("FAILED ", "ERROR ", "violation ")):
            return line[:300]
    return (lines[-1] if lines else "")[:300]
