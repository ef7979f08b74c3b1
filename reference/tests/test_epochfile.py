"""EpochFileCache and its checkpoint: the rules, the spec's answers on random
inputs, the encoding's error reports, and the real file (fsync, .bak, power loss)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.failover.epochfile import (
    EpochEntry, EpochFileCache, EpochFileError, decode_epoch_file, encode_epoch_file, encoded_size_bytes,
)
from reference.real.epochfile import load_epoch_file, write_epoch_file
from reference.real.powerloss import RecordingOps
from spec.failover import functions as sf
from spec.failover.config import FailoverConfig

SMALL = st.integers(min_value=0, max_value=6)
ENTRY = st.tuples(SMALL, SMALL)
ANY_CACHE = st.lists(ENTRY, max_size=5).map(tuple)               # possibly out of order (the bug's files)


@st.composite
def ordered_caches(draw, max_size=5):
    """Caches in E1 order, the first starting at 0 (what a master holds)."""
    n = draw(st.integers(min_value=1, max_value=max_size))
    epochs = sorted(draw(st.sets(st.integers(min_value=1, max_value=9), min_size=n, max_size=n)))
    starts = [0] + sorted(draw(st.lists(SMALL, min_size=n - 1, max_size=n - 1)))
    return tuple(zip(epochs, starts))


def cfg(*bugs: str) -> FailoverConfig:
    return FailoverConfig(brokers=("b1", "b2", "b3"), bugs=frozenset(bugs))


# --- the rules ---------------------------------------------------------------------------------

def test_append_takes_a_larger_epoch_at_or_after_the_last_start():
    c = EpochFileCache(((1, 0), (3, 5)))
    assert c.append_entry((4, 5)).entries[-1] == (4, 5)          # an equal start is kept (the spec's choice)
    assert c.append_entry((4, 9)).entries[-1] == (4, 9)
    assert c.append_entry((3, 9)) is c                           # same epoch: refused
    assert c.append_entry((2, 9)) is c                           # older epoch: refused
    assert c.append_entry((4, 4)) is c                           # starts before the last: refused
    assert EpochFileCache().append_entry((7, 3)).entries == ((7, 3),)


def test_bug_epoch_append_unchecked_lets_a_disordered_entry_in():
    c = EpochFileCache(((1, 0), (3, 5)))
    bad = c.append_entry((2, 1), bugs=frozenset({"BugEpochAppendUnchecked"}))
    assert bad.entries == ((1, 0), (3, 5), (2, 1)) and not bad.ordered
    spec = sf.append_entry(cfg("BugEpochAppendUnchecked"), c.entries, (2, 1))
    assert bad.entries == spec and sf.append_entry(cfg(), c.entries, (2, 1)) == c.entries


def test_lookups():
    c = EpochFileCache(((1, 0), (2, 4), (3, 4), (5, 9)))        # epoch 2 is empty: it starts where 3 does
    assert [c.epoch_at(o) for o in (0, 3, 4, 8, 9, 20)] == [1, 1, 3, 3, 5, 5]
    assert c.end_offset_of_epoch(1, 12) == 4 and c.end_offset_of_epoch(2, 12) == 4
    assert c.end_offset_of_epoch(5, 12) == 12 and c.end_offset_of_epoch(4, 12) is None
    assert c.last_entry() == (5, 9) and c.last_epoch() == 5 and c.last_start() == 9
    assert EpochFileCache().last_entry() is None and EpochFileCache().epoch_at(3) == 0
    assert c.truncate_suffix_by_offset(4).entries == ((1, 0),)
    assert c.truncate_suffix_by_epoch(3).entries == ((1, 0), (2, 4))
    assert c.truncate_beyond(4).entries == ((1, 0), (2, 4), (3, 4))


@settings(max_examples=300, deadline=None)
@given(ANY_CACHE, ENTRY, SMALL, SMALL, st.booleans())
def test_every_operation_answers_as_the_spec(entries, entry, offset, epoch, unchecked):
    c = EpochFileCache(entries)
    bugs = frozenset({"BugEpochAppendUnchecked"}) if unchecked else frozenset()
    assert c.append_entry(entry, bugs=bugs).entries == sf.append_entry(cfg(*bugs), entries, entry)
    assert c.truncate_suffix_by_offset(offset).entries == sf.truncate_suffix_by_offset(entries, offset)
    assert c.truncate_suffix_by_epoch(epoch).entries == sf.truncate_suffix_by_epoch(entries, epoch)
    assert c.truncate_beyond(offset).entries == sf.truncate_beyond(entries, offset)
    k = c.covering_index(offset)
    assert (0 if k is None else k + 1) == sf.covering_index(entries, offset)
    assert c.epoch_at(offset) == sf.epoch_at(entries, offset)
    assert (c.last_epoch(), c.last_start()) == (sf.last_epoch(entries), sf.last_start(entries))
    for k in range(len(entries)):
        assert c.entry_end(k, offset) == sf.entry_end(entries, k + 1, offset)


# --- the encoding ------------------------------------------------------------------------------

@given(ANY_CACHE)
def test_encoding_round_trips(entries):
    c = EpochFileCache(entries)
    data = encode_epoch_file(c)
    assert len(data) == encoded_size_bytes(len(entries))
    assert decode_epoch_file(data, "f", check_order=False) == c


@settings(max_examples=200, deadline=None)
@given(ordered_caches(), st.data())
def test_any_flipped_byte_is_an_error_naming_the_file_and_a_byte(entries, data):
    raw = bytearray(encode_epoch_file(EpochFileCache(entries)))
    at = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    raw[at] ^= data.draw(st.integers(min_value=1, max_value=255))
    with pytest.raises(EpochFileError) as err:
        decode_epoch_file(bytes(raw), "/data/epochFileCheckpoint")
    assert str(err.value).startswith("/data/epochFileCheckpoint: at byte ")
    assert 0 <= err.value.offset_bytes <= len(raw)


@given(ordered_caches(), st.data())
def test_a_torn_file_is_reported_torn_at_its_end(entries, data):
    raw = encode_epoch_file(EpochFileCache(entries))
    cut = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    with pytest.raises(EpochFileError) as err:
        decode_epoch_file(raw[:cut], "f")
    assert "torn" in err.value.problem and err.value.offset_bytes == cut


def test_each_problem_is_named():
    good = encode_epoch_file(EpochFileCache(((1, 0), (2, 7))))
    crc_at = len(good) - 4
    cases = {
        b"XXXX" + good[4:]: (0, "bad magic"),
        b"AAAA" + good[4:]: (0, "bad magic"),                  # below "EPCH" too
        good[:8]: (8, "torn: 8 bytes, the count 2 needs 44"),  # the header whole, nothing after it
        good[:4] + (10**6).to_bytes(4, "big") + good[8:]: (4, "bad count"),
        good[:crc_at] + bytes(4): (crc_at, "bad CRC"),
        good + b"\0": (len(good), "1 bytes after the CRC: the count 2 is wrong"),
        good + bytes(3): (len(good), "3 bytes after the CRC: the count 2 is wrong"),
    }
    for raw, (offset, words) in cases.items():
        with pytest.raises(EpochFileError) as err:
            decode_epoch_file(raw, "ck")
        assert err.value.offset_bytes == offset and words in err.value.problem, str(err.value)
    disordered = encode_epoch_file(EpochFileCache(((2, 0), (1, 7))))
    with pytest.raises(EpochFileError, match=r"ck: at byte 24: entry 1 \(1, 7\) does not follow \(2, 0\) \(E1\)"):
        decode_epoch_file(disordered, "ck")
    assert decode_epoch_file(disordered, "ck", check_order=False).entries == ((2, 0), (1, 7))


def test_the_format_starts_with_its_magic_and_holds_at_most_65536_entries():
    """The checkpoint's on-disk format, written out: "EPCH", a count, the entries, a CRC; a file of
    65,536 entries (MAX_EPOCH_ENTRIES) is read, one of 65,537 is refused at its count."""
    assert encode_epoch_file(EpochFileCache(((1, 0),)))[:4] == b"EPCH"
    full = EpochFileCache(tuple((e, e) for e in range(1, 65_537)))
    assert decode_epoch_file(encode_epoch_file(full), "ck") == full
    one_more = encode_epoch_file(EpochFileCache(((65_537, 65_537),)))
    data = encode_epoch_file(full)
    over = data[:4] + (65_537).to_bytes(4, "big") + data[8:-4] + one_more[8:-4] + data[-4:]
    with pytest.raises(EpochFileError, match="bad count 65537: more than 65536 entries"):
        decode_epoch_file(over, "ck")


# --- the real file -----------------------------------------------------------------------------

class SyncCounter:
    """Wraps os.fdatasync and os.fsync: counts the calls, then really makes them."""

    def __init__(self, monkeypatch) -> None:
        self.calls: list[str] = []
        real_fdatasync, real_fsync = os.fdatasync, os.fsync

        def fdatasync(fd):
            self.calls.append("fdatasync")
            return real_fdatasync(fd)

        def fsync(fd):
            self.calls.append("fsync")
            return real_fsync(fd)
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        monkeypatch.setattr(os, "fsync", fsync)


def test_write_fsyncs_the_file_and_the_directory_and_keeps_a_bak(tmp_path, monkeypatch):
    path = tmp_path / "epochFileCheckpoint"
    syncs = SyncCounter(monkeypatch)
    write_epoch_file(path, EpochFileCache(((1, 0),)))
    assert syncs.calls == ["fdatasync", "fsync"]          # the tmp file's data, then the directory
    write_epoch_file(path, EpochFileCache(((1, 0), (2, 5))))
    assert syncs.calls == ["fdatasync", "fsync"] * 2
    loaded = load_epoch_file(path)
    assert loaded.cache.entries == ((1, 0), (2, 5)) and loaded.source == path and loaded.fallback_reason is None
    assert decode_epoch_file((tmp_path / "epochFileCheckpoint.bak").read_bytes(), "bak").entries == ((1, 0),)
    assert not (tmp_path / "epochFileCheckpoint.tmp").exists()


def test_bug_epoch_file_not_durable_makes_no_fsync(tmp_path, monkeypatch):
    syncs = SyncCounter(monkeypatch)
    write_epoch_file(tmp_path / "e", EpochFileCache(((1, 0),)), durable=False)
    assert syncs.calls == []
    assert load_epoch_file(tmp_path / "e").cache.entries == ((1, 0),)      # the page cache has it


def test_a_torn_file_falls_back_to_bak_and_says_why(tmp_path):
    path = tmp_path / "epochFileCheckpoint"
    write_epoch_file(path, EpochFileCache(((1, 0),)))
    write_epoch_file(path, EpochFileCache(((1, 0), (2, 5))))
    raw = path.read_bytes()
    path.write_bytes(raw[:-6])
    loaded = load_epoch_file(path)
    assert loaded.cache.entries == ((1, 0),) and loaded.source.name == "epochFileCheckpoint.bak"
    assert loaded.fallback_reason == f"{path}: at byte {len(raw) - 6}: torn: {len(raw) - 6} bytes, the count 2 needs {len(raw)}"


def test_a_bad_crc_without_a_bak_is_an_error_naming_the_file_and_offset(tmp_path):
    path = tmp_path / "epochFileCheckpoint"
    write_epoch_file(path, EpochFileCache(((1, 0), (2, 5))))
    raw = bytearray(path.read_bytes())
    raw[12] ^= 0x40                                         # inside the first entry
    path.write_bytes(bytes(raw))
    with pytest.raises(EpochFileError) as err:
        load_epoch_file(path)
    assert str(err.value).startswith(f"{path}: at byte {len(raw) - 4}: bad CRC")
    assert f"{path}.bak: at byte 0: missing" in str(err.value)


def test_a_bad_current_file_does_not_replace_a_good_bak(tmp_path):
    path = tmp_path / "e"
    write_epoch_file(path, EpochFileCache(((1, 0),)))
    write_epoch_file(path, EpochFileCache(((1, 0), (2, 5))))
    path.write_bytes(b"garbage")
    write_epoch_file(path, EpochFileCache(((1, 0), (2, 5), (3, 9))))
    assert load_epoch_file(Path(f"{path}.bak")).cache.entries == ((1, 0),)
    assert load_epoch_file(path).cache.entries == ((1, 0), (2, 5), (3, 9))


def test_no_file_is_a_new_broker(tmp_path):
    loaded = load_epoch_file(tmp_path / "e")
    assert loaded.cache.entries == () and loaded.source is None


# --- power loss over the recorded operations ---------------------------------------------------

def power_loss_states(ops) -> list[dict[str, bytes]]:
    """What a power loss after ``ops`` may leave, at the extremes: each file's content as of
    its last fdatasync or as written, and the directory as of its last fsync or as renamed
    (four states).  Files are followed through renames (inodes)."""
    names: dict[str, int] = {}
    content: dict[int, bytearray] = {}
    synced: dict[int, bytes] = {}
    durable_names: dict[str, int] = {}
    for op in ops:
        if op.kind == "create":
            ino = len(content)
            names[op.name], content[ino], synced[ino] = ino, bytearray(), b""
        elif op.kind == "ftruncate":
            del content[names[op.name]][op.offset:]
        elif op.kind == "pwrite":
            buf = content[names[op.name]]
            buf[op.offset:op.offset + len(op.data)] = op.data
        elif op.kind == "fdatasync":
            synced[names[op.name]] = bytes(content[names[op.name]])
        elif op.kind == "rename":
            names[op.dst] = names.pop(op.name)
        elif op.kind == "fsync_dir":
            durable_names = dict(names)
    return [{n: (synced[i] if sync_content else bytes(content[i])) for n, i in table.items()}
            for table in (durable_names, names) for sync_content in (True, False)]


def load_state(tmp_path: Path, state: dict[str, bytes], k: int) -> tuple:
    d = tmp_path / f"state{k}"
    d.mkdir()
    for name, data in state.items():
        (d / name).write_bytes(data)
    return load_epoch_file(d / "e").cache.entries


@pytest.mark.parametrize("bug", [False, True])
def test_power_loss_keeps_the_last_write_unless_bug_epoch_file_not_durable(tmp_path, bug):
    """The spec's BrokerPowerLoss: the epoch file survives whole; under B21 its last write
    may be lost (lastLost).  Every prefix of the second write's operations is a crash point."""
    a, b = ((1, 0),), ((1, 0), (2, 5))
    ops = RecordingOps()
    work = tmp_path / "work"
    work.mkdir()
    write_epoch_file(work / "e", EpochFileCache(a), ops=ops)
    first = len(ops.ops)
    write_epoch_file(work / "e", EpochFileCache(b), ops=ops, durable=not bug)
    seen, k = set(), 0
    for point in range(first, len(ops.ops) + 1):
        for state in power_loss_states(ops.ops[:point]):
            k += 1
            seen.add(load_state(tmp_path, state, k))
    final = {load_state(tmp_path, s, (k := k + 1)) for s in power_loss_states(ops.ops)}
    assert seen <= {a, b}                                  # whole, never torn, never empty
    assert final == ({a, b} if bug else {b})               # returned: durable, or (B21) lost
