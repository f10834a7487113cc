"""Reading the worker pipes on the driver's event loop (the attached half of
:class:`~control.executor.local.LocalExecutor`).

By default the pump thread reads every worker pipe and the driver hears of each completion
through a listener that hops onto its loop (``call_soon_threadsafe``). Once attached
(:meth:`AttachMixin.attach`, awaited on the loop), the loop itself reads the pipes
(``add_reader``): a worker's results are handled and reach the listeners in the loop turn they
arrive, two thread wake-ups fewer on the path of every run (measured here at 0.1-0.3 ms each
on a busy machine). The pump thread still ticks: it watches health and sends output releases,
but no longer reads.

Thread rules, so that a pipe is never read by two threads nor closed under the loop's reader:
* ``attach`` first asks the pump to stop reading and waits for its answer (at its next tick);
  only then does the loop watch the pipes (a message sent meanwhile waits in the pipe).
* A worker found dead or hung by the pump's health check is handled ON THE LOOP (the check
  schedules it there): the loop stops watching the old pipe, kills and restarts the worker,
  and watches the new pipe. A pipe closed under the loop's reader is seen by the loop itself.
* ``detach`` (on the loop, before ``stop``) stops watching and hands reading back to the pump.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

from control.executor.base import ExecutorError

log = logging.getLogger(__name__)


class AttachMixin:
    """Attached pipe reading of :class:`~control.executor.local.LocalExecutor` (uses its
    ``_lock``, ``_workers``, ``_drain`` and ``_worker_down``)."""

    _loop: asyncio.AbstractEventLoop | None = None
    _loop_thread: int | None = None
    _attach_request: concurrent.futures.Future | None = None
    _pipes_on_loop = False  # the pump has stopped reading (it acknowledged a request)
    _watched: dict[int, Any]
    _after_read: Callable[[], None] | None = None

    async def attach(self, after_read: Callable[[], None] | None = None) -> None:
        """Read the worker pipes on the running loop from now on (see the module docstring).
        Returns once the loop watches every pipe; idempotent. Only after ``start`` (the pump
        thread must be there to hand reading over). ``after_read`` is called on the loop
        each time a pipe's waiting messages have been handled (their events emitted) and
        the executor's lock is free: the driver then takes its turn at once, in the same
        loop iteration (see ``Driver.turn_now``)."""
        loop = asyncio.get_running_loop()
        self._after_read = after_read
        if self._loop is loop:
            return
        if self._pump is None or not self._pump.is_alive():
            raise ExecutorError("attach() needs a started executor (its pump thread hands over)")
        ack: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            self._attach_request = ack
        await asyncio.wrap_future(ack)  # the pump thread no longer reads any pipe
        with self._lock:
            self._loop, self._loop_thread = loop, threading.get_ident()
            for handle in self._workers.values():
                self._watch(handle)

    def detach(self) -> None:
        """Stop reading on the loop (call on it, before ``stop``); the pump reads again.
        From another thread it is handed to the loop and waited for (up to 5 s)."""
        loop = self._loop
        if loop is not None and not self._on_loop_thread():
            done = threading.Event()

            def on_loop() -> None:
                try:
                    self.detach()
                finally:
                    done.set()

            try:
                loop.call_soon_threadsafe(on_loop)
            except RuntimeError:  # the loop is closed: nothing reads the pipes any more
                with self._lock:
                    self._watched.clear()
                    self._loop = self._loop_thread = None
                    self._pipes_on_loop = False
                return
            if not done.wait(5.0):
                log.warning("the attached loop did not detach within 5 s")
            return
        with self._lock:
            if self._loop is None:
                return
            for fd in list(self._watched):
                self._unwatch(fd)
            self._loop = self._loop_thread = None
            self._after_read = None
            self._pipes_on_loop = False

    @property
    def attached(self) -> bool:
        return self._loop is not None

    # ---- the pump's side
    def _pump_reads(self) -> bool:
        """Called by the pump under the lock at each tick: acknowledge an attach request;
        True while the pump still reads the pipes."""
        if self._attach_request is not None:
            self._pipes_on_loop = True
            self._attach_request.set_result(None)
            self._attach_request = None
        return not self._pipes_on_loop

    def _on_loop_thread(self) -> bool:
        return self._loop_thread == threading.get_ident()

    # ---- the loop's side
    def _watch(self, handle) -> None:  # noqa: ANN001
        conn = handle.conn
        if self._loop is None or conn is None:
            return
        fd = conn.fileno()
        if fd in self._watched:
            return
        self._watched[fd] = conn
        self._loop.add_reader(fd, self._readable, conn, handle)

    def _unwatch(self, fd: int) -> None:
        if self._watched.pop(fd, None) is not None and self._loop is not None:
            self._loop.remove_reader(fd)

    def _unwatch_conn(self, conn) -> None:  # noqa: ANN001
        for fd, watched in list(self._watched.items()):
            if watched is conn:
                self._unwatch(fd)

    def _readable(self, conn, handle) -> None:  # noqa: ANN001
        """Loop reader: handle what the worker sent (``_drain``; a closed pipe takes the worker
        down there, on this thread)."""
        if handle.conn is not conn:  # a pipe of a worker already restarted
            self._unwatch_conn(conn)
            return
        self._drain(conn, handle)
        after = self._after_read
        if after is not None:
            try:
                after()
            except Exception:  # the reader must live on: the loop's own bug, logged
                log.exception("after-read hook %r failed", after)

    def _down_on_loop(self, handle, conn, reason: str, cause: str) -> None:  # noqa: ANN001
        """A health verdict of the pump, carried out on the loop (unless the worker was
        restarted meanwhile)."""
        with self._lock:
            if handle.conn is conn and conn is not None:
                self._worker_down(handle, reason, cause)
