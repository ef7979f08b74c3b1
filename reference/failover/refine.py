"""The refinement check of the failover reference: every concrete step of a
``FailoverGroup`` must be a step of the failover twin (spec/failover/actions.py)
with the same label — or a path of twin steps, one per label of a compound
step (``spec_path``) — or leave the abstract state unchanged; every abstract
state must satisfy the spec's safety invariants.  Nothing here knows a rule:
the twin's action functions say which successors are allowed."""

from __future__ import annotations

import attrs

from spec.failover.labels import allowed
from spec.failover.config import FailoverConfig
from spec.failover.properties import INVARIANTS, SAFETY
from spec.failover.state import FState

# Verdicts already reached, by (cfg, state) and (cfg, pre, label, post): both checks are pure
# functions of frozen values (FState caches its hash), and a group's runs revisit states often
# (a Hypothesis machine's test cases share their beginnings; healing passes the same states),
# so a repeated state costs a lookup instead of every invariant.  Bounded: cleared when full.
# Only the Hypothesis machine asks to remember (``remember=True``): a seeded run (drive.py) rarely
# meets a state twice, and every entry it kept would be one more object for the garbage collector
# to trace (200 seeds of ``simulate``: 10.7 CPU-s without the memo, 14 s with 32,768 entries, 3 s
# of it in collections).  4,096 entries: the machine's fastest size measured (600 test cases:
# 3,111 steps/s, 3,001 at 32,768, 2,757 with none).
MEMO_ENTRIES = 1 << 12
_VIOLATED: dict[tuple, tuple[str, ...]] = {}
_STEPS_OK: set[tuple] = set()

class RefinementError(AssertionError):
    """A concrete step the twin does not allow."""


def _diff(a: FState, b: FState) -> str:
    return "; ".join(f"{f.name}: {getattr(a, f.name)!r} vs {getattr(b, f.name)!r}"
                     for f in attrs.fields(FState) if getattr(a, f.name) != getattr(b, f.name))


SEP = ";"        # a concrete step that is several spec steps: their labels, in order


def spec_path(cfg: FailoverConfig, pre: FState, label: str, post: FState,
              remember: bool = False) -> list[tuple[str, FState]]:
    """The spec steps one concrete step stands for: [(label, state after it)], ending in ``post``.
    A label joined by SEP names several actions in order (the byte-level group's cores act on an
    input at once: an ACK, then the PUT_OKs it allows); the twin must reach ``post`` through
    them.  RefinementError when it cannot."""
    parts = label.split(SEP)
    if len(parts) == 1:
        check_step(cfg, pre, label, post, remember)
        return [(label, post)]
    # depth-first over the twin's successors (power loss and elections offer several)
    stack: list[tuple[int, FState, tuple]] = [(0, pre, ())]
    deepest: tuple[int, FState] = (0, pre)
    while stack:
        k, s, path = stack.pop()
        if k == len(parts):
            if s == post:
                return list(path)
            continue
        options = allowed(cfg, s, parts[k])
        if k >= deepest[0] and (options or k > deepest[0]):
            deepest = (k, s)
        for o in reversed(options):
            stack.append((k + 1, o, path + ((parts[k], o),)))
    k, s = deepest
    if k < len(parts) and not allowed(cfg, s, parts[k]):
        raise RefinementError(f"{label}: the spec does not allow {parts[k]} after {SEP.join(parts[:k]) or 'nothing'}; "
                              f"the reference changed {_diff(pre, post)}")
    ends = [o for o in _ends(cfg, pre, parts)]
    closest = min(ends, key=lambda o: len(_diff(o, post))) if ends else pre
    raise RefinementError(f"{label}: no spec path leads here; the closest differs in {_diff(closest, post)}  "
                          f"(spec vs reference)")


def _ends(cfg: FailoverConfig, pre: FState, parts: list[str], limit: int = 64) -> list[FState]:
    frontier = [pre]
    for part in parts:
        frontier = [o for s in frontier for o in allowed(cfg, s, part)][:limit]
    return frontier


def check_step(cfg: FailoverConfig, pre: FState, label: str, post: FState, remember: bool = False) -> None:
    """Raise RefinementError unless pre -label-> post is a twin step (or a stutter)."""
    if SEP in label:
        spec_path(cfg, pre, label, post)
        return
    if post == pre:
        return
    key = (cfg, pre, label, post) if remember else None
    if key is not None and key in _STEPS_OK:
        return
    options = allowed(cfg, pre, label)
    if post in options:
        if key is None:
            return
        if len(_STEPS_OK) >= MEMO_ENTRIES:
            _STEPS_OK.clear()
        _STEPS_OK.add(key)
        return
    if not options:
        raise RefinementError(f"{label}: the spec does not allow this action here; the reference changed "
                              f"{_diff(pre, post)}")
    closest = min(options, key=lambda o: len(_diff(o, post)))
    raise RefinementError(f"{label}: no spec step leads here; closest spec successor differs in "
                          f"{_diff(closest, post)}  (spec vs reference)")


def violated(cfg: FailoverConfig, s: FState, remember: bool = False) -> list[str]:
    """The safety invariants of the green failover cfgs that ``s`` violates."""
    if not remember:
        return [name for name in SAFETY if not INVARIANTS[name](cfg, s)]
    key = (cfg, s)
    bad = _VIOLATED.get(key)
    if bad is None:
        bad = tuple(name for name in SAFETY if not INVARIANTS[name](cfg, s))
        if len(_VIOLATED) >= MEMO_ENTRIES:
            _VIOLATED.clear()
        _VIOLATED[key] = bad
    return list(bad)
