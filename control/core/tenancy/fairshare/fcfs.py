"""First come, first served: the baseline with no isolation between tenants."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from control.core.tenancy.base import QueuedWork
from control.core.tenancy.priority import fifo_key


@dataclass(frozen=True)
class FcfsConfig:
    """FCFS has no settings; the class exists so every policy is built the same way."""


class FcfsFairShare:
    """Serves steps in the order they became ready, whoever owns them."""

    name = "fcfs"

    def __init__(self, config: FcfsConfig | None = None) -> None:
        self.config = config or FcfsConfig()

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

    def charge(self, tenant_id: str, cost_units: int, now: float) -> None:
        return None

    def counters(self) -> Mapping[str, int]:
        return {}
