"""CrossHair over the reference's pure decision functions (their PEP 316
contracts), as `make test` runs it.  What CrossHair can only report as "Not
confirmed" (loops over lists, sorting, struct parsing) is covered by the
tests docs/proofs.md names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TARGETS = ("reference.decisions", "reference.frames.decode_frames", "reference.record.scan_segment")
# The seeded wrong functions (reference/tests/contract_bugs.py) are each caught within 1 s per
# condition on a fast day (4 s: 60 s for the five, 1 s: 22 s, load 4-6), but a 2 s budget missed two of
# them on 2026-11-28, a day this machine ran the whole suite at half its speed.  A wrong function's
# search stops at its counterexample, so a longer budget costs only when one is missed: 8 s.
SEEDED_PER_CONDITION_TIMEOUT_S = 8
# The correct functions get 2 s per condition in `make test` (no counterexample may be found), and a
# search fifteen times as long in `make run --full`.
PER_CONDITION_TIMEOUT_S = 2
DEEP_PER_CONDITION_TIMEOUT_S = 30
CONDITION = re.compile(r"^\s*(pre|post|inv)(\[[^\]]*\])?:", re.M)
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<what>.*?) when calling (?P<call>(?P<fn>\w+)\(.*)$")


def crosshair(targets: tuple[str, ...], report_all: bool = False, timeout_s: int = PER_CONDITION_TIMEOUT_S,
              extra_path: Path | None = None) -> tuple[int, list[str]]:
    """Run `crosshair check`; returns its exit code and output lines."""
    import os

    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "crosshair", "check", "--analysis_kind=PEP316",
           f"--per_condition_timeout={timeout_s}", *(["--report_all"] if report_all else []), *targets]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800,
                         cwd=Path(__file__).resolve().parent.parent)
    return out.returncode, (out.stdout + out.stderr).splitlines()


def contract_targets(targets: tuple[str, ...] = TARGETS) -> list[str]:
    """``targets`` with each module replaced by its functions and classes that carry PEP 316
    conditions: what `crosshair check` of the module checks, one target each (a test each, so
    pytest-xdist workers share them)."""
    import importlib
    import inspect

    out = []
    for target in targets:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError:
            out.append(target)                 # already a function: module.function
            continue
        found = [f"{target}.{name}" for name, member in vars(module).items()
                 if (inspect.isfunction(member) or inspect.isclass(member)) and member.__module__ == target
                 and CONDITION.search(inspect.getdoc(member) or "")]
        assert found, f"{target}: no function with PEP 316 conditions"
        out += found
    return out


def errors(lines: list[str]) -> dict[str, str]:
    """Function name -> the counterexample CrossHair printed for it."""
    found = {}
    for line in lines:
        if (m := ERROR.match(line.strip())) and "Error while evaluating" not in line:   # not a broken contract
            found.setdefault(m.group("fn"), f"{m.group('what')} when calling {m.group('call')}")
    return found


def seeded_module(directory: Path) -> str:
    """reference/tests/contract_bugs.py with each ``CONTRACT OF f`` docstring
    replaced by f's real contract; returns the module name to check."""
    import inspect

    from reference import decisions, frames, record

    real = {f.__name__: f for f in (decisions.replica_coverage, decisions.covered_count, decisions.deadline_status,
                                    frames.decode_frames, record.scan_segment)}
    source = (Path(__file__).parent / "tests" / "contract_bugs.py").read_text()

    def contract(m: re.Match) -> str:
        doc = inspect.getdoc(real[m.group(1)]).replace("\\", "\\\\")
        return '    """' + "\n".join("    " + line if line else "" for line in doc.splitlines()).lstrip() + '\n    """'

    text, n = re.subn(r'    """CONTRACT OF (\w+)"""', contract, source)
    assert n == len(real), f"expected {len(real)} CONTRACT OF docstrings, found {n}"
    (directory / "seeded_contract_bugs.py").write_text(text)
    return "seeded_contract_bugs"
