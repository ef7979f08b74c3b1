"""The FrameGuard (reference/real/guard.py) against a model of what it must keep: the bytes of
every connection's unfinished frame, each frame's start, and the three rules (the budget, the
deadline, the newcomer's place at the limit), for any sequence of reads and ticks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.real.guard import FrameGuard
from reference.real.loop import reserve_descriptors
from spec.config import ConfigError

DEADLINE_MS, BUDGET, MAX_FRAME = 500, 600, 300

events = st.lists(st.one_of(
    st.tuples(st.just("read"), st.integers(0, 5), st.sampled_from([0, 1, 150, 250, MAX_FRAME]), st.booleans(),
              st.sampled_from([0, 1, 50, 200])),
    st.tuples(st.just("close"), st.integers(0, 7)),
    st.tuples(st.just("tick"), st.integers(0, 400)),
    st.tuples(st.just("accept"), st.integers(0, 400)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(events)
def test_the_guard_keeps_its_three_rules(steps):
    guard = FrameGuard(DEADLINE_MS, BUDGET, MAX_FRAME)
    partial: dict[int, tuple[int, int]] = {}     # conn -> (since, bytes): the model
    now = 0
    for step in steps:
        if step[0] == "read":
            _, conn, buffered, completed, dt = step
            now += dt
            if buffered == 0:
                partial.pop(conn, None)
            elif conn not in partial or completed:
                partial[conn] = (now, buffered)
            else:
                partial[conn] = (partial[conn][0], buffered)
            closed = guard.fed(conn, buffered, completed, now)
            if sum(b for _, b in partial.values()) > BUDGET:
                assert closed, "over the budget and nothing closed"
            oldest_first = sorted(partial, key=lambda c: (partial[c][0], c))
            assert [c for c, _ in closed] == oldest_first[:len(closed)], "not the oldest unfinished frames first"
            for c, reason in closed:
                assert "over the budget" in reason
                del partial[c]
            assert sum(b for _, b in partial.values()) <= BUDGET
        elif step[0] == "close":
            guard.forget(step[1])
            partial.pop(step[1], None)
        elif step[0] == "tick":
            now += step[1]
            late = {c for c, (since, _) in partial.items() if now - since > DEADLINE_MS}
            assert {c for c, _ in guard.overdue(now)} == late
            for c in late:
                del partial[c]
        else:
            now += step[1]
            victim = guard.evictable(now, 50)
            slow = [c for c, (since, _) in partial.items() if now - since > min(1000, DEADLINE_MS)]
            if not slow:
                assert victim is None
            else:
                assert victim is not None and victim[0] == min(partial, key=lambda c: (partial[c][0], c))
                del partial[victim[0]]
        assert guard.total_bytes == sum(b for _, b in partial.values())


def test_a_budget_smaller_than_one_frame_is_refused():
    with pytest.raises(ConfigError, match="--partial-frame-budget-bytes 100: at least one frame"):
        FrameGuard(1000, 100, 4096)


def test_more_connections_than_the_open_files_limit_allows_are_refused(monkeypatch):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 2048))
    raised = []
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: raised.append(limits))
    reserve_descriptors(1500)                         # within the hard limit: the soft one is raised
    assert raised == [(1500 + 64, 2048)]
    with pytest.raises(ConfigError, match="--max-connections 4000: this process may open only 2048 files"):
        reserve_descriptors(4000)
