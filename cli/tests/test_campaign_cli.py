"""`ackorder fuzz`, `ackorder stateful` and `ackorder load` exit codes on real runs: a
--bug campaign exits 0 only when the bug is found, 1 when it is not; a clean campaign
exits 1 on any violation; reproducers print whole, on their own line, and paste."""

from __future__ import annotations

import pytest

from cli import errors
from cli.fuzz import verdict
from cli.tests.test_exit_codes import ackorder
from cli.tests.test_no_red_under_exit_0 import COLOUR, SGR, reds


def summary(outcomes: dict, seeds: int = 10) -> dict:
    return {"outcomes": outcomes, "seeds": seeds}


def test_campaign_verdicts():
    assert verdict(summary({"ok": 10}), None)[0] == errors.OK
    assert verdict(summary({"ok": 9, "NoAckBeforeFlush": 1}), None)[0] == errors.VIOLATION
    assert verdict(summary({"ok": 9, "internal_error": 1}), None)[0] == errors.VIOLATION
    assert verdict(summary({"ok": 9, "NoAckBeforeFlush": 1}), "BugAckOnWrote")[0] == errors.OK
    assert verdict(summary({"ok": 10}), "BugAckOnWrote")[0] == errors.VIOLATION           # not found
    code, why = verdict(summary({"ok": 8, "NoAckBeforeFlush": 1, "internal_error": 1}), "BugAckOnWrote")
    assert code == errors.VIOLATION and "internal_error" in why
    assert verdict(summary({"ok": 9, "LogMatching": 1}), "BugAcceptAckBeyondLog")[0] == errors.OK


def test_a_bug_campaign_exits_0_when_found_its_reproducer_pastes_and_a_long_one_reports_beside_it(tmp_path):
    out = str(tmp_path / "c")
    p = ackorder("fuzz", "--seeds", "30", "--steps", "150", "--bug", "ack_on_wrote_bug", "--batch-seeds", "30",
                 "--no-audit", "--out", out, timeout=600, env=COLOUR)
    assert p.returncode == errors.OK, p.stdout + p.stderr
    assert not reds(p.stdout), p.stdout        # the bug it found is no failure: yellow, not red (cli/ui.py)
    p.stdout = SGR.sub("", p.stdout)
    assert "Spark UI: http" in p.stdout and "found as NoAckBeforeFlush, as expected" in p.stdout
    assert "short mode, 150 steps per seed" in p.stdout and "bugs found per CPU-hour" in p.stdout
    line = next(x for x in p.stdout.splitlines() if x.startswith("ackorder replay --seed"))
    assert len(line.split("--expect-hash ")[1].strip()) == 64
    assert line in (tmp_path / "c" / "reproducers.txt").read_text()
    again = ackorder(*line.split()[1:])
    assert again.returncode == errors.VIOLATION and "reproduced" not in again.stderr
    assert "not the expected run" not in again.stdout

    # a long campaign in the same --out (one Spark start fewer than a test of its own)
    p = ackorder("fuzz", "--long", "--seeds", "2", "--steps", "20000", "--bug", "BugAckOnWrote",
                 "--master", "local[2]", "--out", out, timeout=600)
    assert p.returncode == errors.OK, p.stdout + p.stderr
    assert "long mode, 20,000 steps per seed" in p.stdout and "found as NoAckBeforeFlush" in p.stdout
    # the table of both campaigns in this --out, each with its own figure
    assert "bugs found per CPU-hour, campaigns in this --out" in p.stdout
    assert " short " in p.stdout and " long " in p.stdout


def test_a_bug_campaign_that_misses_its_bug_exits_1(tmp_path):
    p = ackorder("fuzz", "--seeds", "2", "--steps", "1", "--bug", "BugFlushIgnoresFsyncError", "--no-audit",
                 "--config-matrix", str(write_matrix(tmp_path)), "--out", str(tmp_path / "c"), timeout=600)
    assert p.returncode == errors.VIOLATION, p.stdout + p.stderr
    assert "was not found in 2 seeds" in p.stdout


def write_matrix(tmp_path):
    path = tmp_path / "matrix.json"
    path.write_text('[{"fsync_failure_probability": 0}]')      # the bug needs a failed fsync
    return path


def test_stateful_catches_a_bug_and_saves_a_program_that_replays(tmp_path):
    program = tmp_path / "failing.py"
    p = ackorder("stateful", "--bug", "ack_on_wrote_bug", "--save", str(program), timeout=600)
    assert p.returncode == errors.OK, p.stdout + p.stderr
    assert "caught as NoAckBeforeFlush, as expected" in p.stdout
    assert f"ackorder replay --program {program}" in p.stdout
    replay = ackorder("replay", "--program", str(program))
    assert replay.returncode == errors.VIOLATION and "reproduced: NoAckBeforeFlush" in replay.stdout


def test_a_clean_stateful_run_exits_0():
    p = ackorder("stateful", "--machine", "spec", "--examples", "5", timeout=600)
    assert p.returncode == errors.OK, p.stdout + p.stderr


def test_load_exits_1_when_answers_are_errors(tmp_path):
    from reference.tests.realproc import start_master

    master = start_master(tmp_path / "m", "--inject-write-fault-after", "0")   # every write fails
    try:
        target = f"127.0.0.1:{master.port}"
        p = ackorder("load", "--target", target, "--count", "20", "--producers", "2")
        assert p.returncode == errors.VIOLATION and "answered with an error status" in p.stdout, p.stdout
        p = ackorder("load", "--target", target, "--count", "20", "--producers", "2", "--first-key", "100",
                     "--allow-errors")
        assert p.returncode == errors.OK, p.stdout
    finally:
        master.stop()
    gone = ackorder("load", "--target", f"127.0.0.1:{master.port}", "--count", "5")     # nothing was sent: no loss
    assert gone.returncode == errors.ENVIRONMENT and gone.stderr.count("\n") == 1, (gone.returncode, gone.stderr)
    assert f"cannot connect to 127.0.0.1:{master.port}: Connection refused" in gone.stderr, gone.stderr


def test_a_ctrl_c_stops_a_campaign_with_130_and_no_traceback(tmp_path):
    """PySpark's own SIGINT handler called into the JVM from inside the signal while the driver waited on
    the same py4j connection: pages of "reentrant call" tracebacks, and py4j logged the interrupt with
    its traceback; now the caller's handler stays (spark_fuzz.campaign.spark_session) and py4j's record
    is filtered."""
    import signal
    import subprocess
    import sys
    import time

    from cli.tests.interrupt import sigint_as_at_a_terminal
    from cli.tests.test_exit_codes import ROOT

    p = subprocess.Popen([sys.executable, "-m", "cli", "fuzz", "--seeds", "200000", "--master", "local[1]",
                          "--out", str(tmp_path / "c")], cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=sigint_as_at_a_terminal)
    assert p.stdout.readline().startswith("Spark UI:")      # the session is up, the campaign starting
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == errors.INTERRUPTED and err.rstrip().endswith("ackorder fuzz: interrupted"), (out, err)
    assert "Traceback" not in err and "py4j" not in err, err


@pytest.mark.parametrize("ctrl_cs", [1, 2])
def test_a_ctrl_c_while_the_jvm_starts_stops_it_too(tmp_path, ctrl_cs):
    """A Ctrl-C while the driver's JVM was starting (PySpark waiting for it to connect) left that JVM
    running after the command had exited 130, holding its stdout and stderr open: whatever read them (a
    pipe to tee, this test) waited on.  Now the start runs to its end on a thread of its own and the
    session is stopped (spark_fuzz.campaign._started_off_the_main_thread); a second Ctrl-C does not wait
    for the start: the JVM is killed, and the class-data archive it started with is kept (a JVM that
    failed to start was taken for a damaged archive, and the archive discarded)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from cli.tests.interrupt import sigint_as_at_a_terminal
    from cli.tests.test_exit_codes import ROOT

    p = subprocess.Popen([sys.executable, "-m", "cli", "fuzz", "--seeds", "200000", "--master", "local[1]",
                          "--out", str(tmp_path / "c")], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, preexec_fn=sigint_as_at_a_terminal)
    try:
        first = p.stderr.readline()            # the JVM's first words: it is starting, not yet connected
        assert first, "the command ended before its JVM said anything"
        for _ in range(ctrl_cs):
            p.send_signal(signal.SIGINT)
            time.sleep(0.1)
        out, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise AssertionError("the command's output stayed open after a Ctrl-C: a JVM left running") from None
    assert p.returncode == errors.INTERRUPTED and err.rstrip().endswith("ackorder fuzz: interrupted"), (out, err)
    assert "Traceback" not in err and "py4j" not in err and "did not start with it" not in err, err


def test_a_task_that_could_not_write_its_part_is_the_machines_failure():
    """A full disk under --out failed every task: a PythonException carrying the worker's traceback
    reached the driver, a traceback and exit 1; it is exit 3 naming the OSError (cli/fuzz.task_os_error)."""
    from cli.fuzz import task_os_error

    class PythonException(Exception):        # pyspark.errors' name: what the driver receives
        pass

    worker = ("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
              '  File "spark_fuzz/ledger.py", line 85, in write_part\n'
              "OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device\n")
    assert task_os_error(PythonException(worker)) == \
        "OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device"
    assert task_os_error(PythonException("ZeroDivisionError: division by zero")) is None     # a defect: exit 1
    assert task_os_error(OSError(28, "not Spark's")) is None
    frame = '  File "spark_fuzz/ledger.py", line 85, in write_part\n    pq.write_table(table, path)\n    ^^^^^^^^\n'
    # pyarrow's own OSError has no errno: it was missed (a traceback and exit 1)
    assert task_os_error(PythonException(f"Traceback (most recent call last):\n{frame}OSError: Error writing "
                                         "bytes to file. Detail: [errno 28] No space left on device\n")) == \
        "OSError: Error writing bytes to file. Detail: [errno 28] No space left on device"
    assert task_os_error(PythonException(f"Traceback (most recent call last):\n{frame}PermissionError: [Errno 13] "
                                         "Permission denied: 'x'\n")) == "PermissionError: [Errno 13] Permission denied: 'x'"
    # a defect while handling an OSError is the defect (it was the OSError: exit 3), and an errno in
    # another exception's words is not an OSError
    chained = (f"Traceback (most recent call last):\n{frame}OSError: [Errno 28] No space left on device\n\n"
               "During handling of the above exception, another exception occurred:\n\n"
               f"Traceback (most recent call last):\n{frame}TypeError: unsupported operand\n")
    assert task_os_error(PythonException(chained)) is None
    # with no message, and a module's own OSError (a class of a module the driver has loaded)
    assert task_os_error(PythonException(f"Traceback (most recent call last):\n{frame}ConnectionResetError\n")) == \
        "ConnectionResetError"
    assert task_os_error(PythonException(f"Traceback (most recent call last):\n{frame}socket.gaierror: [Errno -3] "
                                         "Temporary failure in name resolution\n")) == \
        "socket.gaierror: [Errno -3] Temporary failure in name resolution"
    assert task_os_error(PythonException(f"Traceback (most recent call last):\n{frame}json.JSONDecodeError: x\n")) is None
    assert task_os_error(PythonException(f"Traceback (most recent call last):\n{frame}ValueError: [Errno 5] x\n")) is None
    # the driver's Py4JJavaError: the worker's traceback inside Java's, Java's frames after it
    java = ("An error occurred while calling o56.collectAndServe.\n: org.apache.spark.SparkException: Job aborted due "
            "to stage failure: Task 0 in stage 0.0 failed 4 times: org.apache.spark.api.python.PythonException: "
            f"Traceback (most recent call last):\n{frame}OSError: [Errno 28] No space left on device\n\n"
            "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(...)\n"
            "Driver stacktrace:\n\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(...)\n")
    assert task_os_error(type("Py4JJavaError", (Exception,), {})(java)) == "OSError: [Errno 28] No space left on device"
