"""The one reader of the worker pipes, chosen when the executor starts and kept until it stops.

Every message a worker sends is read by exactly one thread, so no pipe is ever read by two nor
closed under its reader, and nothing is handed over at run time:

* :class:`LoopReader` (the executor was started for an event loop: the live runtime's case)
  reads on that loop (``add_reader``): a worker's results are handled, and reach the listeners,
  in the loop turn they arrive, two thread wake-ups fewer on the path of every run than a
  reader thread handing them to the loop (measured here at 0.1-0.3 ms each on a busy machine).
  The periodic tick (health, output releases, packing the idempotency store) is a timer on the
  same loop, so a worker found dead is replaced on the thread that reads its pipe;
* :class:`ThreadReader` (a synchronous user: tests that ``poll``, scripts) reads on a thread of
  its own and ticks after every wake-up, at least every tick.

Both hand each message to ``on_message(handle, conn, msg)`` (False: that pipe is no longer the
handle's, stop reading it), a closed pipe to ``on_closed(handle, conn)``, and call ``on_tick()``;
``after_read()``, when given, follows each read of a pipe (loop) or of every ready pipe
(thread), once the messages' events are out; ``on_progress(handle, conn)``, when given, hears
of bytes that arrived without completing a message (a large one still on its way: the worker
is alive and talking, whatever its heartbeats behind that message say).

Pipes are read in whole frames (:class:`~control.executor.host.frames.FrameBuffer`), never
with ``Connection.recv``: a message that has only partly arrived waits in the buffer for the
rest, and is never taken for a closed pipe (which is only an end of stream or a reset). No read
ever waits: the loop's pipes are non-blocking, and a thread reads only what is there. A turn
reads at most 1 MiB of one pipe, so one chatty worker cannot starve the others. Before each
tick every pipe with bytes waiting is read first: health is judged on what the workers said,
not on what the reader had not yet read (a loop held up runs its timers before its reads).
"""

from __future__ import annotations

import abc
import asyncio
import logging
import multiprocessing.connection
import os
import select
import threading
from collections.abc import Callable
from typing import Any

from control.executor.host.frames import FrameBuffer
from control.executor.host.handle import WorkerHandle

log = logging.getLogger(__name__)

OnMessage = Callable[[WorkerHandle, Any, tuple], bool]
OnClosed = Callable[[WorkerHandle, Any], None]


class _Reader(abc.ABC):
    def __init__(
        self,
        on_message: OnMessage,
        on_closed: OnClosed,
        on_tick: Callable[[], None],
        tick_s: float,
        after_read: Callable[[], None] | None = None,
        *,
        on_progress: OnClosed | None = None,
    ) -> None:
        self._on_message, self._on_closed, self._on_tick = on_message, on_closed, on_tick
        self.tick_s = tick_s
        self._after_read = after_read
        self._on_progress = on_progress
        self._frames: dict[Any, FrameBuffer] = {}  # pipe -> what was read of it, not yet whole

    def _drain(self, conn: Any, handle: WorkerHandle) -> None:
        """Read what waits on ``conn`` and handle every whole message in it (a heartbeat
        queued behind results still counts, and any message proves the worker alive); report
        the pipe closed only at its end of stream, after the messages that came before."""
        frames = self._frames.get(conn)
        if frames is None:
            frames = self._frames[conn] = FrameBuffer()
        before = frames.received
        try:
            closed = frames.read_from(conn.fileno())
            messages = frames.take()
        except (OSError, ValueError) as err:  # closed under us, or garbage (CorruptStream)
            log.warning("pipe of %s unreadable: %s", handle.device.device_id, err)
            closed, messages = True, []
        for msg in messages:
            if not self._on_message(handle, conn, msg):
                self._frames.pop(conn, None)
                return  # not the handle's pipe any more
        if closed:
            self._stop_reading(conn)  # once: a closed pipe stays readable (its end of stream)
            self._on_closed(handle, conn)
        elif not messages and frames.received > before and self._on_progress is not None:
            self._on_progress(handle, conn)

    def _forget(self, conn: Any) -> None:
        self._frames.pop(conn, None)

    @abc.abstractmethod
    def _stop_reading(self, conn: Any) -> None:
        """Read ``conn`` no more (it closed); its handle's own unwatch may follow."""

    def _drain_waiting(self, pipes: list[tuple[Any, WorkerHandle]]) -> None:
        """Read every pipe that has bytes waiting now (before health is judged)."""
        read = False
        for conn, handle in pipes:
            try:
                if handle.conn is conn and _waiting(conn):
                    self._drain(conn, handle)
                    read = True
            except (OSError, ValueError):  # closed meanwhile: its reader hears of it
                continue
        if read:
            self._read_done()

    def _read_done(self) -> None:
        after = self._after_read
        if after is not None:
            try:
                after()
            except Exception:  # the reader must live on: the consumer's own bug, logged
                log.exception("after-read hook %r failed", after)


class LoopReader(_Reader):
    """Reads the pipes on ``loop``. ``watch``/``unwatch`` only on the loop's thread; ``start``
    and ``close`` from any thread (they hop onto the loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop = loop
        self._watched: dict[int, tuple[Any, WorkerHandle]] = {}  # fd -> (pipe, its handle)
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def watch(self, handle: WorkerHandle) -> None:
        conn = handle.conn
        if self._closed or conn is None or conn.fileno() in self._watched:
            return
        if not self._on_loop():
            self._loop.call_soon_threadsafe(self.watch, handle)
            return
        fd = conn.fileno()
        # uvloop's add_reader makes the fd non-blocking anyway; made so here on any loop, so
        # that no read can hold the loop up (the sender copes, see its module)
        os.set_blocking(fd, False)
        self._watched[fd] = (conn, handle)
        self._loop.add_reader(fd, self._readable, conn, handle)

    def unwatch(self, handle: WorkerHandle) -> None:
        self._drop(lambda conn: conn is handle.conn)

    def _stop_reading(self, conn: Any) -> None:
        self._drop(lambda watched: watched is conn)
        self._forget(conn)

    def _drop(self, which: Callable[[Any], bool]) -> None:
        for fd, (conn, _) in list(self._watched.items()):
            if which(conn):
                del self._watched[fd]
                self._loop.remove_reader(fd)
                self._forget(conn)

    def start(self) -> None:
        if self._on_loop():
            self._arm()
        else:
            self._loop.call_soon_threadsafe(self._arm)

    def close(self) -> None:
        """Stop reading and ticking; from another thread, waits (up to 5 s) for the loop to
        let go of the pipes, so that they can be closed."""
        if self._on_loop():
            self._close_here()
            return
        done = threading.Event()

        def on_loop() -> None:
            try:
                self._close_here()
            finally:
                done.set()

        try:
            self._loop.call_soon_threadsafe(on_loop)
        except RuntimeError:  # the loop is closed: nothing reads the pipes any more
            self._closed = True
            self._watched.clear()
            return
        if not done.wait(5.0):
            log.warning("the executor's loop did not let go of the worker pipes within 5 s")

    def _close_here(self) -> None:
        self._closed = True
        for fd in list(self._watched):
            self._loop.remove_reader(fd)
        self._watched.clear()
        self._frames.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:  # no loop runs on this thread
            return False

    def _readable(self, conn: Any, handle: WorkerHandle) -> None:
        if self._closed:
            return
        if handle.conn is not conn:  # a pipe of a worker already replaced
            self._drop(lambda watched: watched is conn)
            return
        self._drain(conn, handle)
        self._read_done()

    def _arm(self) -> None:
        if not self._closed:
            self._timer = self._loop.call_later(self.tick_s, self._tick)

    def _tick(self) -> None:
        if self._closed:
            return
        self._drain_waiting(list(self._watched.values()))
        try:
            self._on_tick()
        except Exception:  # the watch must go on: logged
            log.exception("executor tick failed")
        self._arm()


class ThreadReader(_Reader):
    """Reads the pipes on a thread of its own (named ``executor-reader``); ``watch`` and
    ``unwatch`` on that thread or before ``start``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._watched: dict[Any, WorkerHandle] = {}  # pipe -> handle, replaced whole
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="executor-reader", daemon=True)

    def watch(self, handle: WorkerHandle) -> None:
        if handle.conn is not None:
            self._watched = {**self._watched, handle.conn: handle}

    def unwatch(self, handle: WorkerHandle) -> None:
        self._stop_reading(handle.conn)

    def _stop_reading(self, conn: Any) -> None:
        self._watched = {c: h for c, h in self._watched.items() if c is not conn}
        self._forget(conn)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopping.is_set():
            watched = self._watched
            if watched:
                ready = multiprocessing.connection.wait(list(watched), timeout=self.tick_s)
            else:
                ready = []
                self._stopping.wait(self.tick_s)
            for conn in ready:
                handle = watched[conn]
                if handle.conn is conn:
                    self._drain(conn, handle)
            if ready:
                self._read_done()
            self._drain_waiting(list(self._watched.items()))
            if not self._stopping.is_set():
                try:
                    self._on_tick()
                except Exception:  # the watch must go on: logged
                    log.exception("executor tick failed")


def _waiting(conn: Any) -> bool:
    """Whether ``conn`` has bytes to read now (or is closed). ``Connection.poll(0)`` answers
    the same through a selector built per call, at about five times the cost."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))
