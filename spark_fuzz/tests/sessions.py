"""One local[2] SparkSession per test process, shared by every Spark test that
runs in it (a session costs 10-15 s of JVM start-up; under pytest-xdist each
worker is a process of its own, so each has one).

Spark hands back whatever session is active to any ``getOrCreate`` in the
process, whatever master it asks for: a test that needs sessions of its own
(another master, a cluster) first calls ``stop_shared()``, and the next test
that asks for the shared one gets a fresh one."""

from __future__ import annotations

MASTER = "local[2]"
_session = None


def _alive(session) -> bool:
    return session is not None and session.sparkContext._jsc is not None   # stop() clears _jsc


def shared():
    """The process's shared local[2] session, started (again) when there is none."""
    global _session
    if not _alive(_session):
        from spark_fuzz.campaign import spark_session

        _session = spark_session(MASTER)
        assert _session.sparkContext.master == MASTER, _session.sparkContext.master
    return _session


def stop_shared() -> None:
    """Stop the shared session, so that this process's next getOrCreate starts what it asks for."""
    global _session
    if _alive(_session):
        _session.stop()
    _session = None
