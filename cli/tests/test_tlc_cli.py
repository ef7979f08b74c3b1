"""`ackorder tlc` as users know TLC: counts are part of the verdict, the JSON tells the
kinds of outcome apart and carries the counterexample, a user's own spec and cfg run,
TLC's options pass through, and one name per bug."""

from __future__ import annotations

import json
import os

import pytest

from cli.main import main
from cli.tests.test_exit_codes import ackorder, assert_usage_error
from tla.manifest import MANIFEST_PATH

pytestmark = pytest.mark.tlc

COUNTER = """---- MODULE Counter ----
EXTENDS Naturals
VARIABLE x
Init == x = 0
Inc == x < 5 /\\ x' = x + 1
Reset == x = 5 /\\ x' = 0
Next == Inc \\/ Reset
Small == x < 4
====
"""


def manifest_with(tmp_path, **changes):
    data = json.loads(MANIFEST_PATH.read_text())
    for m in data["models"]:
        for name, fields in changes.items():
            if m["model"] == name:
                m.update(fields)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    return path


def test_a_count_mismatch_is_an_unexpected_outcome(tmp_path, capsys):
    manifest = manifest_with(tmp_path, reach_torn_tail={"distinct_states": 13})
    out = tmp_path / "out.json"
    assert main(["tlc", "reach_torn_tail", "--manifest", str(manifest), "--json", str(out)]) == 1
    (row,) = json.loads(out.read_text())
    assert row["verdict"] == "count_mismatch" and "the manifest records 13" in row["detail"]
    assert "count mismatch" in capsys.readouterr().out
    assert main(["tlc", "reach_torn_tail", "--manifest", str(manifest), "--no-check-counts"]) == 0


def test_json_names_the_kind_of_outcome_and_carries_the_counterexample(tmp_path):
    manifest = manifest_with(tmp_path, reach_torn_tail={"expected": "Debug_NoReplicaAhead"},
                             sync_flush={"expected": "NoAckBeforeFlush", "kind": "bug", "model": "BugPretend"})
    out = tmp_path / "out.json"
    code = main(["tlc", "ack_on_wrote_bug", "reach_torn_tail", "BugPretend", "--manifest", str(manifest),
                 "--json", str(out)])
    assert code == 1
    rows = {r["model"]: r for r in json.loads(out.read_text())}
    assert rows["BugAckOnWrote"]["verdict"] == "as_expected"          # either spelling in, one name out
    assert rows["reach_torn_tail"]["verdict"] == "unexpected_violation"
    assert rows["BugPretend"]["verdict"] == "missed_violation"
    steps = rows["BugAckOnWrote"]["counterexample"]
    assert [s["label"] for s in steps] == ["Init", "Put", "Respond(1)"]
    assert steps[-1]["state"]["reqs"].count("PUT_OK") == 1 and steps[-1]["changed"]
    assert rows["BugAckOnWrote"]["check_seconds"] < rows["BugAckOnWrote"]["seconds"]   # JVM start-up excluded


def test_a_users_own_spec_and_cfg(tmp_path):
    (tmp_path / "Counter.tla").write_text(COUNTER)
    (tmp_path / "Counter.cfg").write_text("INIT Init\nNEXT Next\nINVARIANT Small\n")
    out = tmp_path / "out.json"
    failing = ackorder("tlc", "--spec", str(tmp_path / "Counter.tla"), "--config", str(tmp_path / "Counter.cfg"),
                       "--json", str(out))
    assert failing.returncode == 1, failing.stdout + failing.stderr
    (row,) = json.loads(out.read_text())
    assert row["outcome"] == "Small" and row["verdict"] == "unexpected_violation"
    assert [s["label"] for s in row["counterexample"]] == ["Init", "Inc", "Inc", "Inc", "Inc"]
    expected = ackorder("tlc", str(tmp_path / "Counter.cfg"), "--expect", "Small")   # the .tla next to the cfg
    assert expected.returncode == 0, expected.stdout + expected.stderr
    broken = tmp_path / "Broken.tla"
    broken.write_text(COUNTER.replace("Counter", "Broken").replace("x' = x + 1", "x' = (x + 1"))
    error = ackorder("tlc", "--spec", str(broken), "--config", str(tmp_path / "Counter.cfg"))
    # the user's own spec does not parse: their input, known once TLC ran (exit 2, one line; was exit 1)
    assert_usage_error(error, "Counter: ", "Broken.tla:6:", ran_first=True)
    assert "TLC error" in error.stdout


def test_tlc_options_pass_through(tmp_path):
    sim = ackorder("tlc", "BugAckOnWrote", "--simulate", "300", "--depth", "10", "--seed", "7",
                   "--json", str(tmp_path / "s.json"))
    assert sim.returncode == 0, sim.stdout + sim.stderr
    (row,) = json.loads((tmp_path / "s.json").read_text())
    assert row["outcome"] == "NoAckBeforeFlush" and row["verdict"] == "as_expected"
    raw = ackorder("tlc", "reach_torn_tail", "--", "-fp", "7")        # anything TLC takes, after `--`
    assert raw.returncode == 0, raw.stdout + raw.stderr
    log = next(line for line in raw.stdout.splitlines() if line.startswith("TLC logs: ")).split(": ", 1)[1]
    assert "with fp 7 " in open(f"{log}/reach_torn_tail.log").read()
    refused = ackorder("tlc", "reach_torn_tail", "--", "-nosuchtlcflag")      # what TLC refuses is bad usage
    assert_usage_error(refused, "reach_torn_tail: Error: unrecognized option: -nosuchtlcflag", ran_first=True)


def test_logs_are_kept_per_run():
    first = ackorder("tlc", "reach_torn_tail")
    second = ackorder("tlc", "reach_torn_tail")
    dirs = [next(x for x in p.stdout.splitlines() if x.startswith("TLC logs: ")) for p in (first, second)]
    assert dirs[0] != dirs[1]


def test_list_shows_models_with_expectations(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "200")     # as wide as the other tests' (xdist's workers inherit a narrow one)
    assert main(["tlc", "--list", "--kind", "bug", "--json", str(tmp_path / "list.json")]) == 0
    out = capsys.readouterr().out
    assert "BugAckOnWrote" in out and "NoAckBeforeFlush" in out and "sync_flush " not in out
    rows = json.loads((tmp_path / "list.json").read_text())
    assert {"model": "BugAckOnWrote", "expected": "NoAckBeforeFlush"}.items() <= next(
        r for r in rows if r["model"] == "BugAckOnWrote").items() and all(r["kind"] == "bug" for r in rows)


def test_a_malformed_manifest_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "manifest.json"
    bad.write_text('{"models": [{"model": "x"}]}')
    assert main(["tlc", "--manifest", str(bad)]) == 2
    assert "models[0]: field 'cfg' missing" in capsys.readouterr().err


KILLED_MID_RUN = """
import pathlib, threading, sys
from tla.manifest import load_manifest, resolve
from tla.tlc import TlcOptions, TlcStopped, kill_all, run_model

started = threading.Event()
result = []

def work():
    try:
        run = run_model(resolve(load_manifest(), "forged_ack_sync_master_tsp"), TlcOptions(),
                        pathlib.Path(sys.argv[1]), on_progress=lambda generated, distinct, queue: started.set())
        result.append(f"verdict {run.outcome}")
    except TlcStopped as err:
        result.append(f"stopped: {err}")
    except BaseException as err:
        result.append(f"failed: {err!r}")
        started.set()
        raise

t = threading.Thread(target=work)
t.start()
assert started.wait(120), "TLC never reported progress"
kill_all()
t.join(60)
print(result[0])
"""


def test_a_tlc_killed_by_a_ctrl_c_gives_no_verdict(tmp_path):
    """The CI run caught `ackorder run` recording a TLC it had just killed as a tlc_error; a
    killed TLC must raise TlcStopped, never return an outcome."""
    import subprocess
    import sys

    from cli.tests.test_exit_codes import ROOT

    p = subprocess.run([sys.executable, "-c", KILLED_MID_RUN, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("stopped: forged_ack_sync_master_tsp"), p.stdout


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc's children lists)."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = {int(k) for k in f.read().split()}
            except FileNotFoundError:
                continue
            todo += list(kids - out)
            out |= kids
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_sigterm_stops_tlc_like_a_ctrl_c_and_leaves_no_jvm_behind():
    """`timeout 90 ackorder tlc sync_flush_large` left TLC's JVMs running after the command died (a
    SIGTERM ended Python at once, with no clean-up); now it stops as a Ctrl-C does: exit 130."""
    import signal
    import subprocess
    import sys
    import time

    from cli.tests.test_exit_codes import ROOT

    p = subprocess.Popen([sys.executable, "-m", "cli", "tlc", "sync_flush_large"], cwd=ROOT, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline, jvms = time.monotonic() + 60, set()
    while not jvms and time.monotonic() < deadline and p.poll() is None:
        jvms = {pid for pid in _descendants(p.pid) if "tlc2.TLC" in open(f"/proc/{pid}/cmdline").read()}
        time.sleep(0.2)
    assert jvms, "TLC never started"
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "ackorder tlc: interrupted" in err, (p.returncode, out[-500:], err[-500:])
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in jvms) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in jvms), "a TLC JVM outlived the command"
