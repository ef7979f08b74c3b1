"""What changed between two TLC states, down to the field or element.

``reqs[2].status = "PUT_OK"`` says more than the whole new sequence of
records; ``inv_responses \\cup= {...}`` shows only the new event.
"""

from __future__ import annotations

from tla.values import FunctionValue, ModelValue, Record, ValueParseError, parse_value

MAX_DEPTH = 3


def format_value(v) -> str:
    """A Python value back in TLA+ notation (sets and records sorted)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, ModelValue)):
        return str(v)
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, tuple):
        return "<<" + ", ".join(format_value(x) for x in v) + ">>"
    if isinstance(v, frozenset):
        return "{" + ", ".join(sorted(format_value(x) for x in v)) + "}"
    if isinstance(v, Record):
        return "[" + ", ".join(f"{k} |-> {format_value(x)}" for k, x in sorted(v.items())) + "]"
    if isinstance(v, FunctionValue):
        items = sorted(v.items(), key=lambda kv: format_value(kv[0]))
        return "(" + " @@ ".join(f"{format_value(k)} :> {format_value(x)}" for k, x in items) + ")"
    return repr(v)


def _diff(name: str, old, new, depth: int) -> list[str]:
    if old == new:
        return []
    if depth < MAX_DEPTH:
        if isinstance(old, (Record, FunctionValue)) and type(old) is type(new) and old.keys() == new.keys():
            out = []
            for k in old:
                sub = f"{name}.{k}" if isinstance(old, Record) else f"{name}[{format_value(k)}]"
                out += _diff(sub, old[k], new[k], depth + 1)
            return out
        if isinstance(old, tuple) and isinstance(new, tuple):
            if len(new) > len(old) and new[: len(old)] == old:
                return [f"{name} \\o= {format_value(new[len(old):])}"]
            if len(new) == len(old):
                out = []
                for i, (a, b) in enumerate(zip(old, new), start=1):
                    out += _diff(f"{name}[{i}]", a, b, depth + 1)
                return out
        if isinstance(old, frozenset) and isinstance(new, frozenset):
            out = []
            if added := new - old:
                out.append(f"{name} \\cup= {format_value(frozenset(added))}")
            if removed := old - new:
                out.append(f"{name} \\= {format_value(frozenset(removed))}")
            return out
    return [f"{name} = {format_value(new)}"]


def changes(name: str, old_text: str | None, new_text: str) -> list[str]:
    """Lines describing how variable ``name`` changed (its whole value when new)."""
    if old_text == new_text:
        return []
    try:
        new = parse_value(new_text)
        if old_text is None:
            return [f"{name} = {format_value(new)}"]
        return _diff(name, parse_value(old_text), new, 0)
    except ValueParseError:
        return [f"{name} = {new_text}"]
