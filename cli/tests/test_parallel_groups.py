"""`make test` runs the suite with `pytest -n 2 --dist loadgroup`: tests that share a per-process cache
or a machine-wide resource (a standalone Spark cluster) carry an `xdist_group` mark
and must run on one worker.  pytest 9 with pytest-xdist 3.8 ignored every such mark without a word,
so the installed pair is checked here, on a throwaway suite in its own pytest process."""

import subprocess
import sys
import textwrap


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent("""
        import os
        import pytest

        pytestmark = pytest.mark.xdist_group("together")

        @pytest.mark.parametrize("i", range(6))
        def test_grouped(i):
            with open(os.path.join(os.path.dirname(__file__), "workers.txt"), "a") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    """))
    (tmp_path / "test_loose.py").write_text("import pytest\n\n@pytest.mark.parametrize('i', range(6))\n"
                                            "def test_loose(i):\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
                           "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6
    assert len(set(workers)) == 1, f"one xdist_group ran on workers {sorted(set(workers))}"
