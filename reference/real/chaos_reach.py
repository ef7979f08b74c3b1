"""Which seeded defects each chaos mode is shown to catch, and the refusal of every other one.

A chaos run that cannot reach a switch reports "nothing lost, everything looks good" about a
defect it never exercised: the worst answer a verification tool can give.  So each mode takes
only the switches a test shows it to catch (the test runs the mode with the switch and asserts
the run fails), and refuses any other with exit 2 and one line naming the modes and tools that
do reach it.  reference/tests/test_chaos.py and test_failover_real.py keep these tables true.
"""

from __future__ import annotations

import attrs

from spec.config import ConfigError


@attrs.frozen
class ChaosCatch:
    """How a chaos run catches a switch: the test that shows its checks fail (reference/tests/...;
    None: they do not), and for --failover whether that needs the slow member or the paused one, and
    the test that shows the check of the run's history (--failover-trace) catches it (None: not shown)."""
    test: str | None
    needs_slow_member: bool = False
    history_test: str | None = None
    needs_pause: bool = False
    needs_no_slave: bool = False        # bites only with --replicas 0

    @property
    def needs_trace(self) -> bool:
        return self.test is None


# kill -9 of a real master under load (reference/real/chaos.py): the page cache survives a
# process kill, so only what the restart's recovery makes of the files is in reach.
KILL9_CATCHES = {
    "BugRecoveryKeepsTorn": ChaosCatch("test_chaos_catches_a_recovery_that_keeps_a_torn_record"),
}

# --power-loss (reference/real/powerloss.py): crash states of the recorded file operations, so an
# acknowledgement that ran ahead of its fdatasync is in reach, and the recovery.
POWER_LOSS_CATCHES = {
    "BugAckOnWrote": ChaosCatch("test_power_loss_catches_an_ack_before_the_fsync"),
    "BugAckOnCommitted": ChaosCatch("test_power_loss_catches_an_ack_of_the_page_cache"),
    "BugFlushOneFileReleasesAll": ChaosCatch("test_power_loss_catches_one_fsync_releasing_two_files"),
    "BugRecoveryKeepsTorn": ChaosCatch("test_power_loss_catches_a_recovery_that_keeps_a_torn_record"),
}

# --failover (reference/real/failover_chaos.py): three nodes and a controller, the master killed.
FAILOVER_CATCHES = {
    "BugTruncateNotDurable": ChaosCatch("test_chaos_failover_catches_a_cut_only_in_memory"),
    # loses acknowledged messages only when the member elected lagged (the slow member); the history
    # shows the PUT_OK before the acks at once
    "BugNoAllAck": ChaosCatch("test_chaos_failover_catches_acks_without_the_slaves", needs_slow_member=True,
                              history_test="test_chaos_failover_history_catches_acks_without_the_slaves"),
    # the run loses nothing, but its history has a PUT_OK the joining member had not acked (#5663)
    "BugCommittedSssOnly": ChaosCatch(None, history_test="test_chaos_failover_history_catches_acks_over_the_"
                                                         "committed_set_only"),
    # a member the master proposes to drop is no longer waited for before the controller commits the
    # drop; only a member that stalls with its connection open is dropped (--pause-member-ms), and
    # nothing is lost unless the controller then elects it, so the history shows it: a PUT_OK without
    # the ack of a member the committed SyncStateSet still holds
    "BugShrinkBeforeCommit": ChaosCatch(None, needs_pause=True,
                                        history_test="test_chaos_failover_history_catches_a_shrink_counted_"
                                                     "before_its_commit"),
}

# kill -9 with the transient store pool (seed 001): the write buffer dies with the process, so an
# acknowledgement of what was only appended to it is lost at the kill.  With a slave it is not:
# a slave reads only committed data, so its ack waits for the commit (ChaosOptions refuses that).
KILL9_TSP_CATCHES = {
    **KILL9_CATCHES,
    "BugAckOnWrote": ChaosCatch("test_chaos_with_the_transient_store_pool_catches_an_ack_of_the_write_buffer",
                                needs_no_slave=True),
}
TSP_KILL9 = "kill -9 --transient-store-pool"

WRITE_PATH_MODES = {"kill -9": KILL9_CATCHES, TSP_KILL9: KILL9_TSP_CATCHES, "--power-loss": POWER_LOSS_CATCHES}


def _shown(table: dict[str, ChaosCatch]) -> str:
    def needs(c: ChaosCatch) -> str:
        if c.needs_no_slave:
            return " (with --replicas 0)"
        if c.needs_pause:
            return " (with --pause-member-ms and --failover-trace)"
        if c.needs_trace:
            return " (with --failover-trace)"
        if c.needs_slow_member:
            return " (with --slow-member-lag-ms" + (" or --failover-trace)" if c.history_test else ")")
        return ""
    return ", ".join(f"{b}{needs(c)}" for b, c in table.items())


def check_write_path_reach(mode: str, bugs: tuple[str, ...], replicas: int = 0) -> None:
    """ConfigError (exit 2) for a write-path switch the chaos ``mode`` is not shown to reach (with
    ``replicas`` slaves)."""
    table = WRITE_PATH_MODES[mode]
    for bug in bugs:
        if bug not in table:
            others = [m for m, t in WRITE_PATH_MODES.items() if bug in t and m != mode]
            elsewhere = f"chaos {' or '.join(others)} does, and " if others else ""
            raise ConfigError(f"--bug {bug}: no chaos {mode} run is shown to reach it (it catches {_shown(table)}); "
                              f"{elsewhere}ackorder fuzz --bug {bug} does")
        if table[bug].needs_no_slave and replicas:
            raise ConfigError(f"--bug {bug} with {mode}: bites only with --replicas 0 (a slave reads only committed "
                              "data, so a PUT_OK that waits for its ack waits for the commit)")


def check_failover_reach(bugs: tuple[str, ...], slow_member_lag_ms: int, traced: bool = False,
                         pause_member_ms: int = 0) -> None:
    """ConfigError (exit 2) for a failover switch chaos --failover is not shown to reach, or one
    that needs the slow member, the paused one, or the check of the run's history, without it."""
    for bug in bugs:
        catch = FAILOVER_CATCHES.get(bug)
        if catch is None:
            raise ConfigError(f"--failover-bug {bug}: no chaos --failover run is shown to reach it (it catches "
                              f"{_shown(FAILOVER_CATCHES)}); ackorder fuzz --model failover --bug {bug} does")
        if catch.needs_pause and not pause_member_ms:
            raise ConfigError(f"--failover-bug {bug}: bites only when a member is dropped from the SyncStateSet: add "
                              "--pause-member-ms (e.g. 2500) and --failover-trace FILE (nothing is lost, so the run's "
                              "own checks pass)")
        if traced and catch.history_test is not None:
            continue
        if catch.needs_trace:
            raise ConfigError(f"--failover-bug {bug}: caught only by the check of the run's history: add "
                              "--failover-trace FILE (nothing is lost, so the run's own checks pass)")
        if catch.needs_slow_member and not slow_member_lag_ms:
            raise ConfigError(f"--failover-bug {bug}: bites only with --slow-member-lag-ms (e.g. 300): on loopback "
                              "every slave holds each write before the master's fsync ends"
                              + (", or with --failover-trace FILE (the run's history shows it)"
                                 if catch.history_test else ""))


# `chaos --failover --controllers N --controller-bug NAME`: the controllers' seeded defects a run
# catches: a takeover without grace (a moved shard deposes a live master) and an owner acting after
# its lease (the paused owner of FAULTS_BEFORE).  The two fence bugs need a stale commit timed
# between a takeover and the next write: reference/tests/test_controller_cluster.py times one.
CHAOS_CONTROLLER_BUGS = ("BugNoTakeoverGrace", "BugActAfterLeaseExpired")


# --failover --nemesis (reference/real/nemesis_chaos.py): the failover switches a nemesis run is shown
# to catch, each with the nemeses its test runs and how it fails.  The other failover switches and why
# no nemesis run is shown to reach them: docs/chaos.md ("What the nemeses catch").
@attrs.frozen
class NemesisCatch:
    nemesis: tuple[str, ...]    # the nemeses its test runs (the run must have the first)
    how: str                    # the check that fails
    test: str = "test_nemesis_catches_a_failover_switch"


NEMESIS_CATCHES = {
    # the master, cut from the controller only, proposes to drop the slaves the new master took; the held
    # proposal lands after the heal and, unfenced, is committed: a SyncStateSet without its master
    "BugAlterWithoutFencing": NemesisCatch(("isolate-master",), "SSSContainsMaster (the controller watch)",
                                           "test_nemesis_isolating_the_master_catches_an_alter_without_fencing"),
    # the master, cut from its slaves and the controller while producers reach it, acks alone; the new
    # master lacks those records
    "BugNoAllAck": NemesisCatch(("partition", "isolate-master"), "lost, and VisibleImpliesReplicated"),
    # an election that keeps the epoch: no broker takes the role (its epoch is not newer): stuck
    "BugElectKeepsEpoch": NemesisCatch(("kill", "partition"), "stuck: no master serves after the heal"),
    # a master cut off but running is never replaced; once the controller counts it dead after a partition
    # of the controller, nothing elects anyone: stuck (a liveness defect)
    "BugElectOnlyOnMasterDeath": NemesisCatch(("partition", "isolate-master"),
                                              "stuck: no master after the heal (liveness)"),
}


def check_nemesis_reach(bugs: tuple[str, ...], nemeses: tuple[str, ...], traced: bool = False) -> None:
    """ConfigError (exit 2) for a failover switch no nemesis run is shown to catch, or one whose
    nemesis the run does not have."""
    for bug in bugs:
        catch = NEMESIS_CATCHES.get(bug)
        if catch is None:
            shown = ", ".join(f"{b} (with --nemesis {c.nemesis[0]})" for b, c in NEMESIS_CATCHES.items())
            raise ConfigError(f"--failover-bug {bug}: no --nemesis run is shown to reach it (it catches {shown}; "
                              "docs/chaos.md says why not the others); chaos --failover without --nemesis or "
                              f"ackorder fuzz --model failover --bug {bug}")
        if catch.nemesis[0] not in nemeses:
            raise ConfigError(f"--failover-bug {bug}: caught with --nemesis {','.join(catch.nemesis)}, and this run "
                              f"lacks {catch.nemesis[0]}")
