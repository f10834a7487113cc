"""The Ray executor's one thread of its own: what Ray completes is handled here, in order.

Each call the executor makes of an actor returns an object reference; :meth:`Pump.watch`
registers a handler for it, which Ray's completion callback puts on this thread's queue (the
callback itself only queues: it runs on a thread of Ray's, where no Ray call may block). The
pump thread runs each handler under the executor's lock, runs the periodic ``tick`` every
``tick_s``, and hands the events they produced to the delivery thread: the event loop given
to ``start`` (one ``call_soon_threadsafe`` per group of events), else this thread itself.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from control import clock
from control.executor.protocol import ExecutorEvent

log = logging.getLogger(__name__)

Handler = Callable[[Any], None]  # called with the finished concurrent future of a reference


class Pump:
    def __init__(self, lock: threading.RLock, tick: Callable[[], None], tick_s: float) -> None:
        self._lock, self._tick, self._tick_s = lock, tick, tick_s
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._events: list[ExecutorEvent] = []
        self._deliver: Callable[[list[ExecutorEvent]], None] = lambda events: None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray-executor", daemon=True)

    def start(self, deliver: Callable[[list[ExecutorEvent]], None],
              loop: asyncio.AbstractEventLoop | None) -> None:  # fmt: skip
        self._deliver, self._loop = deliver, loop
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._queue.put(None)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10.0)

    def emit(self, event: ExecutorEvent) -> None:
        """Queue an event for delivery (with the executor's lock held)."""
        self._events.append(event)

    def watch(self, ref: Any, handler: Handler) -> None:
        """Run ``handler(future)`` on the pump thread once ``ref`` is done."""
        ref.future().add_done_callback(lambda fut: self._queue.put((handler, fut)))

    def call(self, handler: Handler) -> None:
        """Run ``handler(None)`` on the pump thread (events it emits are delivered in order)."""
        self._queue.put((handler, None))

    def _run(self) -> None:
        next_tick = clock.monotonic() + self._tick_s
        while not self._stopping.is_set():
            try:
                job = self._queue.get(timeout=max(0.0, next_tick - clock.monotonic()))
            except queue.Empty:
                job = "tick"
            if job is None:
                break
            with self._lock:
                if job == "tick" or clock.monotonic() >= next_tick:
                    self._handle("tick")
                    next_tick = clock.monotonic() + self._tick_s
                if job != "tick":
                    self._handle(job)
                while not self._queue.empty():  # everything that came meanwhile, in one go
                    nxt = self._queue.get_nowait()
                    if nxt is None:
                        self._stopping.set()
                        break
                    self._handle(nxt)
                events, self._events = self._events, []
            if events and not self._stopping.is_set():
                self._hand_over(events)

    def _handle(self, job: Any) -> None:
        try:
            if job == "tick":
                self._tick()
            else:
                handler, fut = job
                handler(fut)
        except Exception:  # a bug in one handler must not end the executor's thread
            log.exception("ray executor handler failed")

    def _hand_over(self, events: list[ExecutorEvent]) -> None:
        if self._loop is None:
            self._deliver(events)
            return
        try:
            self._loop.call_soon_threadsafe(self._deliver, events)
        except RuntimeError:
            pass  # the loop closed: nobody is listening any more
