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
