"""Every bug switch is caught: with the switch on, the refinement machine
must find a failure naming the property the bug's TLC cfg names, under the
selected profile (``ci`` in `make test`).  A bug not caught fails the test.

Times to catch are written to .ackorder/hypothesis-bug-times.json."""

import fcntl
import json
import os
import time
from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test

from reference.refinement import PropertyViolation
from spec.config import BUG_NAMES
from spec.traceformat import read_trace
from spec.tracecheck import check_trace
from stateful_tests.bug_machines import bug_catch, machine_for
from stateful_tests.machines import TRACE_DIR
from stateful_tests.profiles import STATE_DIR
from tla.manifest import expected_violations, load_manifest

MODELS = load_manifest()
TIMES = STATE_DIR.parent / "hypothesis-bug-times.json"


@pytest.mark.parametrize("bug", BUG_NAMES)
def test_bug_is_caught(bug):
    machine = machine_for(bug)
    trace = TRACE_DIR / f"{machine.__name__}-failure.ndjson"
    trace.unlink(missing_ok=True)
    start = time.perf_counter()
    with pytest.raises(PropertyViolation) as caught:
        run_state_machine_as_test(machine, settings=bug_catch())
    seconds = time.perf_counter() - start
    expected = expected_violations(bug, MODELS)
    assert caught.value.prop in expected, f"{bug}: caught {caught.value.prop}, expected {sorted(expected)}"
    # The failing case's trace (as found, not shrunk): the correct spec explains no such run.
    verdict = check_trace(read_trace(trace))
    assert not verdict.valid, f"{bug}: the twin accepts the failing case's trace {trace}"
    record_time(bug, {"property": caught.value.prop, "seconds": round(seconds, 2)})


def record_time(bug: str, entry: dict, times_file: Path = TIMES) -> None:
    """Read, update and replace the times file under a lock: pytest-xdist workers write it at once."""
    times_file.parent.mkdir(parents=True, exist_ok=True)
    with open(times_file.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        times = json.loads(times_file.read_text()) if times_file.exists() else {}
        times[bug] = entry
        tmp = times_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, times_file)
