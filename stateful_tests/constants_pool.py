"""The same Hypothesis examples in every test process: import every module of the project first.

Hypothesis (6.13x on) mixes into its draws constants it finds in the source of the project's
modules loaded in the process ("local constants"), so a derandomized run's programs change with
what else the process happened to import.  Under pytest-xdist that is whatever tests the worker
ran before: BugSlaveConfirmFromMaxOffset's catch took 7 s alone and 46 CPU-s late in a worker of
`make test` (the last test of the suite), and no run could be told from another by its settings.
With every module of the project imported before any test runs, every worker draws from one
pool, and a test's cost and its catch are what they are when it runs alone under the same
conftest.  Test modules are left out, as Hypothesis leaves them out of its pool."""

from __future__ import annotations

import importlib
import pkgutil

PACKAGES = ("cli", "reference", "spark_fuzz", "spec", "stateful_tests", "tla")   # pyproject's packages


def _is_test_module(name: str) -> bool:
    parts = name.split(".")
    return "tests" in parts or parts[-1].startswith("test_") or parts[-1] == "__main__"


def project_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        path = importlib.import_module(package).__path__
        names += [m.name for m in pkgutil.walk_packages(path, f"{package}.") if not _is_test_module(m.name)]
    return names


def import_every_project_module() -> list[str]:
    """Import them all (an import that fails fails the session: no module is silently left out)."""
    names = project_modules()
    for name in names:
        importlib.import_module(name)
    return names
