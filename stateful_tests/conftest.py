from stateful_tests import profiles  # noqa: F401  (registers and loads the Hypothesis profile)
from stateful_tests.constants_pool import import_every_project_module

# Before any test of the session runs, in every pytest-xdist worker (each collects every test
# directory): the constants Hypothesis draws from are those of the whole project (constants_pool.py).
import_every_project_module()
