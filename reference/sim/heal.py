"""The liveness phase of a cluster run (the Hypothesis machines' teardown, the counterexample
tests): faults stop, everything heals, and then every request must have its answer and every
slave whose log follows the master's must be connected and caught up."""

from __future__ import annotations

from reference.sim.cluster import UP, Cluster

LIVENESS_STEPS = 400


def heal(c: Cluster) -> None:
    """No more faults; restart, reconnect, deliver, flush, let time pass; then nothing may be
    waiting, and every slave whose log follows the master's must be connected and caught up
    (ReplicasCatchUp).  Raises PropertyViolation otherwise."""
    if c.failed:
        return      # a step already failed; that failure is the report
    cfg = c.cfg
    c.write_fault = lambda length: None
    budget_ms = (3 * max(cfg.sync_flush_timeout_ms, cfg.slave_timeout_ms) + 2 * cfg.ha_housekeeping_interval_ms
                 + 100)
    start = c.now
    c.close_impostors()
    for _ in range(LIVENESS_STEPS):
        if c.mstate == UP and not c.master.writable and not c.waiting():
            c.master_process_crash()      # a read-only store needs its operator (once it answered all)
        if c.mstate != UP:
            c.master_restart()
        for name, node in c.replicas.items():
            if not node.up:
                c.replica_restart(name)
            if node.conn is None:
                c.connect(name)
        while c.open_links():
            link = c.open_links()[0]
            c.deliver(link.conn, link.direction)
        if c.pending_fsync is not None:
            c.complete_fsync(True)
        settled = (not c.waiting() and c.pending_fsync is None and not c.open_links()
                   and c.master.log.committed == c.master.log.wrote
                   and all(c.caught_up(name) is not False for name in c.replica_names))
        if settled or c.now - start > budget_ms:
            break
        c.tick(c.now + 1)
    c.check_liveness(c.now - start)
