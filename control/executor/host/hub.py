"""Delivering an executor's events: to its listeners, to ``events()`` iterators, to ``poll``.

:meth:`EventHub.emit` is called on the executor's delivery thread (the event loop given to
``start``, or the reader thread) with the executor's lock held; it calls every listener in
order, at once, so listeners must not block (hand the event on, e.g. to a loop with
``call_soon_threadsafe``). Subscribing may happen from any thread: the listeners are a tuple
replaced whole, so ``emit`` reads them without a lock and without a copy per event.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator

from control.executor.protocol import EventListener, ExecutorError, ExecutorEvent


class EventHub:
    def __init__(self, keep_for_poll: bool) -> None:
        self._listeners: tuple[EventListener, ...] = ()
        self._changing = threading.Lock()  # one subscriber change at a time
        self._poll: queue.Queue[ExecutorEvent] | None = queue.Queue() if keep_for_poll else None

    def subscribe(self, listener: EventListener) -> None:
        """Call ``listener(event)`` for every event from now on, in order."""
        with self._changing:
            self._listeners = (*self._listeners, listener)

    def unsubscribe(self, listener: EventListener) -> None:
        """Stop calling ``listener``; unknown listeners are ignored."""
        with self._changing:
            self._listeners = tuple(x for x in self._listeners if x != listener)

    def emit(self, event: ExecutorEvent) -> None:
        if self._poll is not None:
            self._poll.put(event)
        for listener in self._listeners:
            listener(event)

    def poll(self, timeout: float) -> ExecutorEvent | None:
        """The oldest event not yet polled, waiting up to ``timeout`` seconds for one."""
        if self._poll is None:
            raise ExecutorError("poll() needs ExecutorConfig.poll_queue=True")
        try:
            return self._poll.get(timeout=timeout)
        except queue.Empty:
            return None

    async def events(self) -> AsyncIterator[ExecutorEvent]:
        """Every event from the first ``anext`` on, in order, on the caller's event loop."""
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[ExecutorEvent] = asyncio.Queue()

        def listener(event: ExecutorEvent) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, event)

        self.subscribe(listener)
        try:
            while True:
                yield await inbox.get()
        finally:
            self.unsubscribe(listener)
