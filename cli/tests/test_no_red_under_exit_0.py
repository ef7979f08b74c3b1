"""Red is for what makes the exit code 1 (cli/ui.py): a --bug run that found its bug as its model
says, and a coverage gap, exit 0 and are shown in yellow.  Each command runs with FORCE_COLOR, so
its styles reach the output as ANSI codes, and its output is searched for red."""

from __future__ import annotations

import re

from cli import errors
from cli.tests.test_exit_codes import ackorder

COLOUR = {"FORCE_COLOR": "1"}
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def reds(text: str) -> list[str]:
    """The SGR sequences in ``text`` that turn the foreground red (31) or bright red (91)."""
    return [m.group(0) for m in SGR.finditer(text) if {"31", "91"} & set(m.group(1).split(";"))]


def test_the_detector_sees_red_where_the_exit_code_is_1():
    p = ackorder("sim", "--seed", "1", "--steps", "400", "--bug", "BugAckOnWrote", env=COLOUR)
    assert p.returncode == errors.VIOLATION and reds(p.stdout), p.stdout


def test_a_stateful_bug_hunt_that_catches_its_bug_prints_no_red():
    p = ackorder("stateful", "--bug", "BugAckOnWrote", env=COLOUR, timeout=600)
    assert p.returncode == errors.OK, p.stdout + p.stderr
    assert not reds(p.stdout + p.stderr) and "failed: NoAckBeforeFlush" in p.stdout, p.stdout


def test_coverage_gaps_print_no_red(tmp_path):
    trace = tmp_path / "t.ndjson"
    assert ackorder("sim", "--seed", "1", "--steps", "60", "--trace", str(trace)).returncode == errors.OK
    p = ackorder("trace-check", str(trace), "--twin", "--coverage", env=COLOUR)
    assert p.returncode == errors.OK, p.stdout + p.stderr
    assert "unreached" in p.stdout and not reds(p.stdout + p.stderr), p.stdout
