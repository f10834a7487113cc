"""Active models by name, kept in memory for the one-model routes' hot path.

``/v1/embeddings`` and friends resolve ``model`` on every call; reading the catalogue from the
database each time costs a thread hop and a query per request. The list is reloaded when it is
older than ``ttl_s`` (changes made by another process show up within that time) and dropped at
once when a model is changed through this gateway's admin API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from control.clock import monotonic
from control.store.records import ModelRecord


class ActiveModels:
    """``name`` -> active versions (oldest first), refreshed after ``ttl_s`` seconds."""

    def __init__(self, ttl_s: float = 5.0) -> None:
        if ttl_s < 0:
            raise ValueError(f"ttl_s must be >= 0, got {ttl_s}")
        self.ttl_s = ttl_s
        self._by_name: dict[str, list[ModelRecord]] = {}
        self._loaded_at: float | None = None
        self._flight: asyncio.Future[None] | None = None
        self._generation = 0  # bumped by clear(): a reload started before it is not kept

    def clear(self) -> None:
        """Forget the list (after a model changed through this gateway); a reload under way
        is not awaited by later callers (it may predate the change)."""
        self._loaded_at = None
        self._flight = None
        self._generation += 1

    async def named(self, name: str, load: Callable[[], list[ModelRecord]]) -> list[ModelRecord]:
        """Active versions of ``name``; ``load`` (run in a worker thread) reads every active
        model when the cached list is missing or stale. Single flight: callers arriving while
        a reload runs wait for that one (64 concurrent callers must not start 64 reads, which
        would also drain the database connection pool)."""
        now = monotonic()
        if self._loaded_at is None or now - self._loaded_at >= self.ttl_s:
            if self._flight is None:
                self._flight = asyncio.ensure_future(self._reload(load, now))
            await asyncio.shield(self._flight)
        return list(self._by_name.get(name, ()))

    async def _reload(self, load: Callable[[], list[ModelRecord]], now: float) -> None:
        generation = self._generation
        try:
            models = await run_in_threadpool(load)
        finally:
            if generation == self._generation:
                self._flight = None
        if generation != self._generation:
            return  # cleared meanwhile: this list may predate the change; keep the newer one
        by_name: dict[str, list[ModelRecord]] = {}
        for m in models:
            by_name.setdefault(m.name, []).append(m)
        self._by_name, self._loaded_at = by_name, now
