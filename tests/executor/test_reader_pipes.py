"""The pipe readers on real pipes in the mode the event loop leaves them in (issue 22: healthy
workers killed as "pipe closed (exit code None)").

uvloop's ``add_reader`` puts a watched fd in non-blocking mode; ``Connection.recv`` on such a
pipe, with a message only partly arrived, raises ``BlockingIOError`` half-way (first test: the
mechanism, in Python itself). A child process here writes a message far larger than the pipe's
buffer slowly, in slices: every reader must wait for its rest, deliver it whole, report
progress meanwhile, and report the pipe closed only once the child has closed it."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import struct
import threading
import time

import pytest

from control.executor.host.handle import WorkerHandle
from control.executor.host.reader import LoopReader, ThreadReader
from control.executor.protocol import DeviceInfo, wire
from control.executor.worker.main import WorkerConfig

_CTX = mp.get_context("spawn")
BIG = ("results", "b1", ["z" * 4_000_000])  # far beyond a socket buffer (~200 KiB)
SLICE = 256 * 1024


def _write_slowly(conn, msgs: list[tuple], pause_s: float) -> None:  # noqa: ANN001
    """Child process: write each message framed as ``Connection.send_bytes`` does, in slices
    with a pause between them (a worker starved in the middle of a write), then exit."""
    for msg in msgs:
        payload = wire.encode(msg)
        data = struct.pack("!i", len(payload)) + payload
        for at in range(0, len(data), SLICE):
            os.write(conn.fileno(), data[at : at + SLICE])
            time.sleep(pause_s)
    conn.close()


def _writer(msgs: list[tuple], pause_s: float = 0.02):  # noqa: ANN202
    parent, child = _CTX.Pipe(duplex=True)
    proc = _CTX.Process(target=_write_slowly, args=(child, msgs, pause_s), daemon=True)
    proc.start()
    child.close()
    return parent, proc


def _handle(conn) -> WorkerHandle:  # noqa: ANN001
    handle = WorkerHandle(DeviceInfo("cpu:0", "cpu", 0, 1024, 0), WorkerConfig())
    handle.conn = conn
    return handle


class _Heard:
    """What a reader told: messages, progress, closes (a close sets ``done``)."""

    def __init__(self) -> None:
        self.msgs: list[tuple] = []
        self.progress = 0
        self.closed = 0
        self.done = threading.Event()

    def calls(self) -> tuple:
        def on_message(handle, conn, msg) -> bool:  # noqa: ANN001
            self.msgs.append(msg)
            return True

        def on_closed(handle, conn) -> None:  # noqa: ANN001
            self.closed += 1
            self.done.set()

        return on_message, on_closed, lambda: None, 0.05

    def on_progress(self, handle, conn) -> None:  # noqa: ANN001
        self.progress += 1


def test_connection_recv_on_a_non_blocking_pipe_raises_on_a_half_arrived_message():
    """The mechanism: what a reader using ``recv`` took for a closed pipe."""
    parent, proc = _writer([BIG], pause_s=0.3)
    try:
        os.set_blocking(parent.fileno(), False)
        assert parent.poll(10)  # the first slice is there, the rest is not
        with pytest.raises(BlockingIOError):
            parent.recv()
    finally:
        proc.kill()
        proc.join()
        parent.close()


def _check(heard: _Heard, msgs: list[tuple]) -> None:
    assert heard.msgs == msgs  # whole, in order, nothing lost
    assert heard.closed == 1  # once, at the end of the stream only
    assert heard.progress >= 1  # the big one was heard arriving


async def _on_loop(loop_reader_msgs: list[tuple]) -> _Heard:
    heard = _Heard()
    parent, proc = _writer(loop_reader_msgs)
    reader = LoopReader(asyncio.get_running_loop(), *heard.calls(), on_progress=heard.on_progress)
    handle = _handle(parent)
    reader.watch(handle)
    reader.start()
    try:
        assert not os.get_blocking(parent.fileno())  # as uvloop leaves it, on any loop
        deadline = asyncio.get_running_loop().time() + 30
        while not heard.done.is_set():
            assert asyncio.get_running_loop().time() < deadline, heard.msgs
            await asyncio.sleep(0.01)
    finally:
        reader.close()
        proc.join(5)
        parent.close()
    return heard


def test_the_loop_reader_waits_for_a_half_arrived_message():
    msgs = [("hb", 1, False, (), 0), BIG, ("hb", 1, False, (), 0)]
    _check(asyncio.run(_on_loop(msgs)), msgs)


def test_the_loop_reader_on_uvloop_waits_for_a_half_arrived_message():
    uvloop = pytest.importorskip("uvloop")
    msgs = [BIG, ("results", "b2", [])]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        _check(runner.run(_on_loop(msgs)), msgs)


def test_the_thread_reader_waits_and_never_blocks_on_a_half_arrived_message():
    """One pipe's message half-arrived (its writer pauses between slices) does not hold the
    reader: another pipe, started once the first is mid-message, is read meanwhile."""
    heard = _Heard()
    slow, slow_proc = _writer([BIG], pause_s=0.25)  # about 4 s for its one message
    reader = ThreadReader(*heard.calls(), on_progress=heard.on_progress)
    reader.watch(_handle(slow))
    reader.start()
    fast = fast_proc = None
    try:
        deadline = time.monotonic() + 30
        while heard.progress < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        fast, fast_proc = _writer([("hb", 2, False, (), 0)] * 3, pause_s=0.01)
        reader.watch(_handle(fast))  # before its first read: the reader copies on change
        while heard.closed < 2:
            assert time.monotonic() < deadline, heard.msgs
            time.sleep(0.01)
        # the fast pipe's beats came before the slow pipe's one message had all arrived
        assert heard.msgs == [("hb", 2, False, (), 0)] * 3 + [BIG]
    finally:
        reader.close()
        for proc in (slow_proc, fast_proc):
            if proc is not None:
                proc.join(5)
        for conn in (slow, fast):
            if conn is not None:
                conn.close()
