"""Frames: round trips, incremental parsing, and malformed input named."""

import struct
import zlib

import pytest

from reference.frames import (MAX_READ_BYTES, Ack, Data, FrameDecoder, FrameError, FrameType, Handshake, Put, Refuse,
                              Response, encode)

READ_TYPE = int(FrameType.READ)

FRAMES = [Put(1, 42, b"body"), Response(1, 0, 99), Handshake(128, b"\x01" * 16, "r1", 3), Data(0, b"abc"),
          Ack(512, 4), Refuse("divergent log")]


def test_round_trip_in_pieces():
    stream = b"".join(encode(f) for f in FRAMES)
    decoder, out = FrameDecoder(), []
    for i in range(0, len(stream), 7):       # arbitrary TCP segmentation
        out += decoder.feed(stream[i: i + 7])
    assert out == FRAMES and decoder.buffered == 0


def framed(kind: int, payload: bytes) -> bytes:
    """A frame with a correct checksum around whatever payload, to reach the checks behind it."""
    body = bytes([kind]) + payload
    return struct.pack(">IB", len(body) + 4, kind) + payload + struct.pack(">I", zlib.crc32(body))


@pytest.mark.parametrize("raw, problem", [
    (struct.pack(">IB", 0, 1), "frame length 0"),
    (struct.pack(">IB", 4, 1) + b"\0" * 3, "frame length 4"),
    (struct.pack(">IB", 10**9, 1), "exceeds the limit"),
    (framed(99, b""), "unknown frame type 99"),
    (framed(5, b"\0" * 4), "ACK frame has 4 payload bytes"),
    (framed(5, b"\0" * 17), "ACK frame has 17 payload bytes, expected 16"),
    (framed(1, b"\0\0"), "PUT frame has 2 payload bytes"),
    (framed(3, b"\0" * 16 + b"\xff" * 16 + b"\xc3"), "not UTF-8"),
    (struct.pack(">IB", 21, 5) + b"\0" * 20, "checksum mismatch"),
    (framed(3, b"\0" * 32), None),  # a handshake with an empty name is fine
    # found by `ackorder mutate` (issue 36): the bound `0 < max_bytes <= MAX_READ_BYTES` turned to `!=` let a
    # consumer ask for any size but the limit itself; no test sent a READ past the bound or of 0 bytes
    (framed(READ_TYPE, struct.pack(">QQI", 1, 0, MAX_READ_BYTES + 1)), f"asks for {MAX_READ_BYTES + 1} bytes"),
    (framed(READ_TYPE, struct.pack(">QQI", 1, 0, 2**32 - 1)), "asks for 4294967295 bytes"),
    (framed(READ_TYPE, struct.pack(">QQI", 1, 0, 0)), "asks for 0 bytes"),
])
def test_malformed_frames_are_named(raw, problem):
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    if problem is None:
        assert decoder.feed(raw)[0].name == ""
        return
    with pytest.raises(FrameError, match=problem):
        decoder.feed(raw)


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: type(f).__name__)
def test_a_flipped_bit_is_never_another_valid_frame(frame):
    """The simulator's ``corrupt`` fault flips one bit: the decoder must refuse the frame
    (or wait for bytes a longer length asks for), never hand over a different frame."""
    raw = encode(frame)
    for bit in range(len(raw) * 8):
        bad = bytearray(raw)
        bad[bit // 8] ^= 1 << (bit % 8)
        decoder = FrameDecoder(max_frame_bytes=1 << 20)
        try:
            got = decoder.feed(bytes(bad))
        except FrameError:
            continue
        assert got == [], f"bit {bit} flipped gave {got}"


def test_the_fast_response_encoding_is_the_encoding():
    from reference.frames import Response, encode, encode_response

    for args in [(1, 0, 0), (2**64 - 1, 8, 2**63), (42, 6, 123456)]:
        assert encode_response(*args) == encode(Response(*args))


def test_every_frame_type_has_its_wire_code_and_round_trips():
    """The type byte is the wire format: a build that renumbers a type speaks another protocol."""
    from reference.frames import EpochQuery, EpochReply, Read, ReadReply

    frames = {1: Put(1, 2, b""), 2: Response(1, 0, 9), 3: Handshake(0, bytes(16), ""), 4: Data(0, b""),
              5: Ack(1), 6: Refuse(""), 7: EpochQuery(), 8: EpochReply(10, 5, ((1, 0), (2, 7))),
              9: Read(1, 0, 1), 10: ReadReply(1, 9, 0, b"x")}
    assert {t.name: int(t) for t in FrameType} == {
        "PUT": 1, "RESPONSE": 2, "HANDSHAKE": 3, "DATA": 4, "ACK": 5, "REFUSE": 6, "EPOCH_QUERY": 7,
        "EPOCH_REPLY": 8, "READ": 9, "READ_REPLY": 10}
    for code, frame in frames.items():
        raw = encode(frame)
        assert raw[4] == code and FrameDecoder().feed(raw) == [frame], frame


def test_optional_fields_default_to_zero():
    """A master outside failover sends DATA of epoch 0 from 0 with confirmOffset 0; a report with
    no record count claims none."""
    assert Data(5, b"x") == Data(5, b"x", 0, 0, 0)
    assert Ack(5) == Ack(5, 0) and Handshake(0, bytes(16), "r") == Handshake(0, bytes(16), "r", 0)


# the fewest payload bytes each type has, and a payload of exactly that many that decodes
NEEDS = [(1, 16, bytes(16)), (2, 17, bytes(17)), (3, 32, bytes(32)), (4, 32, bytes(32)), (5, 16, bytes(16)),
         (8, 16, bytes(16)), (9, 20, bytes(19) + b"\x01"), (10, 24, bytes(24))]


@pytest.mark.parametrize("kind, need, exact", NEEDS, ids=[FrameType(k).name for k, _, _ in NEEDS])
def test_each_type_needs_its_fixed_fields_and_no_more(kind, need, exact):
    with pytest.raises(FrameError, match=f"{FrameType(kind).name} frame has {need - 1} payload bytes"):
        FrameDecoder().feed(framed(kind, exact[:-1]))
    assert len(FrameDecoder().feed(framed(kind, exact))) == 1


def test_the_empty_frames_are_empty():
    from reference.frames import EpochQuery

    assert FrameDecoder().feed(framed(6, b"")) == [Refuse("")]
    assert FrameDecoder().feed(framed(7, b"")) == [EpochQuery()]
    with pytest.raises(FrameError, match="EPOCH_QUERY frame has 1 payload bytes, expected 0"):
        FrameDecoder().feed(framed(7, b"\x00"))
    with pytest.raises(FrameError, match="REFUSE frame: reason is not UTF-8"):
        FrameDecoder().feed(framed(6, b"\xff"))


def test_the_bounds_a_peer_can_reach_in_one_frame():
    """8 MiB frames by default; EPOCH_REPLY up to 65,536 entries; READ of 1 byte to 1 MiB."""
    from reference.frames import EpochReply

    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">IB", 8 * 1024 * 1024, 4)) == []          # waits for the rest
    with pytest.raises(FrameError, match="frame of 8388609 bytes exceeds the limit of 8388608"):
        FrameDecoder().feed(struct.pack(">IB", 8 * 1024 * 1024 + 1, 4))
    most = b"".join(struct.pack(">QQ", e, e) for e in range(65_536))
    reply = FrameDecoder(1 << 21).feed(framed(8, bytes(16) + most))[0]
    assert isinstance(reply, EpochReply) and len(reply.entries) == 65_536
    assert encode(reply) == framed(8, bytes(16) + most)
    with pytest.raises(FrameError, match="up to 65536 entries"):
        FrameDecoder(1 << 21).feed(framed(8, bytes(16) + most + bytes(16)))
    with pytest.raises(AssertionError):
        encode(EpochReply(0, 0, reply.entries + ((1, 1),)))
    assert MAX_READ_BYTES == 1 << 20
    for max_bytes, ok in ((1, True), (1 << 20, True), (0, False), ((1 << 20) + 1, False)):
        raw = framed(READ_TYPE, struct.pack(">QQI", 1, 0, max_bytes))
        if ok:
            assert FrameDecoder().feed(raw)[0].max_bytes == max_bytes
        else:
            with pytest.raises(FrameError, match=f"asks for {max_bytes} bytes: 1..1048576"):
                FrameDecoder().feed(raw)


def test_a_checksum_mismatch_names_the_payload_size_and_the_type():
    raw = bytearray(encode(Put(1, 2, b"abcd")))                     # 20 payload bytes
    raw[-1] ^= 0xFF
    with pytest.raises(FrameError, match=r"^frame checksum mismatch \(20 payload bytes, type byte 1\)$"):
        FrameDecoder().feed(bytes(raw))


@pytest.mark.parametrize("kind, size, expected", [(2, 18, 17), (5, 17, 16), (9, 21, 20)],
                         ids=["RESPONSE", "ACK", "READ"])
def test_a_fixed_size_frame_one_byte_too_long_is_named(kind, size, expected):
    with pytest.raises(FrameError, match=f"{FrameType(kind).name} frame has {size} payload bytes, expected {expected}"):
        FrameDecoder().feed(framed(kind, bytes(size)))
