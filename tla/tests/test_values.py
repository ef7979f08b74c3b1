"""TLC's printed values parse back into Python values."""

import pytest

from tla.values import FunctionValue, ModelValue, Record, ValueParseError, parse_value


def test_scalars_and_collections():
    assert parse_value("42") == 42
    assert parse_value('"SYNC_FLUSH"') == "SYNC_FLUSH"
    assert parse_value("TRUE") is True
    assert parse_value("<<1, 2, 0>>") == (1, 2, 0)
    assert parse_value("<<>>") == ()
    assert parse_value("{r1, r2}") == frozenset({ModelValue("r1"), ModelValue("r2")})


def test_records_functions_and_nesting():
    value = parse_value('<<[status |-> "WAITING", off |-> 1, flushDone |-> FALSE]>>')
    assert value == (Record(status="WAITING", off=1, flushDone=False),)
    fn = parse_value("(r1 :> <<1>> @@ r2 :> <<>>)")
    assert isinstance(fn, FunctionValue) and fn[ModelValue("r2")] == ()
    assert parse_value("{[id |-> 1, holders |-> {r1}]}") == frozenset({Record(id=1, holders=frozenset({ModelValue("r1")}))})


def test_records_are_read_only():
    with pytest.raises(TypeError):
        parse_value("[a |-> 1]")["a"] = 2


@pytest.mark.parametrize("text", ["<<1, 2", "[a 1]", "(r1 :> )", "<<1>> extra", "$"])
def test_malformed_values_are_errors(text):
    with pytest.raises(ValueParseError):
        parse_value(text)
