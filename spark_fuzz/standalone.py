"""Start and stop a *real* Spark standalone cluster on 127.0.0.1.

Why this exists
---------------
``local[*]`` mode runs the driver and the executors in one JVM, so it can
never show what happens when an executor's machine dies, when a worker is
lost mid-job, or when data must cross a process boundary.  A standalone
cluster (one master, N workers, executors as separate JVMs) can, and it is
the cheapest real cluster there is: no YARN, no Kubernetes, no Docker.

The pip ``pyspark`` package ships the jars and ``bin/spark-class`` but not
``sbin/start-master.sh`` / ``sbin/start-worker.sh``.  Those scripts are only
thin wrappers around ``spark-class <MainClass>`` that daemonise the JVM and
write a pid file.  We do the same thing ourselves with ``subprocess.Popen``,
which gives us what the sbin scripts would hide: the exact pid of every JVM,
its log file, and a process group we can kill as a unit.

Process model
-------------
Every daemon (master, each worker) is started with ``start_new_session=True``,
so it leads its own process group.  ``spark-class`` ``exec``s the JVM, so the
pid we get from ``Popen`` *is* the JVM's pid and the group id.  Executors
(started by a worker) and their Python daemons inherit the worker's group,
so killing the group kills the whole "machine" -- which is exactly what
``kill_worker`` is for.

Nothing here downloads anything: SPARK_HOME is the installed ``pyspark``
package directory, and ``java`` must already be on PATH (or JAVA_HOME set).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from spec.config import ascii_digits

__all__ = [
    "ClusterStartError",
    "StandaloneCluster",
    "find_spark_home",
    "find_java",
    "free_port",
    "session_builder_conf",
    "spark_env",
]

#: Every daemon binds here.  Loopback only: nothing is exposed to the network,
#: and the hostname never has to resolve.
LOCALHOST = "127.0.0.1"

#: Log lines that mean "ready".  These are what Spark itself prints; they have
#: been stable across Spark 3.x and 4.x.
MASTER_READY_LINE = "I have been elected leader! New state: ALIVE"
WORKER_READY_LINE = "Successfully registered with master"

_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

#: How many bytes of a log to quote in an error message.
_LOG_TAIL_BYTES = 4000
#: How often to re-read a log (or /proc) while waiting for something.
_POLL_INTERVAL_S = 0.1
#: Upper bound on waiting for SIGKILLed group members to vanish.
_SWEEP_TIMEOUT_S = 10.0


class ClusterStartError(RuntimeError):
    """A daemon did not become ready (timed out or exited); carries its log tail."""


# ---------------------------------------------------------------------------
# Environment discovery
# ---------------------------------------------------------------------------


def find_spark_home() -> Path:
    """Return the directory of the installed ``pyspark`` package.

    For a pip install that directory *is* a SPARK_HOME (it has ``bin/`` and
    ``jars/``).  We locate it with ``importlib`` instead of importing pyspark,
    so that merely starting a cluster does not pull pyspark into this process.
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterStartError("pyspark is not installed in this interpreter")
    home = Path(spec.origin).resolve().parent
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise ClusterStartError(
            f"{home} does not look like a SPARK_HOME (no bin/spark-class or jars/)"
        )
    return home


def find_java() -> str:
    """Return the java executable ``spark-class`` will use, or fail clearly.

    Mirrors ``spark-class``: JAVA_HOME wins, else ``java`` on PATH.  Checking
    up front turns a cryptic "JAVA_HOME is not set" buried in a log into an
    immediate, readable error.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
        raise ClusterStartError(f"JAVA_HOME={java_home} but {candidate} is not executable")
    found = shutil.which("java")
    if found is None:
        raise ClusterStartError(
            "java was not found on PATH (and JAVA_HOME is not set); "
            "Spark needs a JDK (17 or newer for Spark 4) to run"
        )
    return found


def free_port() -> int:
    """Ask the kernel for a currently unused TCP port on 127.0.0.1.

    There is a small window between closing this socket and the JVM binding
    the port, but it is far better than a fixed 7077, which makes two runs
    on one machine (parallel CI jobs, pytest-xdist) collide for certain.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        return int(sock.getsockname()[1])


def spark_env() -> dict[str, str]:
    """Environment variables a *driver* needs to talk to this cluster.

    - SPARK_HOME: pyspark launches its gateway JVM from here.
    - SPARK_LOCAL_IP: keeps the driver off whatever the hostname resolves to.
    - PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON: executors must run Python UDFs
      with *this* interpreter (same version, same installed packages);
      otherwise they pick whatever ``python3`` is on PATH.
    """
    return {
        "SPARK_HOME": str(find_spark_home()),
        "SPARK_LOCAL_IP": LOCALHOST,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


# Spark's JVMs here only schedule: the seeds run in Python workers, which write their rows to Parquet
# themselves.  For such a JVM the C2 compiler's work costs more CPU than it ever saves.  Measured side
# by side on this 2-core machine (2026-11-26), a local[2] session that ran a 2,000-seed campaign:
# the JVM used 8.0-8.4 CPU-s with the default tiered JIT and 4.4-4.5 with C1 alone, and the
# campaign's wall time was 28.3-28.7 s against 27.7-27.9 s.  A `--conf` of the same key replaces it.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def jvm_conf() -> dict[str, str]:
    """The driver's and the executors' JVM options (JVM_OPTIONS)."""
    return {"spark.driver.extraJavaOptions": JVM_OPTIONS, "spark.executor.extraJavaOptions": JVM_OPTIONS}


def session_builder_conf() -> dict[str, str]:
    """Spark conf for a driver session against a loopback cluster.

    No UI (one fewer port to collide on, less startup time), no console
    progress bar (it garbles test output), and the driver explicitly bound
    to loopback so executors can connect back to it.
    """
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": LOCALHOST,
        "spark.driver.bindAddress": LOCALHOST,
    }


# ---------------------------------------------------------------------------
# Process helpers
# ---------------------------------------------------------------------------


@dataclass
class _Daemon:
    """One JVM we started: its Popen handle, its role and where it logs."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid


def _log_tail(path: Path, max_bytes: int = _LOG_TAIL_BYTES) -> str:
    """The last ``max_bytes`` of a log, for error messages."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            tail = fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"<could not read {path}: {exc}>"
    return tail if tail.strip() else "<log is empty: the JVM had not logged anything yet>"


def _wait_for_line(daemon: _Daemon, line: str, timeout_s: float) -> float:
    """Block until ``line`` appears in the daemon's log; return seconds waited.

    Fails fast if the process exits (e.g. port already taken) instead of
    sitting out the whole timeout.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    needle = line.encode()
    while True:
        try:
            if needle in daemon.log_path.read_bytes():
                return time.monotonic() - start
        except FileNotFoundError:
            pass
        code = daemon.proc.poll()
        if code is not None:
            raise ClusterStartError(
                f"{daemon.name} (pid {daemon.pid}) exited with code {code} before "
                f"logging {line!r}. Log {daemon.log_path} ends with:\n"
                f"{_log_tail(daemon.log_path)}"
            )
        if time.monotonic() >= deadline:
            raise ClusterStartError(
                f"{daemon.name} (pid {daemon.pid}) did not log {line!r} within "
                f"{timeout_s:.0f} s. Log {daemon.log_path} ends with:\n"
                f"{_log_tail(daemon.log_path)}"
            )
        time.sleep(_POLL_INTERVAL_S)


def _killpg(pgid: int, sig: signal.Signals) -> None:
    """Signal a process group; a group that is already gone is not an error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        # Gone already, or (PermissionError) the id now belongs to someone
        # else's process -- which _stop_daemon is careful to prevent.
        pass


@dataclass(frozen=True)
class _ProcInfo:
    state: str  # one letter, "Z" for a zombie
    ppid: int
    pgid: int
    start_ticks: int  # start time since boot, in clock ticks


def _proc_table() -> dict[int, _ProcInfo]:
    """Map pid -> its /proc/<pid>/stat facts, for every process.

    The start time identifies a process across pid reuse: a pid with a
    different start time is a different process.
    """
    table: dict[int, _ProcInfo] = {}
    for entry in os.listdir("/proc"):
        if not ascii_digits(entry):
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # exited while we were looking
        # The command name (field 2) may contain spaces and ')', so split
        # after its *last* ')'.  Then: state ppid pgrp session ... starttime.
        fields = raw[raw.rindex(")") + 2 :].split()
        table[int(entry)] = _ProcInfo(
            state=fields[0],
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            start_ticks=int(fields[19]),
        )
    return table


def _descendants(pid: int) -> dict[int, int]:
    """All current descendants of ``pid`` as {pid: start time}."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for child, info in table.items():
        children.setdefault(info.ppid, []).append(child)
    found: dict[int, int] = {}
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found[p] = table[p].start_ticks
        todo.extend(children.get(p, []))
    return found


def _still_running(snapshot: dict[int, int]) -> dict[int, int]:
    """The subset of a {pid: start time} snapshot that is still the same, live process."""
    table = _proc_table()
    return {
        p: t
        for p, t in snapshot.items()
        if p in table and table[p].start_ticks == t and table[p].state != "Z"
    }


def _live_group_members(pgid: int) -> list[int]:
    """Non-zombie processes whose process group is ``pgid``."""
    return [p for p, i in _proc_table().items() if i.pgid == pgid and i.state != "Z"]


def _exited_unreaped(pid: int) -> bool:
    """True once child ``pid`` has exited, *without* reaping it.

    ``WNOWAIT`` leaves the child a zombie.  While the zombie exists its pid --
    which is also our process-group id -- cannot be handed to a new process,
    so a following ``killpg`` can only hit processes of *our* group (e.g. an
    executor that outlived its worker), never a stranger.
    """
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # already reaped
    return info is not None


def _stop_daemon(
    daemon: _Daemon,
    sig: signal.Signals | None,
    grace_s: float,
    escapees: dict[int, int] | None = None,
) -> None:
    """Signal the daemon's group, escalate to SIGKILL after ``grace_s``, reap.

    SIGTERM first lets the JVM run its shutdown hooks (a worker kills its
    executors, the master closes its sockets); SIGKILL is the backstop.
    ``sig=None`` means "already signalled, just wait and clean up".

    Two kinds of leftovers are handled:

    - group members that outlive the leader (an executor JVM): a group-wide
      SIGKILL sent while the leader is still an unreaped zombie;
    - descendants that *left* the group: pyspark's ``daemon.py`` (the Python
      worker factory an executor forks) calls ``setpgid(0, 0)``.  It exits
      by itself once the executor's pipe closes, but we do not rely on that:
      ``escapees`` (a ``_descendants`` snapshot taken *before* any signal,
      while they were still our descendants) are killed if still alive.
    """
    if daemon.proc.returncode is not None:
        return  # already reaped earlier (e.g. by kill_worker)
    pgid = daemon.pid  # start_new_session=True => the leader's pid is the pgid
    if escapees is None:
        escapees = _descendants(daemon.pid)
    if sig is not None:
        _killpg(pgid, sig)
    deadline = time.monotonic() + grace_s
    escalated = sig == signal.SIGKILL
    while not _exited_unreaped(daemon.pid):
        if not escalated and time.monotonic() >= deadline:
            _killpg(pgid, signal.SIGKILL)
            escalated = True
        time.sleep(_POLL_INTERVAL_S)
    # Sweep stragglers while the leader's pid is still pinned, and wait for
    # them to actually die: SIGKILL is asynchronous, and tearing down a JVM
    # with a big heap takes a moment.  Bounded, in case one is stuck in D
    # state; we never block stop() forever.
    _killpg(pgid, signal.SIGKILL)
    sweep_deadline = time.monotonic() + _SWEEP_TIMEOUT_S
    while _live_group_members(pgid) and time.monotonic() < sweep_deadline:
        time.sleep(_POLL_INTERVAL_S)
    daemon.proc.wait()  # reap: now, and only now, the pid may be reused

    # Escaped descendants: let them use what is left of the grace period to
    # notice their parent is gone, then SIGKILL whatever is still the same
    # process (same pid *and* start time, so never a recycled pid).
    escapees = _still_running(escapees)
    while escapees and time.monotonic() < deadline:
        time.sleep(_POLL_INTERVAL_S)
        escapees = _still_running(escapees)
    for pid in escapees:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    sweep_deadline = time.monotonic() + _SWEEP_TIMEOUT_S
    while escapees and time.monotonic() < sweep_deadline:
        time.sleep(_POLL_INTERVAL_S)
        escapees = _still_running(escapees)


# ---------------------------------------------------------------------------
# The cluster
# ---------------------------------------------------------------------------


class StandaloneCluster:
    """A master plus ``workers`` workers, all JVMs on 127.0.0.1.

    Use as a context manager::

        with StandaloneCluster(workers=2) as cluster:
            spark = (SparkSession.builder.master(cluster.url)
                     .config(map=session_builder_conf()).getOrCreate())
            ...
            cluster.kill_worker(0)   # a whole "machine" dies

    Everything started is recorded (``all_pids``) and ``stop()`` -- also run
    by ``__exit__`` on error and at interpreter exit as a last resort --
    terminates it and removes the temporary directory.
    """

    def __init__(
        self,
        workers: int = 2,
        cores_per_worker: int = 1,
        memory: str = "1g",
        log_dir: Path | None = None,
        *,
        start_timeout_s: float = 60.0,
        stop_grace_s: float = 5.0,
    ) -> None:
        """Configure (but do not start) the cluster.

        ``memory`` is what each worker offers to executors (Spark syntax,
        e.g. ``"1g"``); executor requests above it are never scheduled.
        ``log_dir`` keeps the daemon logs after ``stop()``; by default they
        live in the temporary directory and vanish with it.
        """
        if workers < 1:
            raise ValueError("a cluster needs at least one worker")
        if cores_per_worker < 1:
            raise ValueError("cores_per_worker must be >= 1")
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory = memory
        self.start_timeout_s = start_timeout_s
        self.stop_grace_s = stop_grace_s
        self._requested_log_dir = Path(log_dir) if log_dir is not None else None

        self._tmp_dir: Path | None = None
        self._log_dir: Path | None = None
        self._master: _Daemon | None = None
        self._workers: list[_Daemon] = []
        self._all_pids: list[int] = []
        self._master_port: int | None = None
        self._master_webui_port: int | None = None
        self._worker_webui_ports: list[int] = []
        self._stopped = False
        #: Seconds from ``start()`` until every worker was registered.
        self.start_duration_s: float | None = None

    # -- context manager ----------------------------------------------------

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- public API -----------------------------------------------------------

    @property
    def url(self) -> str:
        """The master URL to hand to ``SparkSession.builder.master``."""
        if self._master_port is None:
            raise RuntimeError("cluster not started")
        return f"spark://{LOCALHOST}:{self._master_port}"

    @property
    def master_pid(self) -> int:
        if self._master is None:
            raise RuntimeError("cluster not started")
        return self._master.pid

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the worker JVMs, in worker index order (killed ones included)."""
        return [w.pid for w in self._workers]

    @property
    def all_pids(self) -> list[int]:
        """Every pid this object ever started (each is also a process-group id)."""
        return list(self._all_pids)

    @property
    def tmp_dir(self) -> Path:
        """Holds worker work/local dirs (and logs unless ``log_dir`` was given).

        Removed by ``stop()``.
        """
        if self._tmp_dir is None:
            raise RuntimeError("cluster not started")
        return self._tmp_dir

    @property
    def log_dir(self) -> Path:
        if self._log_dir is None:
            raise RuntimeError("cluster not started")
        return self._log_dir

    @property
    def master_log(self) -> Path:
        if self._master is None:
            raise RuntimeError("cluster not started")
        return self._master.log_path

    @property
    def worker_logs(self) -> list[Path]:
        return [w.log_path for w in self._workers]

    def spark_env(self) -> dict[str, str]:
        """Env vars a driver needs for this cluster (see module-level ``spark_env``)."""
        return spark_env()

    def start(self) -> None:
        """Start the master, then all workers; return once all are registered.

        Workers are launched together and then awaited one by one: JVM
        startup dominates, so overlapping it saves seconds per worker.
        On any failure everything already started is stopped before raising.
        """
        if self._master is not None or self._stopped:
            raise RuntimeError("a StandaloneCluster can be started only once")
        find_java()  # fail with a clear message before spawning anything
        spark_home = find_spark_home()
        started_at = time.monotonic()
        self._tmp_dir = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
        self._log_dir = self._requested_log_dir or (self._tmp_dir / "logs")
        self._log_dir.mkdir(parents=True, exist_ok=True)
        # Registered only now: a last-resort cleanup if the caller forgets
        # stop() or the interpreter exits on an unhandled error.
        atexit.register(self.stop)
        try:
            self._master_port = free_port()
            self._master_webui_port = free_port()
            self._master = self._spawn(
                "master",
                spark_home,
                [
                    _MASTER_CLASS,
                    "--host", LOCALHOST,
                    "--port", str(self._master_port),
                    "--webui-port", str(self._master_webui_port),
                ],
                extra_env={
                    # The REST submission server would grab another fixed
                    # port (6066); we never submit through it.
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
                },
            )
            _wait_for_line(self._master, MASTER_READY_LINE, self.start_timeout_s)

            for i in range(self.workers):
                webui_port = free_port()
                self._worker_webui_ports.append(webui_port)
                work_dir = self._tmp_dir / f"worker-{i}" / "work"
                local_dir = self._tmp_dir / f"worker-{i}" / "local"
                work_dir.mkdir(parents=True)
                local_dir.mkdir(parents=True)
                self._workers.append(
                    self._spawn(
                        f"worker-{i}",
                        spark_home,
                        [
                            _WORKER_CLASS,
                            self.url,
                            "--host", LOCALHOST,
                            "--cores", str(self.cores_per_worker),
                            "--memory", self.memory,
                            "--webui-port", str(webui_port),
                            "--work-dir", str(work_dir),
                        ],
                        # Executors' shuffle/block files go here instead of
                        # /tmp, so stop() removes them with the temp dir.
                        extra_env={"SPARK_LOCAL_DIRS": str(local_dir)},
                    )
                )
            for worker in self._workers:
                _wait_for_line(worker, WORKER_READY_LINE, self.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.start_duration_s = time.monotonic() - started_at

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i``'s whole process group and wait until it is gone.

        The group holds the worker JVM *and* the executor JVMs it launched;
        the executors' Python daemons (which left the group) are killed too.
        So this behaves like the machine losing power: no shutdown hooks, no
        goodbye to the master, running tasks just vanish.  The worker stays
        in ``worker_pids`` (its index does not shift); it is not restarted.
        """
        _stop_daemon(self._workers[i], signal.SIGKILL, grace_s=0.0)

    def stop(self) -> None:
        """Terminate every process started, then remove the temp dir.

        Idempotent and safe after a partial ``start()``.  All daemons get
        SIGTERM at once so their JVM shutdowns overlap (total time is one
        grace period, not one per daemon); the master is reaped last.
        """
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        daemons = list(self._workers)
        if self._master is not None:
            daemons.append(self._master)
        errors: list[BaseException] = []
        # Snapshot descendants before any signal: once an executor dies its
        # Python daemon is re-parented to init and no longer traceable.
        escapees = {
            d.pid: _descendants(d.pid) for d in daemons if d.proc.returncode is None
        }
        # SIGTERM everyone first so JVM shutdowns overlap, then wait for each.
        for daemon in daemons:
            if daemon.proc.returncode is None:
                _killpg(daemon.pid, signal.SIGTERM)
        for daemon in daemons:
            try:
                _stop_daemon(daemon, None, self.stop_grace_s, escapees.get(daemon.pid))
            except BaseException as exc:  # keep stopping the others
                errors.append(exc)
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
        if errors:
            raise errors[0]

    # -- internals -------------------------------------------------------------

    def _spawn(
        self,
        name: str,
        spark_home: Path,
        args: list[str],
        extra_env: dict[str, str] | None = None,
    ) -> _Daemon:
        """Launch ``spark-class <args>`` as a new session, logging to a file."""
        assert self._log_dir is not None
        log_path = self._log_dir / f"{name}.log"
        env = dict(os.environ)
        env.update(spark_env())
        # A user's SPARK_CONF_DIR (spark-defaults, log4j2 with WARN level)
        # could hide the "ready" lines we wait for; use Spark's defaults.
        env.pop("SPARK_CONF_DIR", None)
        # The master's and workers' own JVMs only schedule too (see JVM_OPTIONS).
        env["SPARK_DAEMON_JAVA_OPTS"] = f"{env.get('SPARK_DAEMON_JAVA_OPTS', '')} {JVM_OPTIONS}".strip()
        if extra_env:
            env.update(extra_env)
        with log_path.open("wb") as log_fh:
            proc = subprocess.Popen(
                [str(spark_home / "bin" / "spark-class"), *args],
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self._tmp_dir,
                start_new_session=True,
            )
        # The child holds its own copy of the fd; ours can close at once.
        self._all_pids.append(proc.pid)
        return _Daemon(name=name, proc=proc, log_path=log_path)

