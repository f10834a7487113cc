"""Weighted virtual token counter (Sheng et al., "Fairness in Serving Large Language Models",
OSDI 2024), adapted to charge whole steps in Legato's common cost scale.

Each tenant has a counter of the service it received divided by its weight. The scheduler
always serves the backlogged tenant with the smallest counter. When a tenant becomes backlogged
its counter is lifted to the smallest counter among the backlogged tenants (or to the counter of
the last tenant served when nobody is backlogged), so a tenant cannot bank idle time and then
starve the others. For continuously backlogged tenants f and g this keeps
``|W_f/w_f - W_g/w_g| <= 2 * max_step_cost / min_weight`` over any interval.

Arithmetic is integral: counters are milli-units; the remainder of ``cost * 1000 / weight`` is
carried per tenant so that long runs do not drift.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from control.core.tenancy.base import QueuedWork
from control.core.tenancy.fairshare.base import COUNTER_SCALE
from control.core.tenancy.priority import within_tenant_key


@dataclass(frozen=True)
class VtcConfig:
    """Settings of the virtual token counter.

    lift_on_backlog: raise a re-activated tenant's counter as the paper prescribes (turning this
        off is only useful to demonstrate why the lift exists).
    """

    lift_on_backlog: bool = True


class VtcFairShare:
    """Weighted VTC with the lift on re-activation; see the module docstring."""

    name = "vtc"

    def __init__(self, config: VtcConfig | None = None) -> None:
        self.config = config or VtcConfig()
        self._weights: dict[str, int] = {}
        self._counter: dict[str, int] = {}
        self._remainder: dict[str, int] = {}
        self._backlogged: set[str] = set()
        self._last_served: int = 0

    def set_weights(self, weights: Mapping[str, int]) -> None:
        """Replace weights; raises ValueError naming a tenant whose weight is not > 0."""
        for tenant_id, weight in weights.items():
            if weight <= 0:
                raise ValueError(f"weight of tenant {tenant_id!r} must be > 0, got {weight}")
        self._weights = dict(weights)

    def weight(self, tenant_id: str) -> int:
        return self._weights.get(tenant_id, 1)

    def gate(self, tenant_id: str, now: float) -> float | None:
        return None

    def on_backlogged(self, tenant_id: str, now: float) -> None:
        """Lift the tenant's counter so that idle time is not banked (the paper's rule)."""
        self._backlogged.discard(tenant_id)
        current = self._counter.get(tenant_id, 0)
        if self.config.lift_on_backlog:
            if self._backlogged:
                floor = min(self._counter.get(t, 0) for t in self._backlogged)
            else:
                floor = self._last_served
            current = max(current, floor)
        self._counter[tenant_id] = current
        self._backlogged.add(tenant_id)

    def on_idle(self, tenant_id: str, now: float) -> None:
        self._backlogged.discard(tenant_id)

    def _increment(self, tenant_id: str, cost_units: int, remainder: int) -> tuple[int, int]:
        """(counter increment, new remainder) for charging ``cost_units`` to the tenant."""
        scaled = cost_units * COUNTER_SCALE + remainder
        weight = self._weights.get(tenant_id, 1)
        return scaled // weight, scaled % weight

    def charge(self, tenant_id: str, cost_units: int, now: float) -> None:
        """Advance the tenant's counter by cost/weight; raises ValueError on negative cost."""
        if cost_units < 0:
            raise ValueError(f"cost_units must be >= 0, got {cost_units} for {tenant_id!r}")
        step, rem = self._increment(tenant_id, cost_units, self._remainder.get(tenant_id, 0))
        self._counter[tenant_id] = self._counter.get(tenant_id, 0) + step
        self._remainder[tenant_id] = rem
        self._last_served = self._counter[tenant_id]

    def queue_key(self, item: QueuedWork) -> tuple:
        """A tenant's own items are served by class, deadline, arrival (see ``priority``)."""
        return within_tenant_key(item)

    def order(self, items: Sequence[QueuedWork], now: float) -> list[QueuedWork]:
        """Service order if the batch were filled one item at a time, charging as it goes.

        Simulates the charges on a copy so a batch interleaves tenants the way successive VTC
        picks would; the real counters change only through ``charge``.
        """
        per_tenant: dict[str, list[QueuedWork]] = {}
        for item in items:
            per_tenant.setdefault(item.tenant_id, []).append(item)
        for own in per_tenant.values():
            own.sort(key=within_tenant_key)
        return self._merge(per_tenant, len(items))

    def select(
        self, heads: Mapping[str, Sequence[QueuedWork]], limit: int, now: float
    ) -> list[QueuedWork]:
        """The first ``limit`` items of ``order`` over all queued items, given each tenant's
        leading items already sorted by ``queue_key``. Pure; O(limit x log tenants)."""
        return self._merge(heads, limit)

    def _merge(
        self, per_tenant: Mapping[str, Sequence[QueuedWork]], limit: int
    ) -> list[QueuedWork]:
        """Merge per-tenant sorted items by simulated counters, at most ``limit`` of them."""
        heap: list[tuple[int, float, str, int]] = []
        remainders: dict[str, int] = {}
        floor = self._provisional_floor() if self.config.lift_on_backlog else 0
        for tenant_id, own in per_tenant.items():
            if not own:
                continue
            counter = self._counter.get(tenant_id, 0)
            if tenant_id not in self._backlogged and self.config.lift_on_backlog:
                counter = max(counter, floor)
            remainders[tenant_id] = self._remainder.get(tenant_id, 0)
            heap.append((counter, own[0].arrival, tenant_id, 0))
        heapq.heapify(heap)
        ordered: list[QueuedWork] = []
        while heap and len(ordered) < limit:
            counter, _, tenant_id, index = heapq.heappop(heap)
            own = per_tenant[tenant_id]
            item = own[index]
            ordered.append(item)
            step, remainders[tenant_id] = self._increment(
                tenant_id, item.cost_units, remainders[tenant_id]
            )
            if index + 1 < len(own):
                heapq.heappush(heap, (counter + step, own[index + 1].arrival, tenant_id, index + 1))
        return ordered

    def _provisional_floor(self) -> int:
        """Counter a tenant not yet marked backlogged would be lifted to."""
        if self._backlogged:
            return min([self._counter.get(t, 0) for t in self._backlogged])
        return self._last_served

    def counters(self) -> Mapping[str, int]:
        return dict(self._counter)

    def backlogged(self) -> frozenset[str]:
        return frozenset(self._backlogged)
