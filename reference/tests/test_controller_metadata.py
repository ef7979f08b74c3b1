"""The controller's metadata records and file (reference/failover/metadata.py):
encoding, the recovery scan (a torn tail cut and named with its offset, a
bad record found), compaction, and durability through a real file."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.failover.effects import MetadataRecord
from reference.failover.metadata import HEAD, MetadataFile, decode_payload, encode, latest, scan

ids = st.integers(1, 2**62)
records = st.builds(
    MetadataRecord, group=st.text(min_size=1, max_size=20), brokers=st.lists(ids, max_size=5).map(tuple),
    master_id=st.integers(0, 2**62), master_epoch=st.integers(0, 2**32 - 1),
    sync_state_set=st.lists(ids, max_size=5).map(tuple), sss_epoch=st.integers(0, 2**32 - 1))

A1 = MetadataRecord("broker-a", (1, 2, 3), 1, 1, (1,), 1)
A2 = MetadataRecord("broker-a", (1, 2, 3), 1, 1, (1, 2), 2)
B1 = MetadataRecord("broker-b", (7,), 7, 1, (7,), 1)


@settings(max_examples=200, derandomize=True)
@given(rs=st.lists(records, max_size=6))
def test_records_round_trip(rs):
    buf = b"".join(encode(r) for r in rs)
    s = scan(buf)
    assert s.records == tuple(rs) and s.valid_end == len(buf) and s.problem is None


@settings(max_examples=200, derandomize=True)
@given(rs=st.lists(records, min_size=1, max_size=4), data=st.data())
def test_any_cut_keeps_exactly_the_whole_records_before_it(rs, data):
    encoded = [encode(r) for r in rs]
    buf = b"".join(encoded)
    cut = data.draw(st.integers(0, len(buf) - 1))
    s = scan(buf[:cut])
    ends = [sum(len(e) for e in encoded[:k]) for k in range(len(encoded) + 1)]
    whole = max(k for k, end in enumerate(ends) if end <= cut)
    assert s.records == tuple(rs[:whole]) and s.valid_end == ends[whole]
    assert (s.problem is None) == (cut == ends[whole])
    if s.problem:
        assert f"offset {ends[whole]}" in s.problem and "torn" in s.problem


@settings(max_examples=200, derandomize=True)
@given(rs=st.lists(records, min_size=1, max_size=4), data=st.data())
def test_a_flipped_bit_is_never_read_as_a_record(rs, data):
    buf = bytearray(b"".join(encode(r) for r in rs))
    bit = data.draw(st.integers(0, len(buf) * 8 - 1))
    buf[bit // 8] ^= 1 << (bit % 8)
    s = scan(bytes(buf))
    assert s.problem is not None
    assert all(r in rs for r in s.records) and len(s.records) < len(rs)


def test_a_bad_record_names_the_file_and_offset():
    buf = bytearray(encode(A1) + encode(A2))
    buf[len(encode(A1)) + HEAD.size] ^= 0xFF
    s = scan(bytes(buf), "/d/controller.meta")
    assert s.records == (A1,)
    assert s.problem == f"/d/controller.meta offset {len(encode(A1))}: record CRC mismatch"


def test_a_payload_that_does_not_parse_is_named():
    with pytest.raises(ValueError, match="does not hold"):
        decode_payload(encode(A1)[HEAD.size:] + b"x")


def test_latest_keeps_the_last_record_of_each_group():
    assert latest([A1, B1, A2]) == [A2, B1]


def test_file_recovery_cuts_the_torn_tail_and_compacts(tmp_path):
    f = MetadataFile(tmp_path)
    assert f.recover().records == ()
    for r in (A1, B1, A2):
        f.append(encode(r))
    f.fsync()
    f.close()
    with open(tmp_path / "controller.meta", "ab") as raw:
        raw.write(encode(B1)[:-3])                         # the last append, torn
    g = MetadataFile(tmp_path)
    rec = g.recover()
    assert rec.records == (A1, B1, A2) and rec.groups == (A2, B1)
    assert "torn record" in rec.problem and str(tmp_path / "controller.meta") in rec.problem
    assert rec.dropped_bytes == len(encode(B1)) - 3
    g.close()
    assert (tmp_path / "controller.meta").read_bytes() == encode(A2) + encode(B1)      # compacted
    h = MetadataFile(tmp_path)
    assert h.recover().problem is None
    h.append(encode(A1))
    h.fsync()
    h.close()
    assert scan((tmp_path / "controller.meta").read_bytes()).records == (A2, B1, A1)
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_an_unreadable_directory_is_an_os_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        MetadataFile(tmp_path / "file").recover()
    assert os.path.exists(tmp_path / "file")
