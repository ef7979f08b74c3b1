"""tla/tests/sessioncache.py: a value is computed once per session, whichever worker asks first,
and the others read it (the flock makes a second asker wait for the first's result)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from tla.tests import sessioncache
from tla.tests.sessioncache import shared


class Factory:
    """What shared() reads of pytest's tmp_path_factory."""

    def __init__(self, base: Path):
        self.base = base

    def getbasetemp(self) -> Path:
        return self.base


def _ask(base: str, log: str, out: str) -> None:
    def compute():
        with open(log, "a") as f:
            f.write("computed\n")
        time.sleep(1.0)                 # the other asker arrives meanwhile
        return {"answer": 42}
    sessioncache._memo.clear()          # a worker process has only its own memory
    Path(out).write_text(repr(shared(Factory(Path(base)), "value", compute)))


def test_two_workers_asking_at_once_compute_once(tmp_path, monkeypatch):
    # as one process alone: the cache sits in the base directory itself, tmp_path here (under
    # pytest-xdist it would go to the base's parent, this worker's directory shared by its tests)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_ask, args=(str(tmp_path), str(log), str(tmp_path / f"out{i}"))) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert log.read_text() == "computed\n"
    assert [(tmp_path / f"out{i}").read_text() for i in range(2)] == ["{'answer': 42}"] * 2
    assert (tmp_path / "ackorder-session-cache" / "value.pickle").is_file()


def test_the_session_root_is_told_by_the_workers_own_base(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    worker_base = tmp_path / "pytest-9" / "popen-gw1"
    assert sessioncache.session_root(Factory(worker_base)) == tmp_path / "pytest-9"
    # a pytest started from inside a worker inherits the variable but has a base of its own:
    # its parent is the root every session shares, so it must keep to its own base
    nested_base = tmp_path / "pytest-10"
    assert sessioncache.session_root(Factory(nested_base)) == nested_base
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert sessioncache.session_root(Factory(worker_base)) == worker_base
