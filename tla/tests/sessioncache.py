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


def session_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    # under pytest-xdist each worker's base is popen-gwN inside the session's; alone, it is the session's
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "ackorder-session-cache"
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
