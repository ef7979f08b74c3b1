"""A failed pwrite with later records behind it, in both runtimes that drive the master core: the
real loop (reference/real/master_server.py ``_perform``/``_write``) and the simulator
(reference/sim/cluster.py ``puts_in_one_turn``/``_write``).  Four puts of one turn, 120-byte
records in 256-byte segments: A [0, 120) and B [120, 240), the blank [240, 256), then C
[256, 376) and D [376, 436) in the next segment.  The first run (A, B, the blank) fails inside B;
the second run (C, D) was issued before the failure and must never reach the page cache: a
restart would find D, whose producer was told SERVICE_NOT_AVAILABLE."""

from __future__ import annotations

import attrs

from reference.config import StoreConfig
from reference.real.master_server import MasterRuntime
from reference.real.options import MasterOptions
from reference.sim.cluster import Cluster
from reference.sim.disk import sim_disk_factory
from reference.status import PutStatus as S

CFG = attrs.evolve(StoreConfig(), mapped_file_size_commit_log=256, max_message_size=100, os_page_size=64)
BODIES = (b"a" * 100, b"b" * 100, b"c" * 100, b"d" * 40)
EXPECTED = [S.PUT_OK, S.UNKNOWN_ERROR, S.SERVICE_NOT_AVAILABLE, S.SERVICE_NOT_AVAILABLE]


def test_the_simulator_cancels_the_run_behind_a_failed_one():
    c = Cluster(CFG, (), sim_disk_factory)
    faults = [("short", 130)]
    c.write_fault = lambda length: faults.pop(0) if faults else None
    rids = c.puts_in_one_turn(list(BODIES))
    assert [S(c.responses[r][-1]) for r in rids] == EXPECTED
    assert c.faults["write_cancelled"] == 1 and c.faults["write_fault_in_a_run"] == 1
    assert c.master_disk.read(256, 0, 256) == bytes(256), "a cancelled write reached the page cache"
    assert c.page_end == 120 and not c.failed
    c.master_process_crash()
    c.master_restart()
    assert c.master.log.index.count == 1 and not c.failed       # A only: nothing resurrected


def test_the_real_loop_cancels_the_run_behind_a_failed_one(tmp_path):
    rt = MasterRuntime(MasterOptions(directory=tmp_path, config=CFG, port=0, ha_port=0), log=lambda m: None)
    try:
        rt.store.fail_write_after, rt.store.fail_write_kind = 0, "short"   # the first pwrite copies half
        for rid, body in enumerate(BODIES, 1):
            rt.core.put(rid, rid, body, 0)
        rt._perform(0)
        assert [rt.statuses[int(s)] for s in (S.PUT_OK, S.UNKNOWN_ERROR, S.SERVICE_NOT_AVAILABLE)] == [1, 1, 2]
        assert rt.stats["writes_cancelled"] == 2 and rt.stats["pwrites"] == 1
        assert rt.stats["writes_across_segment_roll"] == 0, "a cancelled run counted as a write across a roll"
        assert not (tmp_path / "commitlog" / f"{256:020d}").exists() or \
            rt.store.read(256, 0, 256) == bytes(256), "a cancelled write reached the page cache"
        assert not rt.core.writes and not rt.core.writable
    finally:
        rt.close_role()
