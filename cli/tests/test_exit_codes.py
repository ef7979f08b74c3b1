"""Exit codes, one convention for every command: 0 as expected, 1 a violation or an
unexpected outcome, 2 bad usage or input (one line on stderr, no traceback), 3 the
environment failed.  Each command is run as a user runs it: a process (forked from one that imported the
project once, cli/tests/zygote.py; a few started as `python -m cli`), the usage-error table in
this process (ackorder_in_process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli import errors
from cli.tests import zygote
from cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


def ackorder(*args: str, cwd: Path = ROOT, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """A process, forked from one that imported the project once (cli/tests/zygote.py)."""
    return zygote.run(list(args), cwd=cwd, timeout=timeout, env={**os.environ, "COLUMNS": "200", **(env or {})})


def python_m_cli(*args: str) -> subprocess.CompletedProcess:
    """A process started as a user starts it: Python, its imports, `python -m cli`."""
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})


def ackorder_in_process(*args: str) -> subprocess.CompletedProcess:
    """``ackorder ARGS`` by calling the entry point in this process, as ``python -m cli`` does,
    with what it writes to stdout and stderr caught: the usage-error table's 46 commands cost a
    Python start-up and every import each as processes (~0.6 CPU-s), and a usage error is decided
    before any work.  An exception that escapes is what the interpreter would make of it: a
    traceback on stderr and exit 1.  ``test_a_usage_error_is_the_process_exit_status_2`` keeps
    the process path checked for usage errors, and the other tests here run processes."""
    import contextlib
    import io
    import traceback

    from hypothesis import settings

    from cli.main import main

    out, err = io.StringIO(), io.StringIO()
    environ, profile = dict(os.environ), settings.default
    os.environ["COLUMNS"] = "200"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:       # argparse's usage errors, as sys.exit in __main__ would
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            except Exception:                # noqa: BLE001  (what the interpreter does with it)
                traceback.print_exc()
                code = 1
    finally:
        os.environ.clear()
        os.environ.update(environ)
    assert settings.default is profile, f"ackorder {' '.join(args)} changed this process's Hypothesis profile"
    return subprocess.CompletedProcess(["ackorder", *args], code, out.getvalue(), err.getvalue())


def assert_usage_error(p: subprocess.CompletedProcess, *needles: str, ran_first: bool = False) -> None:
    """``ran_first``: the command had to run before it could tell (its run's table is on stdout)."""
    assert p.returncode == errors.USAGE, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stdout + p.stderr, p.stderr
    assert ran_first or p.stdout == "", f"a usage error also wrote to stdout: {p.stdout!r}"
    assert p.stderr == p.stderr.lstrip(), f"blank output before the usage error: {p.stderr!r}"
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_every_command_has_a_help_line_and_there_is_a_version():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert set(helps) == set(sub.choices) and all(helps.values()), helps
    p = python_m_cli("--version")
    assert p.returncode == 0 and p.stdout.startswith("ackorder ")


@pytest.mark.parametrize("args, needles", [
    (["tlc", "sync_flsh"], ["unknown model 'sync_flsh'", "did you mean sync_flush"]),
    # an output file that cannot be written is refused before any work (a run of minutes, then exit 2)
    (["run", "--json", "no/such/dir/v.json"], ["--json", "the directory no/such/dir does not exist"]),
    (["tlc", "sync_flush", "--json", "no/such/dir/x.json"], ["the directory no/such/dir does not exist"]),
    (["prove", "--json", "tla"], ["tla: is a directory"]),
    (["sim", "--seed", "1", "--trace", "README.md/t.ndjson"], ["README.md is not a directory"]),
    (["stateful", "--save", "README.md/p.py"], ["--save", "README.md is not a directory"]),
    (["trace-check", "README.md", "--merged", "no/such/m.ndjson"], ["--merged", "does not exist"]),
    (["replay", "--seed", "1", "--emit-test", "no/such/t.py"], ["--emit-test", "does not exist"]),
    (["chaos", "--json", "no/such/c.json"], ["--json", "does not exist"]),
    (["load", "--json", "no/such/l.json"], ["--json", "does not exist"]),
    (["load", "--record", "no/such/r.ndjson"], ["--record", "does not exist"]),
    (["bench", "sim", "--plot", "no/such/p.png"], ["--plot", "does not exist"]),
    (["broker", "master", "--trace", "no/such/t.ndjson"], ["--trace", "does not exist"]),
    (["tlc", "BugAckOnWrot"], ["did you mean BugAckOnWrote"]),
    (["tlc", "--workers", "0", "sync_flush"], ["--workers must be a positive integer"]),
    (["tlc", "--spec", "tla/MCAckOrder.tla"], ["--spec needs --config"]),
    (["tlc", "nowhere/My.cfg"], ["no such cfg file"]),
    (["tlc", "tla/AckOrder.tla"], ["tla/AckOrder.tla: a spec module, not a model"]),        # TLC ran it: exit 1
    (["tlc", "BugAckOnWrote", "BugTimeoutAsOK", "--emit-test", "t.py"], ["a .py file holds one model's test"]),
    (["tlc", "BugAckOnWrote", "--heap", "0m"], ["--heap 0m: expected 64m to this machine's memory"]),
    (["tlc", "BugAckOnWrote", "--recover", "no/such/dir"], ["--recover no/such/dir: no such directory"]),
    (["tlc", "BugAckOnWrote", "--checkpoint", "-1"], ["--checkpoint must be a positive integer"]),
    (["tlc", "--heap", "lots", "sync_flush"], ["--heap 'lots'"]),
    (["tlc", "--update-manifest", "--workers", "2", "sync_flush"], ["--update-manifest needs"]),
    (["twin", "no_such_model"], ["unknown model"]),
    (["sim", "--seed", "1", "--steps", "-5"], ["--steps: expected a positive integer"]),
    (["sim", "--seed", "x"], ["--seed"]),
    (["sim", "--seed", "1", "--bug", "nope"], ["unknown bug switch 'nope'"]),
    (["sim", "--seed", "1", "--config", "no_such_knob=1"], ["no_such_knob"]),
    (["sim", "--seed", "1", "--config", "novalue"], ["expected KEY=VALUE"]),
    (["replay", "--program", "no/such/file.py"], ["no/such/file.py"]),
    (["replay", "--seed", "3", "--expect-hash", "zz"], ["--expect-hash", "hex digits", "'zz'"]),
    (["replay", "--seed", "3", "--expect-hash", "a" * 63], ["--expect-hash", "16 or 64 hex digits"]),
    (["replay", "--program", "tla"], ["tla"]),
    (["replay", "--seed", "1", "--program", "x"], ["not allowed with"]),
    # a program pins its own: these were ignored, and the program ran (exit 0)
    (["replay", "--program", "x.py", "--bug", "BugAckOnWrote"], ["--bug: a seed's, not a program's"]),
    (["replay", "--program", "x.py", "--config", "replicas=2", "--steps", "9"], ["--steps, --config: a seed's"]),
    (["replay", "--program", "x.py", "--expect-hash", "0" * 16], ["--expect-hash: a seed's"]),
    (["fuzz", "--seeds", "0"], ["--seeds: expected a positive integer"]),
    (["fuzz", "--seeds", "5", "--bug", "nope"], ["unknown bug switch"]),
    (["fuzz", "--seeds", "2", "--conf", "spark.driver.extraJavaOptions=-XX:+UseSerialGC -Xmx1g"],
     ["spark.driver.extraJavaOptions", "-Xmx", "set spark.driver.memory"]),
    (["fuzz", "--seeds", "2", "--conf", "spark.executor.extraJavaOptions=-Xmx2g"], ["set spark.executor.memory"]),
    (["fuzz", "--seeds", "2", "--long", "--steps", "0"], ["--steps: expected a positive integer"]),
    (["fuzz", "--seeds", "2", "--long", "--batch-seeds", "x"], ["--batch-seeds: expected a positive integer"]),
    (["fuzz", "--seeds", "2", "--long", "--model", "failover"], ["--long: a failover seed's schedule is bounded"]),
    (["fuzz", "--seeds", "2", "--model", "controllers", "--bug", "BugOwnerSkipsMetadataCompare"],
     ["never decides twice from one read"]),
    (["fuzz", "--seeds", "2", "--model", "controllers", "--bug", "BugNoAllAck"], ["unknown bug switch 'BugNoAllAck'"]),
    (["replay", "--controllers", "--failover", "--seed", "1"], ["one model at a time"]),
    (["replay", "--controllers", "--seed", "1", "--trace", "x.ndjson"], ["--controllers takes --seed"]),
    (["chaos", "--failover", "--controllers", "9"], ["--controllers 9: 1..5"]),
    (["chaos", "--failover", "--controller-bug", "BugNoTakeoverGrace"], ["needs --controllers 2 or more"]),
    (["chaos", "--failover", "--controllers", "3", "--controller-bug", "BugCommitWithoutCompare"],
     ["a chaos run can catch BugNoTakeoverGrace"]),
    (["fuzz", "--seeds", "5", "--conf", "nokey"], ["expected spark.KEY=VALUE"]),
    (["fuzz", "--seeds", "5", "--conf", "spark.executor.memory=banana"], ["expected a size such as 512m or 2g"]),
    # the JVM's -Xmx took these verbatim and did not start, or Spark refused the heap: exit 3 before
    (["fuzz", "--seeds", "5", "--conf", "spark.driver.memory=1gb"], ["spark.driver.memory='1gb'", "k, m, g or t"]),
    (["fuzz", "--seeds", "5", "--conf", "spark.driver.memory=4"], ["spark.driver.memory='4'", "JVM heap size"]),
    (["fuzz", "--seeds", "5", "--conf", "spark.executor.memory=400m"], ["at least 450m (Spark's minimum)"]),
    (["fuzz", "--seeds", "5", "--conf", "spark.executor.memory=4096"], ["with its unit"]),    # 4 KiB to Spark's check
    (["fuzz", "--seeds", "5", "--conf", "spark.executor.memoryOverhead=x"], ["expected a size such as 512m or 2g"]),
    (["fuzz", "--seeds", "5", "--out", "README.md"], ["exists and is not a directory"]),
    (["fuzz", "--seeds", "5", "--master", "local[x]"], ["expected local"]),
    (["fuzz", "--seeds", "5", "--config-matrix", "no/such.json"], ["no/such.json"]),
    (["fuzz-report", "--out", "tla"], ["no campaign there"]),
    (["stateful", "--machine", "nope"], ["unknown machine 'nope'"]),
    (["stateful", "--examples", "0"], ["--examples"]),
    (["run", "--models", "nope"], ["unknown model 'nope'"]),
    (["run", "--fuzz-seeds", "0"], ["--fuzz-seeds must be positive"]),
    (["load", "--target", "nowhere"], ["--target 'nowhere'", "HOST:PORT"]),
    (["bench", "ack", "--producers", "x"], ["--producers 'x'"]),
    (["bench", "ack", "--count", "-1"], ["--count: expected a positive integer, got -1"]),     # a traceback before
    (["bench", "ack", "--size", "0"], ["--size: expected a positive integer, got 0"]),
    (["bench", "rss", "--rss-gib", "nan"], ["--rss-gib: expected a positive number, got nan"]),
    (["bench", "ack", "--delay-ms", "-2"], ["--delay-ms: expected a number >= 0"]),
    (["sim", "--seed", "1", "--config", "replicas=33"], ["replicas 33: must be 1 to 32"]),
    (["fuzz", "--seeds", "5", "--config-matrix", "/bin/ls"], ["/bin/ls: not a text file"]),
    (["no-such-command"], ["invalid choice"]),
    (["sim", "--seed", "1", "--bogus"], ["ackorder sim: error: unrecognized arguments: --bogus",
                                         "see `ackorder sim --help`"]),          # was ackorder's, not sim's
    (["broker", "master", "--dir", "d", "--bogus"], ["ackorder broker master: error: unrecognized arguments"]),
])
def test_bad_input_is_one_line_and_exit_2(args, needles):
    assert_usage_error(ackorder_in_process(*args), *needles)


@pytest.mark.parametrize("args, needles", [
    (["no-such-command"], ["invalid choice"]),                          # argparse's own exit
    (["tlc", "sync_flsh"], ["unknown model 'sync_flsh'"]),              # the command's UsageError
    (["sim", "--seed", "1", "--trace", "README.md/t.ndjson"], ["README.md is not a directory"]),
    # refused after the command has loaded its Hypothesis profile, which would stay loaded in this process
    (["stateful", "--machine", "spec", "--bug", "BugAckOnWrote"], ["--bug runs the refinement machine"]),
])
def test_a_usage_error_is_the_process_exit_status_2(args, needles):
    """The table above runs in this process; a user's is a process, whose exit status must be 2."""
    assert_usage_error(python_m_cli(*args), *needles)


def test_the_in_process_runner_sees_what_a_process_would(tmp_path):
    """A traceback and exit 1 for an exception that escapes main; exit 0 and stdout for --help."""
    assert ackorder_in_process("bogus").returncode == errors.USAGE
    helped = ackorder_in_process("--help")
    assert helped.returncode == errors.OK and "usage: ackorder" in helped.stdout and helped.stderr == ""
    import cli.main

    real = cli.main.run_command
    cli.main.run_command = lambda args: 1 / 0
    try:
        crashed = ackorder_in_process("sim", "--seed", "1")
    finally:
        cli.main.run_command = real
    assert crashed.returncode == 1 and "Traceback" in crashed.stderr and "ZeroDivisionError" in crashed.stderr


def test_resume_without_a_run_is_a_usage_error(tmp_path):
    assert_usage_error(ackorder("run", "--resume", str(tmp_path)), "no run to resume")


def test_missing_java_is_an_environment_failure(tmp_path):
    p = ackorder("tlc", "sync_flush", env={"PATH": str(tmp_path)})
    assert p.returncode == errors.ENVIRONMENT, (p.stdout, p.stderr)
    assert "java not found" in p.stderr and "Traceback" not in p.stderr
    # Spark too, before it starts: spark-class's "JAVA_HOME is not set" lines and Spark's error came first
    p = ackorder("fuzz", "--seeds", "5", "--out", str(tmp_path / "f"), env={"JAVA_HOME": str(tmp_path / "no-jdk")})
    assert p.returncode == errors.ENVIRONMENT and p.stderr.count("\n") == 1, (p.stdout, p.stderr)
    assert f"JAVA_HOME={tmp_path / 'no-jdk'} but" in p.stderr


def test_an_unreachable_spark_master_fails_fast_before_spark_starts():
    start = time.monotonic()
    p = ackorder("fuzz", "--seeds", "5", "--master", "spark://127.0.0.1:1")
    assert p.returncode == errors.ENVIRONMENT and "not reachable" in p.stderr, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and time.monotonic() - start < 20


def test_sim_exit_codes_and_a_reproducer_that_pastes(tmp_path):
    clean = ackorder("sim", "--seed", "3", "--steps", "300")
    assert clean.returncode == errors.OK, clean.stdout
    bad = ackorder("sim", "--seed", "0", "--steps", "600", "--bug", "ack_on_wrote_bug", "--trace", str(tmp_path / "t.ndjson"))
    assert bad.returncode == errors.VIOLATION, bad.stdout
    line = next(x for x in bad.stdout.splitlines() if x.startswith("ackorder replay --seed"))
    assert "--bug BugAckOnWrote" in line and line.split("--expect-hash ")[1].strip()  # whole, one line
    last = json.loads((tmp_path / "t.ndjson").read_text().splitlines()[-1])
    assert last["violation"] == "NoAckBeforeFlush"                # the trace ends with the verdict...
    before = json.loads((tmp_path / "t.ndjson").read_text().splitlines()[-2])
    assert before["action"].startswith("Respond")                 # ...right after the violating step
    again = ackorder(*line.split()[1:])
    assert again.returncode == errors.VIOLATION and "not the expected run" not in again.stdout
    wrong_hash = ackorder(*line.split()[1:-1], "0" * 64)
    assert wrong_hash.returncode == errors.VIOLATION and "not the expected run" in wrong_hash.stdout


def test_replay_program_codes(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("state = RefinementMachine()\nstate.teleport()\nstate.teardown()\n")
    assert_usage_error(ackorder("replay", "--program", str(bad)), "line 2", "no rule 'teleport'")
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    assert_usage_error(ackorder("replay", "--program", str(binary)), "not a text file")


TRACES = ROOT / "tla" / "tests" / "traces"


def test_trace_check_codes(tmp_path):
    ok = ackorder("trace-check", str(TRACES / "legal_keys.ndjson"), "--twin")
    assert ok.returncode == errors.OK and "valid" in ok.stdout, ok.stdout
    bad = ackorder("trace-check", str(TRACES / "illegal_ack_before_flush.ndjson"), "--twin", "--json",
                   str(tmp_path / "v.json"))
    assert bad.returncode == errors.VIOLATION, bad.stdout
    assert "step 2 of 2" in bad.stdout and "the state before it" in bad.stdout and "flushed" in bad.stdout
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["first_unexplained"] == 2 and verdict["failed"]["action"] == "Respond(1)"
    assert verdict["state"]["flushed"] == "0"
    broken = tmp_path / "broken.ndjson"
    broken.write_text((TRACES / "legal_keys.ndjson").read_text().replace('"Flush"', '"Flsuh"'))
    assert_usage_error(ackorder("trace-check", str(broken), "--twin"), f"{broken}:4:", "unknown action 'Flsuh'")
    assert_usage_error(ackorder("trace-check", str(tmp_path / "none.ndjson")), "cannot read")
    two = [str(TRACES / "legal_two_processes.master.ndjson"), str(TRACES / "two_processes.r1.ndjson")]
    merged = ackorder("trace-check", *two, "--twin", "--merged", str(tmp_path / "m.ndjson"))
    assert merged.returncode == errors.OK, merged.stdout
    again = ackorder("trace-check", str(tmp_path / "m.ndjson"), "--twin")   # the merged file is a trace too
    assert again.returncode == errors.OK, again.stdout + again.stderr


@pytest.mark.tlc
def test_trace_check_by_tlc_keeps_the_module(tmp_path):
    keep, scratch = tmp_path / "keep", tmp_path / "tmp"
    scratch.mkdir()
    p = ackorder("trace-check", str(TRACES / "illegal_torn_kept_after_recovery.ndjson"), "--keep", str(keep),
                 env={"TMPDIR": str(scratch)})
    assert p.returncode == errors.VIOLATION and "step 6 of 6" in p.stdout, p.stdout + p.stderr
    data = (keep / "AckOrderTraceData.tla").read_text()
    assert "Trace1 == <<" in data and "Traces == <<Trace1>>" in data and '"take"' in data
    assert (keep / "AckOrderTrace.cfg").exists() and (keep / "trace-Search.log").is_file()
    assert not list(scratch.iterdir()), "TLC's logs are left behind in TMPDIR"


def test_tlc_simulation_on_spark_usage():
    assert_usage_error(ackorder("tlc", "sync_flush", "--traces", "10"), "give --simulate too")
    assert_usage_error(ackorder("tlc", "sync_flush", "async_both", "--simulate", "--traces", "10"), "exactly one")
    assert_usage_error(ackorder("tlc", "sync_flush", "--simulate", "--traces", "0"), "--traces must be")
    assert_usage_error(ackorder("tlc", "sync_flush", "--simulate"), "--simulate needs N")
    p = ackorder("tlc", "sync_flush", "--simulate", "--traces", "10", "--master", "spark://127.0.0.1:1")
    assert p.returncode == errors.ENVIRONMENT and "not reachable" in p.stderr, p.stderr


@pytest.mark.tlc
def test_emit_test_from_tlc_and_from_a_failure(tmp_path):
    out = tmp_path / "test_emitted.py"
    p = ackorder("tlc", "BugDoubleResponse", "--emit-test", str(out))
    assert p.returncode == errors.OK and out.is_file(), p.stdout + p.stderr
    text = out.read_text()
    assert "BUG = 'BugDoubleResponse'" in text and "PROPERTY = 'OneResponsePerRequest'" in text
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout
    assert_usage_error(ackorder("tlc", "sync_flush", "--emit-test", str(tmp_path / "x.py")), "no bug model")
    assert_usage_error(ackorder("tlc", "BugNoAllAck", "--emit-test", str(tmp_path / "f.py")), "not failover")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    seed = ackorder("replay", "--seed", "0", "--steps", "400", "--bug", "BugAckOnWrote", "--emit-test",
                    str(tmp_path / "test_seed.py"), env={"TMPDIR": str(scratch)})
    assert seed.returncode == errors.VIOLATION and (tmp_path / "test_seed.py").is_file(), seed.stdout
    assert not list(scratch.iterdir()), "the failure's trace is left behind in TMPDIR"
    clean = ackorder("replay", "--seed", "3", "--steps", "100", "--emit-test", str(tmp_path / "none.py"))
    assert_usage_error(clean, "no counterexample", ran_first=True)     # only the run tells it was clean


def _wait_until_mapped(p: subprocess.Popen, library: str, timeout_s: float = 60.0) -> None:
    """Until the process has loaded ``library`` (a point it reached, not a guess at how long it takes)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and p.poll() is None:
        try:
            if library in Path(f"/proc/{p.pid}/maps").read_text():
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError(f"{library} not loaded in {timeout_s} s (exit {p.poll()})")


@pytest.mark.parametrize("signame, after_z3_s", [("SIGINT", 0.0), ("SIGINT", 2.0)])   # SIGTERM: the test below
def test_a_ctrl_c_stops_prove_with_130(signame, after_z3_s):
    """z3 takes SIGINT itself during a check and answers ``unknown`` ("interrupted from keyboard", or
    "canceled" under another handler): `ackorder prove` went on, to "all proofs hold" (exit 0) or to a
    conjunct reported unknown (exit 1); a KeyboardInterrupt raised in a z3 object's finalizer was
    dropped.  Now each is exit 130 and one line.  The signal is sent once z3's library is loaded
    (a fixed 0.4 s after the start once landed in Python's imports under load: the test below)."""
    import signal
    import time

    from cli.tests.interrupt import sigint_as_at_a_terminal

    p = subprocess.Popen([sys.executable, "-m", "cli", "prove"], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=sigint_as_at_a_terminal)
    try:
        _wait_until_mapped(p, "libz3")
    except AssertionError:
        p.kill()
        raise
    time.sleep(after_z3_s)
    p.send_signal(getattr(signal, signame))
    out, err = p.communicate(timeout=120)
    assert p.returncode == errors.INTERRUPTED and err.endswith(": interrupted\n") and err.count("\n") == 1, \
        (p.returncode, out[-300:], err)
    assert "all proofs hold" not in out and "NOT all as expected" not in out, out[-300:]


def test_a_ctrl_c_while_the_cli_is_imported_is_one_line_and_130(monkeypatch, capsys):
    """`ackorder` imported cli.main (argparse, locale, ...) before any handler was there: under load a
    Ctrl-C 0.4 s after the start still landed in those imports, and was a traceback with status -2
    (the 0.4 s case of the test above, in a full suite beside busy processes).  The console script and
    `python -m cli` now start in cli.launch, which imports nothing but sys before it catches that."""
    import importlib.abc

    from cli import errors, launch

    class InterruptedImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "cli.main":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "cli.main")
    monkeypatch.setattr(sys, "meta_path", [InterruptedImport(), *sys.meta_path])
    assert launch.main() == errors.INTERRUPTED == launch.INTERRUPTED
    assert capsys.readouterr().err == "ackorder: interrupted\n"


def test_prove_records_a_sigterm_and_raises_it_at_the_next_check(monkeypatch, capsys):
    """A SIGTERM during the proofs was raised where it landed, as a Ctrl-C had been before: often in a z3
    object's finalizer, where Python prints it and drops it, and the proofs ran on to their verdict.  Now
    prove records both signals and the next z3 check raises the interrupt (in this process: the proofs
    are a stand-in that signals itself, then checks)."""
    import signal

    import z3

    from cli import main as cli_main, prove
    from spec import proofs

    steps = []

    def proofs_signalled_midway(on_done):
        os.kill(os.getpid(), signal.SIGTERM)
        steps.append("ran on after the signal")          # a handler that raises never lets this run
        proofs.check(z3.Solver())
        steps.append("checked past it")

    monkeypatch.setattr(prove, "prove_manifest", proofs_signalled_midway)
    sigterm_before = signal.getsignal(signal.SIGTERM)
    assert cli_main.main(["prove"]) == errors.INTERRUPTED
    assert steps == ["ran on after the signal"], steps
    assert capsys.readouterr().err == "ackorder prove: interrupted\n"
    # nothing is left set for what runs next in this process (the proofs' tests: every check raised)
    assert not proofs.STOP.is_set() and not errors.STOP_REQUESTED.is_set()
    assert signal.getsignal(signal.SIGTERM) is sigterm_before


def test_a_heap_size_spark_starts_with():
    """What --conf lets through for the two heaps Spark checks (cli/fuzz.heap_ok): measured on this machine,
    450m starts and 400m does not; the driver's 1gb stopped its JVM (-Xmx1gb), the executor's 1gb starts."""
    from cli.fuzz import heap_ok

    for key, good, bad in (("spark.driver.memory", ("450m", "1g", "2G", "460800k"), ("449m", "1gb", "4096", "x")),
                           ("spark.executor.memory", ("450m", "1gb", "2G", "460800k"), ("449m", "4096", "512b"))):
        assert all(heap_ok(key, v) for v in good) and not any(heap_ok(key, v) for v in bad), key


@pytest.mark.parametrize("lookup_error, exit_code", [("EAI_NONAME", errors.USAGE), ("EAI_AGAIN", errors.ENVIRONMENT)])
def test_a_host_name_that_does_not_resolve(monkeypatch, lookup_error, exit_code):
    """`ackorder load --target nosuch.invalid:1234` and the servers' --host: exit 3 "environment" before;
    a name that is not there is the input's, a resolver that fails now (EAI_AGAIN) the machine's.  The
    resolver is stood in for: what a real one answers depends on the machine's DNS."""
    import socket

    def lookup(*args, **kwargs):
        raise socket.gaierror(getattr(socket, lookup_error), "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    done = ackorder_in_process("load", "--target", "nosuch.invalid:1234", "--count", "1")
    assert done.returncode == exit_code and done.stderr.count("\n") == 1, (done.returncode, done.stderr)
    assert "cannot connect to nosuch.invalid:1234: Name or service not known" in done.stderr, done.stderr
    # the command line's own errors first, whatever the resolver says
    assert ackorder_in_process("load", "--target", "nosuch.invalid:1234", "--connections", "0").returncode == errors.USAGE


def test_an_os_error_is_the_inputs_or_the_machines():
    """cli/errors.os_error_exit, which the brokers, the controller and every command's last resort use."""
    import errno

    from reference.real.etcd_store import StoreUnavailable

    for code in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EADDRNOTAVAIL):
        assert errors.os_error_exit(OSError(code, "x")) == errors.USAGE, errno.errorcode[code]
    for code in (errno.EADDRINUSE, errno.EIO, errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM,
                 errno.ECONNREFUSED, errno.EMFILE):
        assert errors.os_error_exit(OSError(code, "x")) == errors.ENVIRONMENT, errno.errorcode[code]
    assert errors.os_error_exit(StoreUnavailable("no majority")) == errors.ENVIRONMENT     # no errno: the machine's
    import socket

    # a host name that does not exist is the input's (it was exit 3); a resolver failing now is the machine's
    assert errors.os_error_exit(socket.gaierror(socket.EAI_NONAME, "Name or service not known")) == errors.USAGE
    assert errors.os_error_exit(socket.gaierror(socket.EAI_AGAIN, "Temporary failure")) == errors.ENVIRONMENT
    assert errors.os_error_line("load", OSError(errno.EADDRINUSE, "Address already in use", "x")) == \
        "ackorder load: environment: x: Address already in use"
