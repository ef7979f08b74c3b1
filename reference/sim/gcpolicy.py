"""When a simulated run stops the full garbage collections (spec/gcpause.py): past its first
LONG_RUN_EVENTS events.

What a run keeps only grows (the spec's requests and responses, the logs' checkpoints) and a
run makes no garbage cycles of its own (reference/tests/test_gcpolicy.py proves it on clean and
on failing seeds), so at 1,000,000 checked steps the full collections took 9-12% of the run's
CPU and collected nothing.  A short run (a campaign's 400-step seed) leaves the collector alone:
every world a campaign drops is a garbage cycle, which only a full collection frees.  After a long
run, in a process whose heap is mostly the simulation (a campaign's worker), the next full
collection is soon due (what the run promoted counts as pending), so the world it leaves, once
dropped, is freed as before."""

LONG_RUN_EVENTS = 20_000     # events of a run before its full collections are paused
