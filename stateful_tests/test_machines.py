"""The three machines under the selected Hypothesis profile (``ci`` in `make test`)."""

from hypothesis import settings

from stateful_tests.machines import RealStoreMachine, RefinementMachine, SpecMachine

TestSpecMachine = SpecMachine.TestCase
TestRefinementMachine = RefinementMachine.TestCase
TestRealStoreMachine = RealStoreMachine.TestCase
# Real files and fdatasync are slow: fewer, shorter cases than the simulated machine.
TestRealStoreMachine.settings = settings(settings(), max_examples=max(settings().max_examples // 4, 5),
                                         stateful_step_count=max(settings().stateful_step_count // 2, 10))
