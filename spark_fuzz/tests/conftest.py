import pytest

from spark_fuzz.tests import sessions


@pytest.fixture(scope="session", autouse=True)
def _stop_the_shared_spark_session_at_the_end():
    _make_the_class_data_archive()
    yield
    sessions.stop_shared()


def _make_the_class_data_archive() -> None:
    """`make setup` makes the driver's class-data archive; a pytest run without it makes it here,
    before this process's first session, so the sessions are the ones users get."""
    import subprocess
    import sys

    from spark_fuzz import jvmcds

    if jvmcds.usable_archive() is None:
        subprocess.run([sys.executable, "-m", "spark_fuzz.jvmcds"], timeout=jvmcds.MAKE_TIMEOUT_S + 60)


@pytest.fixture
def spark():
    """The shared local[2] session of this test process (see sessions.py)."""
    return sessions.shared()


@pytest.fixture
def own_spark_sessions():
    """For a test that starts sessions of its own (another master, a cluster): no shared one is active."""
    sessions.stop_shared()
