"""`ackorder run`: a plan first, progress as k of N, results kept as each step finishes,
one verdict at the end, a clean Ctrl-C that keeps what finished, and --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from cli import errors
from cli.tests.interrupt import sigint_as_at_a_terminal
from cli.tests.test_exit_codes import ROOT, ackorder
from spec.config import ascii_digits

pytestmark = pytest.mark.tlc


def run_dir(stdout: str) -> Path:
    line = next(x for x in stdout.splitlines() if x.startswith("run directory: "))
    return ROOT / line.split(": ", 1)[1].strip()


def test_a_small_run_plans_reports_and_gives_one_verdict(tmp_path):
    p = ackorder("run", "--models", "sync_flush,ack_on_wrote_bug,reach_torn_tail", "--fuzz-seeds", "30",
                 "--skip", "prove", "--json", str(tmp_path / "v.json"), timeout=600)
    assert p.returncode == errors.OK, p.stdout + p.stderr
    out = p.stdout
    assert out.index("the plan") < out.index("tlc 1/3") < out.index("verdict: everything as expected")
    assert out.count("verdict: ") == 1 and "Traceback" not in out + p.stderr
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["ok"] and verdict["steps"]["prove"] is None and verdict["steps"]["twin"]["models"] == 3
    where = run_dir(out)
    assert {"plan.json", "tlc.jsonl", "tlc.json", "twin.json", "fuzz.json", "verdict.json", "run.log"} <= \
        {f.name for f in where.iterdir()}
    again = ackorder("run", "--resume", str(where), timeout=300)
    assert again.returncode == errors.OK and again.stdout.count("done in an earlier try") == 3, again.stdout


def processes_with(token: str) -> list[int]:
    """The live processes whose environment holds ``token`` (this run's TLCs inherit it; another
    test's or another user's TLC on the same model does not)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if ascii_digits(d.name) and token.encode() in (d / "environ").read_bytes():
                found.append(int(d.name))
        except OSError:
            pass                       # gone, or not ours to read
    return found


def test_ctrl_c_keeps_what_finished_and_resume_continues():
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, "-m", "cli", "run", "--models", "BugAckOnWrote,sync_flush,sync_master_any",
                             "--jobs", "1", "--skip", "fuzz", "--skip", "prove"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1",
                                 "ACKORDER_TEST_RUN": mark},
                            preexec_fn=sigint_as_at_a_terminal)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "tlc 1/3" in line:
            break
    assert "tlc 1/3" in lines[-1], "".join(lines)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    out = "".join(lines) + out
    assert proc.returncode == errors.INTERRUPTED, out + err
    assert "interrupted" in out and "Traceback" not in out + err
    assert not processes_with(f"ACKORDER_TEST_RUN={mark}"), "a TLC of the interrupted run is still alive"
    where = run_dir(out)
    done = [json.loads(x) for x in (where / "tlc.jsonl").read_text().splitlines()]
    # The signal races the next model on a loaded machine: what finished is a proper prefix of the plan.
    # A TLC killed by the Ctrl-C is not a verdict: nothing it printed may be recorded as one.
    finished = [d["model"] for d in done]
    assert finished in (["BugAckOnWrote"], ["BugAckOnWrote", "sync_flush"]), finished
    assert all(d["verdict"] == "as_expected" for d in done), done
    resumed = ackorder("run", "--resume", str(where), timeout=300)
    assert resumed.returncode == errors.OK, resumed.stdout + resumed.stderr
    left = 3 - len(finished)
    assert f"{len(finished)} model(s) already checked in this run, {left} to go" in resumed.stdout


FULL_TESTS = '''
import attrs
import pytest

pytestmark = pytest.mark.full


def test_long_and_right():
    assert sum(range(10)) == 45


def test_long_and_wrong():
    assert {WRONG}
'''


def slow_tests_in(tmp_path: Path, body: str | None, monkeypatch) -> dict:
    """`ackorder run --full`'s slow-tests step, on a source tree of its own in tmp_path."""
    from rich.console import Console

    from cli import run

    tree = tmp_path / "tree"
    tree.mkdir(parents=True)
    (tree / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-m \'not full\'"\n'
                                         'markers = ["full: long"]\n')
    if body is not None:
        (tree / "test_long.py").write_text(body)
    monkeypatch.setattr(run, "SOURCE_ROOT", tree)
    where = tmp_path / "run"
    where.mkdir()
    plan = run.Plan(full=True, models=(), fuzz_seeds=1, jobs=1, skip=(), check_counts=True)
    log = run.RunLog(where, Console(file=open(os.devnull, "w")))
    return run.step_slow_tests(log, plan, run.Progress({"slow-tests": 1.0}))


def test_the_slow_tests_step_runs_the_full_tests_and_fails_on_a_failure(tmp_path, monkeypatch):
    bad = slow_tests_in(tmp_path / "a", FULL_TESTS.replace("{WRONG}", "False"), monkeypatch)
    assert not bad["ok"] and bad["tests"] == 2 and bad["exit_code"] == 1, bad
    assert bad["failed"] == ["test_long::test_long_and_wrong"], bad
    good = slow_tests_in(tmp_path / "b", FULL_TESTS.replace("{WRONG}", "True"), monkeypatch)
    assert good["ok"] and good["tests"] == 2 and not good["failed"], good
    none = slow_tests_in(tmp_path / "c", None, monkeypatch)
    assert not none["ok"] and none["detail"] == "no test is marked full", none


def test_a_quick_run_leaves_the_slow_tests_to_full():
    from cli import run

    quick = run.Plan(full=False, models=(), fuzz_seeds=1, jobs=1, skip=(), check_counts=True)
    assert not run.runs("slow-tests", quick) and run.runs("slow-tests", attrs.evolve(quick, full=True))
    assert not run.runs("slow-tests", attrs.evolve(quick, full=True, skip=("slow-tests",)))


@pytest.mark.full
def test_the_mutate_step_judges_a_sample_of_the_cores_and_reports_its_score(tmp_path, monkeypatch):
    """`ackorder run --full`'s mutate step, on one core module and a sample of 3 (the step's own
    200 over 15 modules take about half an hour): as expected once the campaign ran, with its score."""
    from rich.console import Console

    from cli import run
    from spark_fuzz.mutation import mutants
    from spark_fuzz.tests import sessions

    sessions.stop_shared()          # the step starts and stops a local[*] session of its own
    monkeypatch.setattr(mutants, "CORE_MODULES", ("reference/failover/sss_policy.py",))
    monkeypatch.setattr(run, "MUTATE_SAMPLE", 3)
    where = tmp_path / "run"
    where.mkdir()
    plan = run.Plan(full=True, models=(), fuzz_seeds=1, jobs=1, skip=(), check_counts=True)
    log = run.RunLog(where, Console(file=open(os.devnull, "w")))
    result = run.step_mutate(log, plan, run.Progress({"mutate": 1.0}))
    assert result["ok"] and sum(result["outcomes"].values()) == 3, result
    assert list(result["scores"]) == ["reference/failover/sss_policy.py"]
    assert "3 mutants:" in result["detail"] and "score" in result["detail"]
    assert (where / "mutate" / "mutation-report.md").is_file()
