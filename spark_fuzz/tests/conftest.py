import pytest


@pytest.fixture(scope="module")
def spark():
    """One local[2] session per test module (a session costs ~10 s to start)."""
    from spark_fuzz.campaign import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
