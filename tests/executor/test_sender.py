"""PipeSender: sends to a worker never block the caller, keep their order, and fail cleanly."""

from __future__ import annotations

import multiprocessing
import threading

from control import clock
from control.executor.host.sender import PipeSender, frame


def _pipe():
    return multiprocessing.get_context("spawn").Pipe(duplex=True)


def test_messages_arrive_in_order_and_unchanged():
    parent, child = _pipe()
    sender = PipeSender(parent, "t")
    msgs = [("batch", i, "x" * (i * 997 % 50_000)) for i in range(200)]
    for m in msgs:
        assert sender.send(m)
    got = [child.recv() for _ in msgs]
    assert got == msgs
    sender.close(flush_timeout_s=1)


def test_a_full_pipe_does_not_block_the_caller():
    """Nobody reads the pipe: Connection.send would block once the socket buffer is full; the
    sender returns at once and hands the rest to its thread."""
    parent, child = _pipe()
    sender = PipeSender(parent, "t")
    big = ("batch", "y" * 1_000_000)  # far beyond a socket buffer
    started = clock.perf_counter()
    for _ in range(5):
        assert sender.send(big)
    took = clock.perf_counter() - started
    assert took < 0.5, f"send blocked for {took:.2f} s"
    assert sender.handed_off >= 1 and sender.pending() >= 1
    # a reader appears: everything arrives, in order
    got = [child.recv() for _ in range(5)]
    assert got == [big] * 5
    sender.close(flush_timeout_s=1)


def test_a_slow_send_does_not_delay_another_workers_send():
    """One worker's pipe is full (it is not reading); a message to another worker still
    goes out at once: the event loop never waits for a slow peer."""
    slow_parent, _slow_child = _pipe()
    fast_parent, fast_child = _pipe()
    slow, fast = PipeSender(slow_parent, "slow"), PipeSender(fast_parent, "fast")
    for _ in range(3):
        slow.send(("batch", "z" * 2_000_000))
    started = clock.perf_counter()
    fast.send(("results", 1))
    assert fast_child.poll(1.0)
    assert fast_child.recv() == ("results", 1)
    assert clock.perf_counter() - started < 0.5
    slow.close()
    fast.close()


def test_a_closed_pipe_marks_the_sender_broken():
    parent, child = _pipe()
    sender = PipeSender(parent, "t")
    child.close()
    deadline = clock.monotonic() + 2
    while sender.send(("hb",)) and clock.monotonic() < deadline:
        threading.Event().wait(0.01)
    assert sender.broken
    assert sender.send(("batch",)) is False


def test_frame_matches_connection_framing():
    """A frame written raw is read back by Connection.recv."""
    parent, child = _pipe()
    import os

    os.write(parent.fileno(), frame(("load", "id", {"a": [1, 2]})))
    assert child.recv() == ("load", "id", {"a": [1, 2]})


def test_a_non_blocking_pipe_gets_every_frame_whole():
    """The loop reader leaves the pipe non-blocking (uvloop does it to every fd it watches),
    and the sender's socket shares that mode: a frame the pipe cannot take at once is still
    written whole by the thread, never dropped half-way (the worker would wait for its rest
    for ever) nor taken for a broken pipe."""
    import os

    parent, child = _pipe()
    os.set_blocking(parent.fileno(), False)
    sender = PipeSender(parent, "t")
    msgs = [("batch", i, "w" * 3_000_000) for i in range(3)]
    for m in msgs:
        assert sender.send(m)
    got = []
    for _ in msgs:
        assert child.poll(10)
        got.append(child.recv())
        threading.Event().wait(0.05)  # a slow reader: the thread waits for room
    assert got == msgs
    assert not sender.broken and sender.handed_off >= 1
    sender.close(flush_timeout_s=1)
