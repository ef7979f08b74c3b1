"""cli/argtypes.py: output paths checked when the command line is parsed."""

from __future__ import annotations

import argparse

import pytest

from cli.argtypes import output_file, output_file_in_new_directory, trace_hash


def test_an_output_file_needs_its_directory(tmp_path):
    assert output_file(str(tmp_path / "x.json")) == tmp_path / "x.json"
    (tmp_path / "old.json").write_text("{}")
    assert output_file(str(tmp_path / "old.json")) == tmp_path / "old.json"       # replaced later
    for bad, why in [(tmp_path / "no" / "x.json", "does not exist"), (tmp_path, "is a directory"),
                     (tmp_path / "old.json" / "x.json", "is not a directory"), ("", "expected a file name")]:
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            output_file(str(bad))


def test_a_file_whose_directories_the_command_creates(tmp_path):
    deep = tmp_path / "new" / "dir" / "p.py"
    assert output_file_in_new_directory(str(deep)) == deep
    (tmp_path / "f").write_text("")
    with pytest.raises(argparse.ArgumentTypeError, match="is not a directory"):
        output_file_in_new_directory(str(tmp_path / "f" / "new" / "p.py"))
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory"):
        output_file_in_new_directory(str(tmp_path))


def test_a_trace_hash_is_16_or_64_hex_digits():
    full, short = "0123456789abcdef" * 4, "0123456789ABCDEF"
    assert trace_hash(full) == full and trace_hash(short) == short.lower()
    for bad in ("", "zz", full[:-1], full + "0", "g" * 16, short + " x"):
        with pytest.raises(argparse.ArgumentTypeError, match="hex digits"):
            trace_hash(bad)


def test_a_machine_is_named_by_its_class_or_its_first_word():
    """`--help` offers spec, refinement and real; each, in any case, and the class names are machines."""
    from cli.stateful import MACHINES, machine_name

    for short, name in (("spec", "SpecMachine"), ("Refinement", "RefinementMachine"), ("real", "RealStoreMachine"),
                        ("realstore", "RealStoreMachine")):
        assert machine_name(short) == name
    assert all(machine_name(name) == name for name in MACHINES)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown machine 'realistic'"):
        machine_name("realistic")


def test_every_bug_flag_takes_either_spelling():
    """README: every bug has one name, and the snake_case spelling is accepted on input too (chaos and
    controller took only the switch's name, with argparse's choices)."""
    from cli.main import build_parser

    parse = build_parser().parse_args
    assert parse(["chaos", "--bug", "ack_on_wrote_bug"]).bug == ["BugAckOnWrote"]
    assert parse(["chaos", "--failover", "--failover-bug", "no_all_ack_bug"]).failover_bug == ["BugNoAllAck"]
    assert parse(["controller", "--port", "0", "--bug", "unclean_election_bug"]).bug == ["BugUncleanElection"]
    assert parse(["broker", "node", "--controller", "127.0.0.1:1", "--id", "1", "--dir", "d", "--port", "1",
                  "--ha-port", "2", "--failover-bug", "truncate_not_durable_bug"]).failover_bug == ["BugTruncateNotDurable"]
