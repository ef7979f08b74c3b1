"""Replaying the step program Hypothesis printed for a failing state-machine case
(``state = RefinementMachine()``, ``state.put(size=3)``, ...).  It is parsed, not
executed: only calls on ``state`` with literal arguments, earlier results and the
configuration classes are accepted, and anything else is an error naming the line.
`ackorder replay --program FILE` and `ackorder stateful` use it."""

from __future__ import annotations

import ast
import inspect
import re
from hypothesis.stateful import INITIALIZE_RULE_MARKER, INVARIANT_MARKER, RULE_MARKER

from reference.config import StoreConfig
from spec.config import BUG_NAMES, Config, ConfigError

CONSTRUCTORS = {"StoreConfig": StoreConfig, "Config": Config, "frozenset": frozenset, "set": set}


class ProgramError(ValueError):
    """A step program that cannot be replayed; the message names the line."""


def machine_classes() -> dict:
    from stateful_tests.bug_machines import machine_for
    from stateful_tests.machines import RealStoreMachine, RefinementMachine, SpecMachine

    from spec.failover.config import FAILOVER_BUG_NAMES
    from stateful_tests.failover_machine import FailoverMachine, failover_machine_for

    classes = {"SpecMachine": SpecMachine, "RefinementMachine": RefinementMachine,
               "RealStoreMachine": RealStoreMachine, "FailoverMachine": FailoverMachine}
    for bug in BUG_NAMES:
        classes[f"RefinementMachine_{bug}"] = machine_for(bug)
    for bug in FAILOVER_BUG_NAMES:
        classes[f"FailoverMachine_{bug}"] = failover_machine_for(bug)
    return classes


def _clean(text: str) -> str:
    """The program itself, from ``state = ...`` to ``state.teardown()``, without
    the markers pytest ("E   ") and exception groups ("| ") put before lines."""
    lines = [re.sub(r"^(?:E\s+|\|\s?)+", "", raw.strip()) for raw in text.splitlines()]
    starts = [i for i, line in enumerate(lines) if re.fullmatch(r"state = \w+\(\)", line)]
    if not starts:
        raise ProgramError("no `state = <Machine>()` line found")
    ends = [i for i, line in enumerate(lines) if line == "state.teardown()" and i > starts[0]]
    # Blank lines in front keep the line numbers of errors those of the file.
    return "\n" * starts[0] + "\n".join(lines[starts[0]: (ends[0] if ends else len(lines) - 1) + 1])


def _value(node: ast.AST, env: dict, lineno: int):
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise ProgramError(f"line {lineno}: unknown name {node.id!r}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CONSTRUCTORS:
        args = [_value(a, env, lineno) for a in node.args]
        kwargs = {k.arg: _value(k.value, env, lineno) for k in node.keywords}
        try:
            return CONSTRUCTORS[node.func.id](*args, **kwargs)
        except (TypeError, ConfigError) as err:
            raise ProgramError(f"line {lineno}: {err}") from None
    if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        items = [_value(e, env, lineno) for e in node.elts]
        return {ast.Set: set, ast.Tuple: tuple, ast.List: list}[type(node)](items)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ProgramError(f"line {lineno}: only literals, earlier results and "
                           f"{', '.join(CONSTRUCTORS)} are allowed, got {ast.unparse(node)!r}") from None


def _outside(strategy, value) -> str | None:
    """What ``strategy`` draws, when ``value`` is none of it; None when it is, or when this cannot
    read the strategy (the step then runs and decides).  The machines draw integers, booleans,
    floats and sampled values: a hand-edited program may hold anything, and a value no test case
    could hold would fail the step as a defect of the reference rather than of the program."""
    s = getattr(strategy, "wrapped_strategy", strategy)
    kind = type(s).__name__
    if kind == "IntegersStrategy":
        low, high = getattr(s, "start", None), getattr(s, "end", None)
        if type(value) is not int or (low is not None and value < low) or (high is not None and value > high):
            return f"an integer from {low} to {high}"
    elif kind == "BooleansStrategy" and type(value) is not bool:
        return "True or False"
    elif kind == "FloatStrategy":
        low, high = getattr(s, "min_value", None), getattr(s, "max_value", None)
        if type(value) not in (int, float) or (low is not None and value < low) or (high is not None and value > high):
            return f"a number from {low} to {high}"
    elif kind == "SampledFromStrategy":
        elements = getattr(s, "elements", None)
        if elements is not None and not any(type(value) is type(e) and value == e for e in elements):
            return f"one of {', '.join(map(repr, elements))}"
    return None


def _is_step(method, name: str) -> bool:
    """A rule, an initialize rule, an invariant (Hypothesis prints their calls too) or teardown:
    nothing else may be called."""
    return callable(method) and (name == "teardown" or any(
        hasattr(method, marker) for marker in (RULE_MARKER, INITIALIZE_RULE_MARKER, INVARIANT_MARKER)))


def replay_program(text: str, trace_to=None):
    """Replay a printed step program; returns the machine, raises what it raised.  With
    ``trace_to``, a refinement machine writes its spec-level trace there."""
    try:
        tree = ast.parse(_clean(text))
    except SyntaxError as err:
        raise ProgramError(f"line {err.lineno}: {err.msg}") from None
    classes = machine_classes()
    env: dict = {}
    state = None
    initialized: set[str] = set()        # the machine's initialize rules run so far
    for stmt in tree.body:
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, call = stmt.targets[0].id, stmt.value
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Tuple)
              and stmt.targets[0].elts and all(isinstance(e, ast.Name) for e in stmt.targets[0].elts)):
            # a rule returning multiple(...): Hypothesis prints one name per value
            target, call = tuple(e.id for e in stmt.targets[0].elts), stmt.value
        elif isinstance(stmt, ast.Expr):
            call = stmt.value
        else:
            raise ProgramError(f"line {stmt.lineno}: expected a call on state, got {ast.unparse(stmt)!r}")
        if not isinstance(call, ast.Call):
            raise ProgramError(f"line {stmt.lineno}: expected a call, got {ast.unparse(call)!r}")
        if isinstance(call.func, ast.Name):
            if target != "state" or call.func.id not in classes:
                raise ProgramError(f"line {stmt.lineno}: unknown machine {call.func.id!r}; "
                                   f"known: {', '.join(sorted(classes))}")
            state = classes[call.func.id]()
            if trace_to is not None and hasattr(state, "trace_to"):
                state.trace_to = trace_to
            env["state"] = state
            continue
        if not (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "state") or state is None:
            raise ProgramError(f"line {stmt.lineno}: expected state.<rule>(...), got {ast.unparse(call)!r}")
        name = call.func.attr
        method = getattr(state, name, None)
        if not _is_step(method, name):
            raise ProgramError(f"line {stmt.lineno}: the machine has no rule {name!r}")
        initializers = {n for n in dir(type(state)) if hasattr(getattr(type(state), n), INITIALIZE_RULE_MARKER)}
        if not hasattr(method, INITIALIZE_RULE_MARKER) and not initializers <= initialized:
            raise ProgramError(f"line {stmt.lineno}: state.{name} before "
                               f"{', '.join(f'state.{n}(...)' for n in sorted(initializers - initialized))}: "
                               "a machine's initialize rules come first")
        kwargs = {k.arg: _value(k.value, env, stmt.lineno) for k in call.keywords}
        try:
            inspect.signature(method).bind(**kwargs)
        except TypeError as err:
            raise ProgramError(f"line {stmt.lineno}: state.{name}: {err}") from None
        rule = getattr(method, RULE_MARKER, None) or getattr(method, INITIALIZE_RULE_MARKER, None)
        for arg, value in kwargs.items():
            strategy = rule.arguments.get(arg) if rule is not None else None
            if strategy is not None and (wanted := _outside(strategy, value)) is not None:
                raise ProgramError(f"line {stmt.lineno}: state.{name}: {arg}={value!r} is no value the rule draws "
                                   f"(it draws {wanted})")
        if hasattr(method, INITIALIZE_RULE_MARKER):
            initialized.add(name)
        try:
            result = method(**kwargs)
        except BaseException:
            if call.func.attr != "teardown":    # as Hypothesis does: teardown runs after a failing step
                try:
                    state.teardown()
                except BaseException:           # noqa: BLE001  (the step's failure is the report)
                    pass
            raise
        if isinstance(target, tuple):
            values = getattr(result, "values", None)
            if not isinstance(values, tuple) or len(values) != len(target):
                raise ProgramError(f"line {stmt.lineno}: state.{name} gave "
                                   f"{len(values) if isinstance(values, tuple) else 'no'} values for "
                                   f"{len(target)} names")
            env.update(zip(target, values))
        elif target is not None:
            env[target] = result
    return state
