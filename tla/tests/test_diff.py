"""Counterexample diffs name the field or element that changed."""

from tla.diff import changes


def test_sequence_of_records_field_change():
    old = '<<[status |-> "WAITING", off |-> 1, flushDone |-> FALSE]>>'
    new = '<<[status |-> "PUT_OK", off |-> 1, flushDone |-> FALSE]>>'
    assert changes("reqs", old, new) == ['reqs[1].status = "PUT_OK"']


def test_append_function_entry_and_set_growth():
    assert changes("log", "<<1>>", "<<1, 2>>") == ["log \\o= <<2>>"]
    assert changes("rlog", "(r1 :> <<>> @@ r2 :> <<>>)", "(r1 :> <<1>> @@ r2 :> <<>>)") == ["rlog[r1] \\o= <<1>>"]
    assert changes("s", "{[id |-> 1]}", "{[id |-> 1], [id |-> 2]}") == ["s \\cup= {[id |-> 2]}"]


def test_first_state_and_unparsable_values():
    assert changes("log", None, "<<>>") == ["log = <<>>"]
    assert changes("x", "1", "?!") == ["x = ?!"]
    assert changes("x", "1", "1") == []
