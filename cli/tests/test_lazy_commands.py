"""`ackorder COMMAND ...` imports only COMMAND's module: the table that says which module
registers which command must match what the whole command line registers, and a broker
process must not pay for Hypothesis, Spark, pyarrow or matplotlib."""

import subprocess
import sys

from cli.main import COMMANDS, build_parser


def _commands(parser) -> dict:
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices


def test_the_table_names_every_command_and_its_module():
    whole = _commands(build_parser())
    assert list(whole) == list(COMMANDS)
    for name, module in COMMANDS.items():
        alone = _commands(build_parser([name, "--help"]))
        assert name in alone, name
        assert set(alone) == {n for n, m in COMMANDS.items() if m == module}, name
        # the same subparser, option for option, as in the whole command line
        assert ([a.option_strings for a in alone[name]._actions]
                == [a.option_strings for a in whole[name]._actions]), name


def test_no_command_or_an_unknown_one_gets_the_whole_command_line():
    assert list(_commands(build_parser([]))) == list(COMMANDS)
    assert list(_commands(build_parser(["nosuch"]))) == list(COMMANDS)
    assert list(_commands(build_parser(["--version"]))) == list(COMMANDS)


def test_a_broker_process_imports_none_of_the_heavy_libraries():
    probe = ("import runpy, sys\n"
             "sys.argv = ['ackorder', 'broker', 'master', '--help']\n"
             "try:\n    runpy.run_module('cli', run_name='__main__')\n"
             "except SystemExit as e:\n    assert e.code == 0, e.code\n"
             "print(sorted(m for m in ('hypothesis', 'pyspark', 'pyarrow', 'matplotlib', 'z3') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
    whole = probe.replace("'broker', 'master', '--help'", "'--help'")
    out = subprocess.run([sys.executable, "-c", whole], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] != "[]", out.stdout     # the probe can see a heavy import
