"""Frames: round trips, incremental parsing, and malformed input named."""

import struct

import pytest

from reference.frames import Ack, Data, FrameDecoder, FrameError, Handshake, Put, Refuse, Response, encode

FRAMES = [Put(1, 42, b"body"), Response(1, 0, 99), Handshake(128, b"\x01" * 16, "r1", 3), Data(0, b"abc"),
          Ack(512, 4), Refuse("divergent log")]


def test_round_trip_in_pieces():
    stream = b"".join(encode(f) for f in FRAMES)
    decoder, out = FrameDecoder(), []
    for i in range(0, len(stream), 7):       # arbitrary TCP segmentation
        out += decoder.feed(stream[i: i + 7])
    assert out == FRAMES and decoder.buffered == 0


@pytest.mark.parametrize("raw, problem", [
    (struct.pack(">IB", 0, 1), "frame length 0"),
    (struct.pack(">IB", 10**9, 1), "exceeds the limit"),
    (struct.pack(">IB", 1, 99), "unknown frame type 99"),
    (struct.pack(">IB", 5, 5) + b"\0" * 4, "ACK frame has 4 payload bytes"),
    (struct.pack(">IB", 18, 5) + b"\0" * 17, "ACK frame has 17 payload bytes, expected 16"),
    (struct.pack(">IB", 3, 1) + b"\0\0", "PUT frame has 2 payload bytes"),
    (struct.pack(">IB", 33, 3) + b"\0" * 32, None),  # a handshake with an empty name is fine
])
def test_malformed_frames_are_named(raw, problem):
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    if problem is None:
        assert decoder.feed(raw)[0].name == ""
        return
    with pytest.raises(FrameError, match=problem):
        decoder.feed(raw)
