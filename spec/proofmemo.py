"""A memo of z3 proof results (spec/proofs.py, spec/failover/proofs.py) and of the twin's
searches they follow (tla/twincheck.py's ``twin_search``), in the
process and, once ``share_in`` names a directory, on disk for every process
that names the same one: pytest-xdist workers computing the proofs beside each
other, and `ackorder prove` run inside a test reading what the per-bug tests
found.  A result is computed once under an exclusive lock on its own key (a
process wanting it meanwhile waits, then reads it) and written atomically.

Keys are the function's name and its arguments in a canonical form (sets
sorted), so they are equal across processes whatever their hash seeds."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import attrs

T = TypeVar("T")
_memory: dict[str, object] = {}
_directory: Path | None = None
_skip_busy = False


class Busy(Exception):
    """Under ``skipping_busy``: another process is computing this result now."""


@contextlib.contextmanager
def skipping_busy():
    """Within: a result another process is computing raises Busy instead of waiting for it."""
    global _skip_busy
    _skip_busy = True
    try:
        yield
    finally:
        _skip_busy = False


def share_in(directory: Path | None) -> None:
    """Keep results in ``directory`` too (None: this process only)."""
    global _directory
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    _directory = directory


def _canonical(value):
    if attrs.has(type(value)):
        return {"type": type(value).__qualname__,
                **{f.name: _canonical(getattr(value, f.name)) for f in attrs.fields(type(value))}}
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))}
    assert value is None or isinstance(value, (str, int, float, bool)), f"no canonical form for {value!r}"
    return value


def key_of(function: str, *args) -> str:
    text = json.dumps([function, *map(_canonical, args)], sort_keys=True)
    return f"{function}-{hashlib.sha256(text.encode()).hexdigest()[:24]}"


def memoized(function: str, args: tuple, compute: Callable[[], T]) -> T:
    """``compute()``'s result for ``function(*args)``, computed at most once per process,
    and at most once across the processes sharing a directory."""
    key = key_of(function, *args)
    if key in _memory:
        return _memory[key]            # type: ignore[return-value]
    if _directory is None:
        value = compute()
    else:
        path = _directory / f"{key}.pickle"
        with open(_directory / f"{key}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (fcntl.LOCK_NB if _skip_busy else 0))
            except BlockingIOError:
                raise Busy(key) from None
            if path.exists():
                value = pickle.loads(path.read_bytes())
            else:
                value = compute()
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(pickle.dumps(value))
                os.replace(tmp, path)
    _memory[key] = value
    return value


def memo(function: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A decorator: ``memoized`` under ``function`` (a name unique across the proof modules)."""
    import functools

    def wrap(f: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(f)
        def memoized_f(*args):
            return memoized(function, args, lambda: f(*args))
        return memoized_f
    return wrap
