"""First come, first served: the baseline with no isolation between tenants."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from control.core.tenancy.base import QueuedWork
from control.core.tenancy.priority import fifo_key


@dataclass(frozen=True)
class FcfsConfig:
    """FCFS has no settings; the class exists so every policy is built the same way."""


class FcfsFairShare:
    """Serves steps in the order they became ready, whoever owns them."""

    name = "fcfs"

    def __init__(self, config: FcfsConfig | None = None) -> None:
        # Any: RateLimitFairShare (a subclass) keeps its RateLimitConfig here
        self.config: Any = config or FcfsConfig()

    def set_weights(self, weights: Mapping[str, int]) -> None:
        """Weights are ignored: FCFS is the unweighted baseline."""

    def gate(self, tenant_id: str, now: float) -> float | None:
        return None

    def on_backlogged(self, tenant_id: str, now: float) -> None:
        return None

    def on_idle(self, tenant_id: str, now: float) -> None:
        return None

    def order(self, items: Sequence[QueuedWork], now: float) -> list[QueuedWork]:
        return sorted(items, key=fifo_key)

    def queue_key(self, item: QueuedWork) -> tuple:
        return fifo_key(item)

    def select(
        self, heads: Mapping[str, Sequence[QueuedWork]], limit: int, now: float
    ) -> list[QueuedWork]:
        """The ``limit`` oldest of the tenants' leading items (each sorted by ``fifo_key``)."""
        return list(islice(heapq.merge(*heads.values(), key=fifo_key), limit))

    def charge(self, tenant_id: str, cost_units: int, now: float) -> None:
        return None

    def counters(self) -> Mapping[str, int]:
        return {}
