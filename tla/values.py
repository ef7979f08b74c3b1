"""Parser for TLA+ values as TLC prints them in traces.

Sequences become tuples, sets frozensets, records dicts, functions
(``a :> 1 @@ b :> 2``) dicts, model values ``ModelValue``.  Dicts are
wrapped in ``Record``/``FunctionValue`` (hashable, read-only) so they can
sit inside sets.
"""

from __future__ import annotations

import re

import attrs

_TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<punct><<|>>|\|->|:>|@@|[{}\[\](),])'
    r"|(?P<number>-?\d+)|(?P<word>[A-Za-z_][A-Za-z0-9_!]*))"
)


class ValueParseError(ValueError):
    pass


@attrs.frozen
class ModelValue:
    name: str

    def __str__(self) -> str:
        return self.name


class _FrozenMap(dict):
    """A read-only dict that can be hashed (for values inside sets)."""

    def __hash__(self):  # type: ignore[override]
        return hash(frozenset(self.items()))

    def _readonly(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} is read-only")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _readonly  # type: ignore[assignment]


class Record(_FrozenMap):
    """[field |-> value, ...]"""


class FunctionValue(_FrozenMap):
    """(key :> value @@ ...)"""


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueParseError(f"cannot parse TLA+ value at {text[pos:pos + 30]!r}")
        pos = m.end()
        kind = m.lastgroup
        tokens.append((kind, m.group(kind)))
    return tokens


def parse_value(text: str):
    tokens = _tokenize(text)
    value, i = _parse(tokens, 0)
    if i != len(tokens):
        raise ValueParseError(f"trailing text after value: {text!r}")
    return value


def _expect(tokens, i, punct):
    if i >= len(tokens) or tokens[i][1] != punct:
        found = tokens[i][1] if i < len(tokens) else "end of text"
        raise ValueParseError(f"expected {punct!r}, found {found!r}")
    return i + 1


def _items(tokens, i, close, parse_item):
    items = []
    if i < len(tokens) and tokens[i][1] == close:
        return items, i + 1
    while True:
        item, i = parse_item(tokens, i)
        items.append(item)
        if i < len(tokens) and tokens[i][1] == ",":
            i += 1
            continue
        return items, _expect(tokens, i, close)


def _field(tokens, i):
    kind, name = tokens[i]
    if kind != "word":
        raise ValueParseError(f"expected a record field name, found {name!r}")
    value, i = _parse(tokens, _expect(tokens, i + 1, "|->"))
    return (name, value), i


def _parse(tokens, i):
    if i >= len(tokens):
        raise ValueParseError("unexpected end of value")
    kind, text = tokens[i]
    if kind == "string":
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\"), i + 1
    if kind == "number":
        return int(text), i + 1
    if kind == "word":
        if text in ("TRUE", "FALSE"):
            return text == "TRUE", i + 1
        return ModelValue(text), i + 1
    if text == "<<":
        items, i = _items(tokens, i + 1, ">>", _parse)
        return tuple(items), i
    if text == "{":
        items, i = _items(tokens, i + 1, "}", _parse)
        return frozenset(items), i
    if text == "[":
        fields, i = _items(tokens, i + 1, "]", _field)
        return Record(fields), i
    if text == "(":
        pairs = {}
        i += 1
        while True:
            key, i = _parse(tokens, i)
            value, i = _parse(tokens, _expect(tokens, i, ":>"))
            pairs[key] = value
            if i < len(tokens) and tokens[i][1] == "@@":
                i += 1
                continue
            return FunctionValue(pairs), _expect(tokens, i, ")")
    raise ValueParseError(f"unexpected {text!r}")
