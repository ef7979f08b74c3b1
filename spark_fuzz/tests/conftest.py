import pytest

from spark_fuzz.tests import sessions


@pytest.fixture(scope="session", autouse=True)
def _stop_the_shared_spark_session_at_the_end():
    yield
    sessions.stop_shared()


@pytest.fixture
def spark():
    """The shared local[2] session of this test process (see sessions.py)."""
    return sessions.shared()


@pytest.fixture
def own_spark_sessions():
    """For a test that starts sessions of its own (another master, a cluster): no shared one is active."""
    sessions.stop_shared()
