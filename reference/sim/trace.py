"""Spec-level traces of a run: what each spec step changed, as JSON."""

from __future__ import annotations

import json

import attrs

from spec.state import State


def changed_fields(before: State, after: State) -> dict:
    """What a spec step changed: whole scalars, and only the changed or
    appended elements of sequences and sets (traces stay linear in length)."""
    out = {}
    for f in attrs.fields(State):
        a, b = getattr(before, f.name), getattr(after, f.name)
        if a is b or a == b:
            continue
        if isinstance(a, tuple) and isinstance(b, tuple) and f.name in ("log", "reqs", "rlog"):
            if len(b) >= len(a) and b[: len(a)] == a:
                out[f.name] = {"append": to_json(b[len(a):])}
            elif len(a) == len(b):
                out[f.name] = {str(i): to_json(y) for i, (x, y) in enumerate(zip(a, b), 1) if x != y}
            else:
                out[f.name] = to_json(b)
        elif isinstance(a, frozenset) and isinstance(b, frozenset):
            out[f.name] = {"add": to_json(b - a), "remove": to_json(a - b)}
        else:
            out[f.name] = to_json(b)
    return out


def to_json(v):
    if attrs.has(type(v)):
        return {f.name: to_json(getattr(v, f.name)) for f in attrs.fields(type(v))}
    if isinstance(v, (tuple, list)):
        return [to_json(x) for x in v]
    if isinstance(v, frozenset):
        return sorted((to_json(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
    return v
