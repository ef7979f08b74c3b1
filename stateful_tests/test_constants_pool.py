"""stateful_tests/constants_pool.py: every module of the project is loaded before a test runs, so
the constants Hypothesis mixes into its derandomized draws are the same in every worker."""

import re
import sys
import tomllib
from pathlib import Path

from stateful_tests.constants_pool import PACKAGES, _is_test_module, project_modules

ROOT = Path(__file__).resolve().parents[1]


def test_the_pool_covers_every_package_pyproject_installs():
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(re.sub(r"\*$", "", p) for p in include) == sorted(PACKAGES)


def test_every_project_module_is_loaded_before_the_tests_run():
    names = project_modules()
    assert {"reference.sim", "spec.failover.actions", "stateful_tests.failover_machine", "cli.main"} <= set(names)
    assert not [n for n in names if _is_test_module(n)]
    assert [n for n in names if n not in sys.modules] == []


def test_test_modules_are_left_out_as_hypothesis_leaves_them_out():
    assert _is_test_module("reference.tests.test_sim") and _is_test_module("tla.tests.smallmodel")
    assert _is_test_module("cli.__main__") and not _is_test_module("reference.testing_helpers")
