"""CheckpointTable answers as the dict keyed by segment start that it replaced."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.checkpoints import CheckpointTable
from reference.record import Checkpoint

SEG = 1024


def cp(k: int) -> Checkpoint:
    return Checkpoint(k * SEG, 10 * k, bytes([k % 256]) * 16)


ops = st.lists(st.one_of(st.tuples(st.just("add"), st.integers(0, 12)),
                         st.tuples(st.just("truncate"), st.integers(0, 14 * SEG))), max_size=40)


@given(base=st.integers(0, 3), ops=ops, probe=st.lists(st.integers(-SEG, 16 * SEG), max_size=20))
def test_the_table_answers_as_a_dict(base, ops, probe):
    table, model = CheckpointTable(SEG, (cp(base),)), {base * SEG: cp(base)}
    for op, arg in ops:
        if op == "add" and arg >= base:
            table.add(cp(arg))
            model.setdefault(arg * SEG, cp(arg))
        elif op == "truncate" and arg >= base * SEG:
            table.truncate_after(arg)
            for start in [s for s in model if s > arg]:
                del model[start]
        assert sorted(table) == sorted(model) and len(table) == len(model)
        assert sorted(table.items()) == sorted(model.items())
    for start in probe + [s + 1 for s in model]:
        assert table.get(start) == model.get(start) and (start in table) == (start in model)
        if start in model:
            assert table[start] == model[start]
        else:
            with pytest.raises(KeyError):
                table[start]


def test_a_table_is_built_from_a_scan_s_checkpoints_in_order():
    table = CheckpointTable(SEG, tuple(cp(k) for k in range(5)))
    assert list(table) == [k * SEG for k in range(5)] and table[3 * SEG] == cp(3)
    with pytest.raises(AssertionError):
        CheckpointTable(SEG, (cp(0), cp(2)))      # not one per segment
