from stateful_tests import profiles  # noqa: F401  (registers and loads the Hypothesis profile)
