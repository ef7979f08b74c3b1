"""Class data sharing for the Spark driver's JVM, as tla/tlc.py does for TLC.

A Spark session's driver JVM loads and verifies thousands of classes from SPARK_HOME/jars before
it runs anything.  If it maps them from an archive written by an earlier session, it starts in
about half the time.  Measured on this 2-core machine (2026-11-26), local[2], C1 only, a 60-seed
campaign, each setting twice side by side:
- `getOrCreate`: 3.4 s -> 1.7 s wall;
- the JVM: 4.2-4.3 -> 2.2 CPU-s;
- the whole process tree: 6.8 -> 4.7 CPU-s.

The JVM writes an archive only when it exits (-XX:ArchiveClassesAtExit).  A pyspark driver's JVM
outlives the Python process, which cannot wait for it.  So the archive is made by a run of its own,
`python -m spark_fuzz.jvmcds` (`make setup` runs it). That run starts a session and runs a small
audited campaign, so the archive holds the classes a campaign loads. It then closes the JVM's
stdin (the JVM exits on that) and waits for it to finish.  The archive is written to a `.part`
file and renamed into place: a reader sees the whole file or none, which matters because a
truncated archive crashes the JVM at start-up (SIGBUS, seen here).

The archive's name is a hash of the java binary, the JDK's libjvm.so and every jar (path, size,
mtime); a new pyspark or JDK looks for a new name.  The JVM checks the archive against itself and
the class path too, and ignores one that does not match.  A session uses the archive only when it exists.  If the
JVM will not start with it, spark_session starts the session again without it; when that works,
the archive was the problem and is removed (campaign.spark_session).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

ARCHIVE_DIR = Path(__file__).resolve().parent.parent / ".ackorder" / "jvm"
MAKE_TIMEOUT_S = 300         # the archive-making session: about 16 s here
MAKER_SEEDS, MAKER_STEPS = 8, 100


def archive_path(cds_dir: Path | None = None) -> Path:
    """Where the archive for this java and this pyspark's jars lives (it may not exist)."""
    from spark_fuzz.standalone import JVM_OPTIONS, find_java, find_spark_home

    java = Path(os.path.realpath(find_java()))
    # the JDK's own files too: an update in place keeps java's path but not the archive's validity
    jdk = [java, *java.parent.parent.glob("lib/server/libjvm.so")]
    key = hashlib.sha256(JVM_OPTIONS.encode())
    for path in [*jdk, *sorted((find_spark_home() / "jars").iterdir())]:
        st = path.stat()
        key.update(f"|{path}|{st.st_size}|{st.st_mtime_ns}".encode())
    return (ARCHIVE_DIR if cds_dir is None else cds_dir) / f"spark-driver-{key.hexdigest()[:16]}.jsa"


def usable_archive(cds_dir: Path | None = None) -> Path | None:
    """The archive when there is one (None also when java or SPARK_HOME cannot be found: the
    session's own start-up then says what is missing)."""
    try:
        path = archive_path(cds_dir)
    except (OSError, RuntimeError):
        return None
    return path if path.is_file() else None


def driver_options(archive: Path | None) -> str:
    """The driver JVM's options: JVM_OPTIONS, and the archive when there is one.  A JVM that
    crashes on a damaged archive writes its crash report to the temp directory, not the cwd."""
    from spark_fuzz.standalone import JVM_OPTIONS

    if archive is None:
        return JVM_OPTIONS
    crash = Path(tempfile.gettempdir()) / "ackorder-spark-hs_err_%p.log"
    return f"{JVM_OPTIONS} -XX:SharedArchiveFile={archive} -XX:ErrorFile={crash}"


def discard(archive: Path, why: str) -> None:
    """Remove an archive the JVM would not start with; the next `make setup` makes a new one."""
    archive.unlink(missing_ok=True)
    print(f"ackorder: removed the Spark class-data archive {archive} ({why}); "
          "`make setup` makes a new one", file=sys.stderr)


def make_archive(cds_dir: Path | None = None) -> Path:
    """Write the archive (if there is none yet) by running one session and a small campaign in
    this process, then waiting for the JVM to exit.  Returns the archive's path; raises
    RuntimeError when the JVM wrote none.  Only in a process that has started no Spark JVM yet:
    pyspark would hand back that one, started without the option that makes it write."""
    from pyspark import SparkContext

    from spark_fuzz.campaign import CampaignSpec, run_campaign, spark_session
    from spark_fuzz.standalone import JVM_OPTIONS

    assert SparkContext._gateway is None, "make_archive needs a process with no Spark JVM yet"
    archive = archive_path(cds_dir)
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    part = archive.parent / f".{archive.name}.{os.getpid()}.part"
    try:
        options = f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={part} -Xlog:cds=off -Xlog:cds+dynamic=off"
        spark = spark_session("local[1]", {"spark.driver.extraJavaOptions": options})
        jvm = spark.sparkContext._gateway.proc
        with tempfile.TemporaryDirectory(prefix="ackorder-jvmcds-") as out:
            run_campaign(spark, CampaignSpec(seeds=MAKER_SEEDS, steps=MAKER_STEPS, out=Path(out)))
        spark.stop()
        jvm.stdin.close()                    # pyspark's JVM exits when its stdin closes
        returncode = jvm.wait(timeout=MAKE_TIMEOUT_S)
        if returncode != 0 or not part.is_file() or part.stat().st_size == 0:
            raise RuntimeError(f"the JVM exited with {returncode} and wrote no archive")
        os.replace(part, archive)
        for stale in archive.parent.glob("spark-driver-*.jsa"):   # for another JDK or pyspark: 111 MiB each
            if stale != archive:
                stale.unlink(missing_ok=True)
        return archive
    finally:
        # A JVM still running after a failure would write the archive once this process is gone.
        gateway = SparkContext._gateway
        if gateway is not None and gateway.proc.poll() is None:
            gateway.proc.kill()
            gateway.proc.wait()
        part.unlink(missing_ok=True)


@contextlib.contextmanager
def _output_to(log: Path):
    """File descriptors 1 and 2 (and so every child's) go to ``log`` within."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(log, "wb") as fh:
            os.dup2(fh.fileno(), 1)
            os.dup2(fh.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def main(argv: list[str] | None = None) -> int:
    """`python -m spark_fuzz.jvmcds`: make the archive.  Exit 0 when it exists, 3 when it could
    not be made (sessions then start without it)."""
    p = argparse.ArgumentParser(prog="python -m spark_fuzz.jvmcds",
                                description="Make the Spark driver's class-data-sharing archive.")
    p.add_argument("--dir", type=Path, default=None, help=f"where archives live (default {ARCHIVE_DIR})")
    args = p.parse_args(argv)
    start = time.perf_counter()
    log = Path(tempfile.gettempdir()) / "ackorder-jvmcds.log"
    logged = False
    try:
        archive = archive_path(args.dir)        # no java or no SPARK_HOME: said here, in one line
        existed = archive.is_file()
        if not existed:
            logged = True
            with _output_to(log):              # Spark's and the JVM's chatter (they inherit fds 1 and 2)
                make_archive(args.dir)
    except Exception as err:          # an environment that cannot run Spark: sessions go without
        first = (str(err).strip().splitlines() or [""])[0]
        print(f"spark_fuzz.jvmcds: no archive made ({type(err).__name__}: {first})"
              + (f"; Spark's output is in {log}" if logged else ""), file=sys.stderr)
        return 3
    how = "already there" if existed else f"made in {time.perf_counter() - start:.1f} s"
    print(f"Spark driver class-data archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB, {how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
