"""The Spark driver's class-data archive (spark_fuzz/jvmcds.py): sessions map it, a damaged one
is removed and the session starts without it, and the maker's exit codes."""

import os
import subprocess
import sys

from spark_fuzz import jvmcds


def _driver_maps(session, archive) -> bool:
    pid = session.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{pid}/maps") as maps:
        return any(line.rstrip().endswith(str(archive)) for line in maps)


def test_the_shared_sessions_driver_maps_the_archive(spark):
    """conftest.py made the archive (if `make setup` had not) before this process's first session."""
    archive = jvmcds.usable_archive()
    assert archive is not None, "no archive: `python -m spark_fuzz.jvmcds` makes it"
    assert _driver_maps(spark, archive)
    arguments = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                     .getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments, arguments


DAMAGED = """
import sys
from pathlib import Path
from spark_fuzz.campaign import spark_session
session = spark_session("local[1]", cds_dir=Path(sys.argv[1]))
pid = session.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
print("sum", session.sparkContext.parallelize(range(10), 2).sum())
print("maps archive", any(sys.argv[1] in line for line in open(f"/proc/{pid}/maps")))
session.stop()
"""


def test_a_damaged_archive_is_removed_and_the_session_starts_without_it(tmp_path):
    """A truncated archive crashes the JVM at start-up (SIGBUS); the session starts again without it.
    In a process of its own: pyspark keeps a process's first JVM for every later session."""
    good = jvmcds.usable_archive()
    assert good is not None
    damaged = jvmcds.archive_path(tmp_path)
    with open(good, "rb") as src, open(damaged, "wb") as dst:
        dst.write(src.read(good.stat().st_size // 2))
    temp = tmp_path / "temp"               # where the JVM's crash report goes (jvmcds.driver_options)
    temp.mkdir()
    out = subprocess.run([sys.executable, "-c", DAMAGED, str(tmp_path)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TMPDIR": str(temp)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "sum 45" in out.stdout and "maps archive False" in out.stdout, out
    assert "removed the Spark class-data archive" in out.stderr, out.stderr[-3000:]
    assert "A fatal error has been detected" in out.stdout + out.stderr      # the crash really happened
    assert not damaged.exists()
    assert [p.name.startswith("ackorder-spark-hs_err_") for p in temp.iterdir()] == [True]


def test_the_maker_exits_3_without_java_and_2_on_bad_usage(tmp_path):
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk")}
    out = subprocess.run([sys.executable, "-m", "spark_fuzz.jvmcds", "--dir", str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1 and "no-jdk" in out.stderr, out
    assert list(tmp_path.iterdir()) == []
    out = subprocess.run([sys.executable, "-m", "spark_fuzz.jvmcds", "--no-such-option"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "unrecognized arguments" in out.stderr, out


def test_an_archive_in_place_is_not_made_again(tmp_path):
    jvmcds.archive_path(tmp_path).write_bytes(b"\0" * 4096)   # only its presence counts here
    out = subprocess.run([sys.executable, "-m", "spark_fuzz.jvmcds", "--dir", str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "already there" in out.stdout, out
