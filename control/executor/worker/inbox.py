"""The worker's inbox: messages from the executor, queued in order, with cancel of queued items.

The worker reads the pipe (its main thread after each message, or its heartbeat thread while the
main thread is busy) and puts every message that waits there here; the main thread takes them
one at a time, oldest first, before it reads the pipe again. Because batches wait HERE rather
than in the pipe, a ``cancel`` message (handled by the reader at once) can take items out of
batches that have not started. A running decode loop takes batches that may join
it with :meth:`Inbox.take_if`, which only ever looks at the OLDEST message: messages are still
handled in order, and one that cannot join ends joining until the loop has finished. Thread-safe;
no I/O.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from control.executor.protocol import Batch, BatchItem, wire


@dataclass(frozen=True)
class Cancelled:
    """Items taken out of one queued batch; ``remaining`` items of it will still run."""

    batch: Batch  # the batch as it was queued
    items: tuple[BatchItem, ...]
    remaining: int


class Inbox:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[tuple] = deque()

    def put(self, msg: tuple) -> None:
        with self._lock:
            self._queue.append(msg)

    def pop(self) -> tuple | None:
        """The oldest message, taken out, or None when none is queued; never waits."""
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def take_if(self, accept: Callable[[tuple], bool]) -> tuple | None:
        """The oldest message, taken out, if ``accept(message)``; else None (and nothing is
        taken). Never waits and never skips a message: whatever waits behind a message that is
        not accepted stays behind it."""
        with self._lock:
            if self._queue and accept(self._queue[0]):
                return self._queue.popleft()
            return None

    def cancel(self, keys: Iterable[str]) -> list[Cancelled]:
        """Take the items with these idempotency keys out of queued ``batch`` messages.

        A batch left empty is dropped. Items of a batch already taken by the main thread are
        not here and are not touched (best effort). Returns what was taken, per batch.
        """
        wanted = set(keys)
        taken: list[Cancelled] = []
        with self._lock:
            kept: deque[tuple] = deque()
            for msg in self._queue:
                if msg[0] != wire.BATCH or not wanted & {i.idempotency_key for i in msg[1].items}:
                    kept.append(msg)
                    continue
                batch: Batch = msg[1]
                out = tuple(i for i in batch.items if i.idempotency_key in wanted)
                stay = tuple(i for i in batch.items if i.idempotency_key not in wanted)
                taken.append(Cancelled(batch, out, len(stay)))
                if stay:
                    kept.append((msg[0], replace(batch, items=stay), *msg[2:]))
            self._queue = kept
        return taken
