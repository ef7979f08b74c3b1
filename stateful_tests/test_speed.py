"""machine_rates (stateful_tests/speed.py), the typed function `ackorder bench sim` calls:
what it returns, that the same derandomized programs run each time, and its wrong inputs.
Rates are measured there, never asserted here."""

import pytest

from stateful_tests.speed import MACHINES, machine_rates


def test_machine_rates_counts_the_rule_calls_of_the_same_programs():
    first = machine_rates(3, ["SpecMachine", "FailoverMachine"])
    again = machine_rates(3, ["SpecMachine", "FailoverMachine"])
    assert [r["machine"] for r in first] == ["SpecMachine", "FailoverMachine"]
    for row, same in zip(first, again):
        assert set(row) == {"machine", "examples", "steps", "cpu_s", "wall_s", "steps_per_s"}
        assert row["examples"] == 3 and row["steps"] > 3        # each test case runs several rules
        assert row["steps"] == same["steps"]                    # derandomized: the same programs
        # steps/s of the unrounded time; cpu_s is rounded to the millisecond
        assert row["cpu_s"] > 0 and abs(row["steps_per_s"] * row["cpu_s"] - row["steps"]) <= row["steps_per_s"] * 0.001


@pytest.mark.parametrize("kwargs, message", [
    ({"machines": ["NoSuchMachine"]}, "unknown machine 'NoSuchMachine'"),
    ({"examples": 0}, "examples must be at least 1"),
])
def test_machine_rates_refuses_wrong_input_before_running_anything(kwargs, message):
    with pytest.raises(ValueError, match=message):
        machine_rates(**kwargs)


def test_every_machine_is_known():
    assert MACHINES == ("SpecMachine", "RefinementMachine", "RealStoreMachine", "FailoverMachine")
