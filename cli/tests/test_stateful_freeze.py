"""`ackorder stateful` runs its machine with the imported heap frozen (cli/stateful.py: gc.freeze
after the imports), so the run's full collections do not rescan it."""

import gc

import hypothesis.stateful

from cli.main import build_parser


def test_the_machine_runs_with_the_imports_frozen(monkeypatch):
    frozen_during_the_run = []
    monkeypatch.setattr(hypothesis.stateful, "run_state_machine_as_test",
                        lambda machine, settings: frozen_during_the_run.append(gc.get_freeze_count()))
    gc.unfreeze()
    args = build_parser().parse_args(["stateful", "--machine", "spec", "--examples", "1"])
    try:
        assert args.func(args) == 0
    finally:
        gc.unfreeze()     # this test process goes on: its heap back to the collector
    assert len(frozen_during_the_run) == 1 and frozen_during_the_run[0] > 10_000, frozen_during_the_run
