"""One computation per test session, whichever pytest-xdist worker needs it first: the value is
pickled under the session's base temporary directory (each worker's own is inside it), guarded by
an flock, so that the other worker reads it instead of computing it again.  A new session has a
new directory, so nothing is ever read from an earlier one."""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
_memo: dict[str, object] = {}           # this process's copy, read once


def session_root(tmp_path_factory) -> Path:
    """This session's directory, shared by its pytest-xdist workers: each worker's base is
    popen-gwN inside it.  Told by the base's name, not by PYTEST_XDIST_WORKER alone, which a
    pytest started from inside a worker inherits: its base is its own pytest-N, whose parent is
    the root every session shares, where results of an earlier session would be read."""
    base = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return base.parent if worker and base.name == f"popen-{worker}" else base


def session_dir(tmp_path_factory) -> Path:
    path = session_root(tmp_path_factory) / "ackorder-session-cache"
    path.mkdir(exist_ok=True)
    return path


def shared(tmp_path_factory, name: str, compute: Callable[[], T]) -> T:
    """``compute()``, run once per session for ``name`` across every worker."""
    if name in _memo:
        return _memo[name]          # type: ignore[return-value]
    where = session_dir(tmp_path_factory)
    path = where / f"{name}.pickle"
    with open(where / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # released when the file closes
        if path.exists():
            value = pickle.loads(path.read_bytes())
        else:
            value = compute()
            part = path.with_suffix(".part")
            part.write_bytes(pickle.dumps(value))
            os.replace(part, path)
    _memo[name] = value
    return value
