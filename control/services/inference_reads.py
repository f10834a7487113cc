"""Reads of runs for :class:`~control.services.inference.InferenceService`: a run as it stands,
awaiting its end, streaming its tokens, the runs that finished last.

Runs of this process come from memory (running, or among the ``RECENT_RUNS`` last finished,
see :mod:`control.services.inference_settle`); others from the database.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from control.runtime.types import StreamDelta
from control.services.run_records import TERMINAL
from control.store import records as rec

if TYPE_CHECKING:
    from control.services import Services
    from control.services.inference_settle import LiveRun
    from control.services.writer import GroupCommitWriter

#: How often a run of another process is looked up while waiting for it.
POLL_S = 0.25


class ReadsMixin:
    """Reads of :class:`~control.services.inference.InferenceService` (uses its ``_live``,
    ``_recent``, ``writer`` and ``services``; changes nothing)."""

    _live: dict[str, LiveRun]
    _recent: OrderedDict[str, rec.RequestRecord]
    writer: GroupCommitWriter
    services: Services

    def recent(self, limit: int = 50) -> list[rec.RequestRecord]:
        """Runs of this process that finished most recently, newest first."""
        return list(reversed(self._recent.values()))[:limit]

    def stream(self, request_id: str) -> AsyncIterator[StreamDelta] | None:
        """Token deltas of a run of this process still going (None: nothing to stream)."""
        live = self._live.get(request_id)
        return None if live is None or live.handle.done else live.handle.stream()

    async def get(self, request_id: str) -> rec.RequestRecord:
        """The request as it stands (memory for runs of this process, else the database)."""
        live = self._live.get(request_id)
        if live is not None:
            return live.record
        found = self._recent.get(request_id)
        if found is not None:
            return found
        return await self.writer.run_in_db_thread(self.services.requests.get, request_id)

    async def wait(self, request_id: str, timeout_s: float) -> rec.RequestRecord:
        """The request's record once it is terminal, or as it stands after ``timeout_s``.
        A run of this process is awaited on its completion; others are polled. The timeout is
        measured on the event loop's clock, the one its timers run on."""
        record = await self.get(request_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while record.status not in TERMINAL and loop.time() < deadline:
            live = self._live.get(request_id)
            left = deadline - loop.time()
            if live is not None:
                await until_ended(live, left)
            else:
                await asyncio.sleep(min(POLL_S, max(0.0, left)))
            record = await self.get(request_id)
        return record


async def until_ended(live: LiveRun, timeout_s: float) -> None:
    """Wait until ``live`` ended, at most ``timeout_s`` (one loop turn after it ends: its
    waiter is woken directly, no task or event in between)."""
    if live.ended:
        return
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    live.waiters.append(waiter)
    timer = loop.call_later(timeout_s, _wake, waiter)
    try:
        await waiter
    finally:
        timer.cancel()
        live.waiters.remove(waiter)


def _wake(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)
