"""Recovery that resumes at a checkpoint (reference/sim/disk.py) against recovery from scratch.

The simulated disk rescans only the segments changed since its last recovery (and the last
scan's tail segment); the simulator's ghost index is the previous one cut back to that
checkpoint.  Here every restart of many seeded runs is recovered both ways — the resumed
scan of the disk, and a from-scratch scan of a copy of the same bytes — and the two must
give the same log: end, records, checkpoints, dropped regions, tail and ghost index."""

import copy

import pytest

from reference.commitlog import LogIndex
from reference.record import encode, scan_log
from reference.sim import cluster as cluster_mod
from reference.sim.disk import SimDisk
from reference.sim.params import draw
from reference.sim.world import World

SEG = 256


def _index_state(index: LogIndex) -> tuple:
    return (list(index.starts), list(index.ends), list(index.keys), bytes(index._chains), index.last_chain,
            sorted(index.checkpoints.items()))


def test_resumed_recovery_equals_recovery_from_scratch(monkeypatch):
    recover = cluster_mod._recover
    resumed = []

    def both_ways(disk, segment_size, keep_torn=False, previous=None):
        fresh_disk = copy.deepcopy(disk)
        fresh_disk._last = None                       # no memory of an earlier scan: from segment 0
        scan, ghost = recover(disk, segment_size, keep_torn, previous)
        want, want_ghost = recover(fresh_disk, segment_size, keep_torn)
        assert scan == want
        assert _index_state(ghost) == _index_state(want_ghost)
        assert disk.segments == fresh_disk.segments
        resumed.append(ghost is previous)
        return scan, ghost

    monkeypatch.setattr(cluster_mod, "_recover", both_ways)
    restarts = 0
    for seed in range(12):
        out = World(draw(seed, {"mapped_file_size_commit_log": SEG})).run(3_000)
        assert out.violation is None, (seed, out.message)
        restarts += out.actions.get("Recover", 0) + out.actions.get("ReplicaRestart", 0)
    assert len(resumed) == restarts >= 20
    assert sum(resumed) >= restarts // 2, "most restarts resume at a checkpoint"


def test_resume_point_is_the_lowest_segment_changed_since():
    disk = SimDisk(SEG)
    data = b"".join(encode(k, bytes([k]) * 100) for k in range(1, 3))     # two records: 240 bytes
    pad = (SEG - len(data)).to_bytes(4, "big") + (0xCBD43194).to_bytes(4, "big") + bytes(SEG - len(data) - 8)
    for start in range(0, 5 * SEG, SEG):
        disk.write(start, 0, data + pad if start < 4 * SEG else data)
    full = disk.recover()
    assert full.end_offset == 4 * SEG + len(data) and full.record_count == 10
    assert len(disk.resume_point(False)) == 5          # nothing changed: only the tail segment again
    disk.write(2 * SEG, 0, data)                        # the same bytes, but written: rescanned
    assert [cp.start for cp in disk.resume_point(False)][-1] == 2 * SEG
    assert disk.resume_point(True) == ()                # another scan (keep_torn): from the start

    read = []
    seen = []
    scan = disk.recover(on_record=lambda *rec: seen.append(rec[0]), on_resume=lambda cp: read.append(cp.start))
    assert read == [2 * SEG] and seen[0] == 2 * SEG and len(seen) == 6
    assert scan == scan_log(list(disk.segments), lambda s: bytes(disk.segments[s]), SEG)


def test_a_cut_inside_the_prefix_rescans_from_it():
    disk = SimDisk(SEG)
    data = b"".join(encode(k, bytes([k]) * 100) for k in range(1, 3))
    pad = (SEG - len(data)).to_bytes(4, "big") + (0xCBD43194).to_bytes(4, "big") + bytes(SEG - len(data) - 8)
    for start in range(0, 4 * SEG, SEG):
        disk.write(start, 0, data + pad)
    disk.recover()
    disk.machine_crash(SEG + 150)                       # tears the second record of segment 1
    assert [cp.start for cp in disk.resume_point(False)][-1] == SEG
    scan = disk.recover(on_resume=lambda cp: None)
    assert scan.end_offset == SEG + 120 and scan.record_count == 3 and scan.dropped
    assert set(disk.segments) == {0, SEG}
