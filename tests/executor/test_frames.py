"""FrameBuffer: worker messages cut out of a pipe's bytes however they are split, a message
still arriving kept until its rest comes, never a wait, and a closed pipe only at its end."""

from __future__ import annotations

import os
import struct

import pytest

from control.executor.host.frames import CorruptStream, FrameBuffer
from control.executor.protocol import wire


def _framed(msg: tuple) -> bytes:
    payload = wire.encode(msg)
    return struct.pack("!i", len(payload)) + payload


MSGS = [("hb", 1, False, ("a",), 3), ("results", "b1", ["x" * 5000]), ("delta", "k", 0, "é")]


def test_every_split_of_the_stream_gives_the_same_messages():
    data = b"".join(_framed(m) for m in MSGS)
    for cut in range(1, len(data)):
        frames = FrameBuffer()
        frames.feed(data[:cut])
        first = frames.take()
        frames.feed(data[cut:])
        assert first + frames.take() == MSGS, cut
        assert frames.partial() == 0


def test_a_half_arrived_message_waits_in_the_buffer():
    frames = FrameBuffer()
    data = _framed(MSGS[1])
    frames.feed(data[:100])
    assert frames.take() == [] and frames.partial() == 100
    frames.feed(data[100:])
    assert frames.take() == [MSGS[1]]


def test_the_long_header_of_connection_framing_is_understood():
    payload = wire.encode(("fetched", "r1", {"v": [1.0] * 10}, None))
    frames = FrameBuffer()
    frames.feed(struct.pack("!i", -1) + struct.pack("!Q", len(payload)) + payload)
    assert frames.take() == [("fetched", "r1", {"v": [1.0] * 10}, None)]


def test_a_message_that_does_not_unpickle_is_skipped_not_the_stream():
    bad = b"not a pickle"
    frames = FrameBuffer()
    frames.feed(struct.pack("!i", len(bad)) + bad + _framed(MSGS[0]))
    assert frames.take() == [MSGS[0]]


def test_an_impossible_length_is_a_corrupt_stream():
    frames = FrameBuffer()
    frames.feed(struct.pack("!i", -7) + b"xxxx")
    with pytest.raises(CorruptStream, match="length -7"):
        frames.take()


def test_reading_never_waits_and_a_closed_pipe_is_only_its_end():
    """On a non-blocking pipe with nothing (or half a message) in it, a read is "nothing more
    yet"; after the writer closes, what it wrote is still delivered, then the end."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    frames = FrameBuffer()
    try:
        assert frames.read_from(r) is False  # empty: BlockingIOError is not a close
        data = _framed(MSGS[1])
        os.write(w, data[:10])
        assert frames.read_from(r) is False and frames.take() == []
        os.write(w, data[10:])
        os.close(w)
        w = -1
        frames.read_from(r)  # the rest (a short read: the end is seen at the next readiness)
        assert frames.take() == [MSGS[1]]
        assert frames.read_from(r) is True  # the end of the stream, once all was read
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
