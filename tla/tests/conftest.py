import pytest

from spec import proofmemo
from tla.tests.sessioncache import session_root


@pytest.fixture(scope="session", autouse=True)
def proofs_shared_between_workers(tmp_path_factory):
    """The z3 proof results (spec/proofmemo.py) on disk for this session's pytest-xdist workers:
    a bug's bounded model check or a configuration's proof is computed once, by whichever worker
    needs it first, and `ackorder prove` (test_proofs.py) reads what the other tests found."""
    proofmemo.share_in(session_root(tmp_path_factory) / "z3-proofs")
    yield
    proofmemo.share_in(None)
