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
(thread), once the messages' events are out. A worker sends little at a time, but one chatty
worker must not starve the others: at most ``_MAX_DRAIN`` messages are read per pipe per turn.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing.connection
import select
import threading
from collections.abc import Callable
from typing import Any

from control.executor.host.handle import WorkerHandle

log = logging.getLogger(__name__)

_MAX_DRAIN = 256

OnMessage = Callable[[WorkerHandle, Any, tuple], bool]
OnClosed = Callable[[WorkerHandle, Any], None]


class _Reader:
    def __init__(
        self,
        on_message: OnMessage,
        on_closed: OnClosed,
        on_tick: Callable[[], None],
        tick_s: float,
        after_read: Callable[[], None] | None = None,
    ) -> None:
        self._on_message, self._on_closed, self._on_tick = on_message, on_closed, on_tick
        self.tick_s = tick_s
        self._after_read = after_read

    def _drain(self, conn: Any, handle: WorkerHandle) -> None:
        """Handle every message waiting on ``conn`` (up to the bound): a heartbeat queued
        behind results still counts, and any message proves the worker process alive."""
        for _ in range(_MAX_DRAIN):
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                self._on_closed(handle, conn)
                return
            if not self._on_message(handle, conn, msg):
                return
            try:
                if not _waiting(conn):
                    return
            except (EOFError, OSError, ValueError):
                return  # closed: the next read reports it

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

    def __init__(self, loop: asyncio.AbstractEventLoop, *args: Any) -> None:
        super().__init__(*args)
        self._loop = loop
        self._watched: dict[int, Any] = {}  # fd -> the pipe read
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def watch(self, handle: WorkerHandle) -> None:
        conn = handle.conn
        if self._closed or conn is None or conn.fileno() in self._watched:
            return
        if not self._on_loop():
            self._loop.call_soon_threadsafe(self.watch, handle)
            return
        self._watched[conn.fileno()] = conn
        self._loop.add_reader(conn.fileno(), self._readable, conn, handle)

    def unwatch(self, handle: WorkerHandle) -> None:
        for fd, conn in list(self._watched.items()):
            if conn is handle.conn:
                del self._watched[fd]
                self._loop.remove_reader(fd)

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
            for fd, watched in list(self._watched.items()):
                if watched is conn:
                    del self._watched[fd]
                    self._loop.remove_reader(fd)
            return
        self._drain(conn, handle)
        self._read_done()

    def _arm(self) -> None:
        if not self._closed:
            self._timer = self._loop.call_later(self.tick_s, self._tick)

    def _tick(self) -> None:
        if self._closed:
            return
        try:
            self._on_tick()
        except Exception:  # the watch must go on: logged
            log.exception("executor tick failed")
        self._arm()


class ThreadReader(_Reader):
    """Reads the pipes on a thread of its own (named ``executor-reader``); ``watch`` and
    ``unwatch`` on that thread or before ``start``."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._watched: dict[Any, WorkerHandle] = {}  # pipe -> handle, replaced whole
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="executor-reader", daemon=True)

    def watch(self, handle: WorkerHandle) -> None:
        if handle.conn is not None:
            self._watched = {**self._watched, handle.conn: handle}

    def unwatch(self, handle: WorkerHandle) -> None:
        self._watched = {c: h for c, h in self._watched.items() if c is not handle.conn}

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
            if not self._stopping.is_set():
                try:
                    self._on_tick()
                except Exception:  # the watch must go on: logged
                    log.exception("executor tick failed")


def _waiting(conn: Any) -> bool:
    """Whether ``conn`` has bytes to read now. ``Connection.poll(0)`` answers the same through
    a selector built per call, at about five times the cost, once per message read."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))
