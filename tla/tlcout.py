"""Parser for TLC's ``-tool`` output: tagged messages, not prose.

TLC 2.15 wraps each message in ``@!@!@STARTMSG code:severity @!@!@`` ...
``@!@!@ENDMSG code @!@!@`` (messages can nest); SANY's parse and semantic
errors arrive as untagged text.  ``ToolOutput`` feeds on lines as TLC
writes them, so a caller can show progress while TLC runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

# Message codes of tlc2.output.EC / MP that the runner reads.
SUCCESS = 2193
INVARIANT_VIOLATED_INITIAL = 2107
INVARIANT_VIOLATED_BEHAVIOR = 2110
ACTION_PROPERTY_VIOLATED = 2112
TEMPORAL_VIOLATED = 2116
DEADLOCK = 2114
STATE_PRINT = 2217
STATE_STUTTERING = 2218
BACK_TO_STATE = 2122
STATS = 2199
SEARCH_DEPTH = 2194
PROGRESS = 2200
PARSE_FAILED = 3002
WRONG_COMMAND_LINE = 1102  # TLC refused its options (an unknown one passed after `--`, say)
ERROR_SEVERITY = 1
INIT_START = 2189            # "Computing initial states...": the check itself begins (BFS)
SIMULATION_INIT = 2269       # "Computed N initial states..." (random simulation)
SIMULATION_MODE = 2188       # "Running Random Simulation with seed ..."
FINISHED = 2186              # "Finished in ...": every run that ends by itself

_START = re.compile(r"@!@!@STARTMSG (\d+):(\d+) @!@!@")
_END = re.compile(r"@!@!@ENDMSG (\d+) @!@!@")
_VIOLATED = re.compile(r"(?:Invariant|Action property) (\S+) is violated")
_STATS = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found, ([\d,]+) states left on queue")
_PROGRESS = re.compile(r"([\d,]+) (?:states generated|distinct states found|states left on queue)")
_DEPTH = re.compile(r"depth of the complete state graph search is (\d+)")
_STATE_HEAD = re.compile(r"^(\d+): <(.*)>\s*$")
_STUTTER_HEAD = re.compile(r"^(\d+): (Stuttering|Back to state.*?)\.?\s*$")
_ACTION_NAME = re.compile(r"^(\S+) line \d+, col \d+ to line \d+, col \d+ of module \S+$")
_PARSING = re.compile(r"^Parsing file (\S+)")
_SANY_LOCATION = re.compile(r"line (\d+), col(?:umn)? (\d+)(?: to line \d+, col \d+)? of module (\w+)")
_PARSE_LOCATION = re.compile(r"at line (\d+), column (\d+)")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


@attrs.frozen
class Message:
    code: int
    severity: int
    text: str


@attrs.frozen
class TraceState:
    number: int
    action: str                    # "Init", an action name, "Stuttering", or "Back to state N"
    assignments: tuple[tuple[str, str], ...]  # (variable, value as TLC printed it)

    def as_dict(self) -> dict[str, str]:
        return dict(self.assignments)


def action_name(header: str) -> str:
    """'AO!Flush line 36, col 1 ... of module MCAckOrder' -> 'Flush'."""
    if header == "Initial predicate":
        return "Init"
    m = _ACTION_NAME.match(header)
    name = m.group(1) if m else header
    name = name.split("!")[-1]
    if name.startswith("MC") and name[2:3].isupper():
        name = name[2:]  # bounded wrappers (MCPut) are the spec's actions
    return name


def _parse_state(msg: Message) -> TraceState:
    lines = msg.text.strip("\n").split("\n")
    head = _STATE_HEAD.match(lines[0])
    if head is None:
        other = _STUTTER_HEAD.match(lines[0])
        number, action = (int(other.group(1)), other.group(2)) if other else (0, lines[0].strip())
        if action.startswith("Back to state"):
            action = f"Back to state {number}"
    else:
        number, action = int(head.group(1)), action_name(head.group(2))
    assignments: list[tuple[str, str]] = []
    single = not any(line.startswith("/\\ ") for line in lines[1:])  # one-variable specs omit "/\\"
    for line in lines[1:]:
        if single and not assignments and re.match(r"^\w+ = ", line):
            line = "/\\ " + line
        if line.startswith("/\\ ") and " = " in line:
            name, value = line[3:].split(" = ", 1)
            assignments.append((name.strip(), value.strip()))
        elif assignments and line.strip():
            name, value = assignments[-1]
            assignments[-1] = (name, value + " " + line.strip())
    return TraceState(number, action, tuple(assignments))


@attrs.define
class ToolOutput:
    """Accumulates TLC -tool output and answers what happened."""

    on_progress: Callable[[int, int, int], None] | None = None  # (generated, distinct, queue)
    messages: list[Message] = attrs.Factory(list)
    seen_codes: set[int] = attrs.Factory(set)
    untagged: list[str] = attrs.Factory(list)
    _stack: list[list] = attrs.Factory(list)

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        pos = 0
        while pos <= len(line):
            start, end = _START.search(line, pos), _END.search(line, pos)
            nxt = min((m for m in (start, end) if m), key=lambda m: m.start(), default=None)
            chunk = line[pos: nxt.start() if nxt else len(line)]
            if chunk or nxt is None:
                self._text(chunk, newline=nxt is None)
            if nxt is None:
                return
            if nxt is start:
                self._stack.append([int(start.group(1)), int(start.group(2)), []])
            elif self._stack:
                code, severity, parts = self._stack.pop()
                self._finish(Message(code, severity, "\n".join(parts).strip("\n")))
            pos = nxt.end()

    def _text(self, chunk: str, newline: bool) -> None:
        if self._stack:
            self._stack[-1][2].append(chunk)
        elif chunk.strip():
            self.untagged.append(chunk)

    def _finish(self, msg: Message) -> None:
        self.messages.append(msg)
        self.seen_codes.add(msg.code)
        if msg.code == PROGRESS and self.on_progress:
            nums = _PROGRESS.findall(msg.text)
            if len(nums) == 3:
                self.on_progress(*(_int(n) for n in nums))

    # --- what the run says ------------------------------------------------

    def codes(self) -> set[int]:
        return self.seen_codes

    def first(self, *codes: int) -> Message | None:
        return next((m for m in self.messages if m.code in codes), None)

    def simulation_finished(self) -> bool:
        """A random simulation that ran to its end: TLC prints no success message for it."""
        codes = self.codes()
        return SIMULATION_MODE in codes and FINISHED in codes and not any(
            m.severity == ERROR_SEVERITY for m in self.messages)

    def stats(self) -> tuple[int | None, int | None]:
        """(generated, distinct) from the last statistics message."""
        msg = next((m for m in reversed(self.messages) if m.code == STATS), None)
        if msg is None or not (m := _STATS.search(msg.text)):
            return None, None
        return _int(m.group(1)), _int(m.group(2))

    def search_depth(self) -> int | None:
        msg = next((m for m in reversed(self.messages) if m.code == SEARCH_DEPTH), None)
        if msg and (m := _DEPTH.search(msg.text)):
            return int(m.group(1))
        return None

    def trace(self) -> list[TraceState]:
        states = []
        for msg in self.messages:
            if msg.code in (STATE_PRINT, STATE_STUTTERING):
                states.append(_parse_state(msg))
            elif msg.code == BACK_TO_STATE:
                states.append(_parse_state(msg))
        return states

    def violated_property(self) -> str | None:
        """The property TLC reports as violated, by its MC-module name."""
        msg = self.first(INVARIANT_VIOLATED_INITIAL, INVARIANT_VIOLATED_BEHAVIOR, ACTION_PROPERTY_VIOLATED)
        if msg and (m := _VIOLATED.search(msg.text)):
            return m.group(1).split("!")[-1]
        return None

    def errors(self) -> list[str]:
        """Human-readable errors: TLC's error messages and SANY's, with places."""
        out = [m.text for m in self.messages if m.severity == ERROR_SEVERITY
               and m.code not in (INVARIANT_VIOLATED_INITIAL, INVARIANT_VIOLATED_BEHAVIOR,
                                  ACTION_PROPERTY_VIOLATED, TEMPORAL_VIOLATED, PARSE_FAILED,
                                  STATE_PRINT, BACK_TO_STATE, STATE_STUTTERING)
               and not m.text.startswith(("The behavior up to this point", "The following behavior"))]
        if PARSE_FAILED in self.codes():
            out.insert(0, self.sany_error())
        return [e for e in out if e]

    def input_problem(self, own_spec: bool) -> str | None:
        """What in the user's input TLC refused, when that is why it gave no verdict: its command
        line (options passed through), or, for the user's own spec (``own_spec``), a module that
        does not parse.  None otherwise (a parse error in the project's own spec is its defect)."""
        if (msg := self.first(WRONG_COMMAND_LINE)) is not None:
            return msg.text.splitlines()[0]
        if own_spec and PARSE_FAILED in self.codes():
            return self.sany_error() or "the spec does not parse"
        return None

    def printed(self) -> list[str]:
        """Values the spec printed (PrintT), one entry each; TLC breaks a long value over
        indented lines, which are joined back."""
        out: list[str] = []
        for line in self.untagged:
            if line[:1].isspace() and out:
                out[-1] += " " + line.strip()
            else:
                out.append(line.strip())
        return out

    def sany_error(self) -> str:
        """SANY's complaint with the .tla file and line it points at."""
        files: dict[str, str] = {}
        current = None
        problem: list[str] = []
        for line in self.untagged:
            if m := _PARSING.match(line):
                current = m.group(1)
                files[current.rsplit("/", 1)[-1].removesuffix(".tla")] = current
            elif line.strip() and not line.startswith(("Semantic processing", "Starting SANY")):
                problem.append(line.strip())
        text = "\n".join(problem)
        if m := _SANY_LOCATION.search(text):
            line, col, module = m.groups()
            where = f"{files.get(module, module + '.tla')}:{line}:{col}"
        elif (m := _PARSE_LOCATION.search(text)) and current:
            where = f"{current}:{m.group(1)}:{m.group(2)}"
        else:
            where = current or "the spec"
        detail = next((p for p in problem if p.startswith(("Encountered", "Unknown operator", "Multiply-defined",
                                                            "Was expecting"))), problem[0] if problem else "")
        return f"{where}: {detail}".rstrip(": ")
