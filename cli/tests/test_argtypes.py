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
