"""Hypothesis profiles: ``ci`` (what `make test` runs, bounded time), ``dev``
and ``thorough`` (long runs); pick one with HYPOTHESIS_PROFILE.

``ci`` is derandomized (the same examples on every run, as Hypothesis's own
CI profile), which rules out an example database; ``dev`` and ``thorough``
keep theirs under the project's ignored state directory, so a failure found
there is replayed first next time."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

STATE_DIR = Path(__file__).resolve().parent.parent / ".ackorder" / "hypothesis"
COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
DATABASE = DirectoryBasedExampleDatabase(str(STATE_DIR))

settings.register_profile("ci", max_examples=60, stateful_step_count=40, derandomize=True,
                          database=None, print_blob=True, **COMMON)
settings.register_profile("dev", max_examples=200, stateful_step_count=60, database=DATABASE, **COMMON)
settings.register_profile("thorough", max_examples=5000, stateful_step_count=120, database=DATABASE,
                          phases=list(Phase), **COMMON)
# The mutation kill suite's (spark_fuzz/mutation/killsuite.py): ci's programs, without shrinking a
# failure (a mutant is killed by the first failing program; shrinking it only spends the budget).
settings.register_profile("mutation", settings.get_profile("ci"),
                          phases=tuple(p for p in Phase if p not in (Phase.shrink, Phase.explain)))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
