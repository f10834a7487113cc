"""Contract of a fair-share policy inside the tenancy manager.

The manager tracks which tenants are backlogged (have queued work) and calls the policy at
these points:

* ``gate`` when a run asks for admission (baselines such as a request-rate limiter refuse here);
* ``on_backlogged`` when a tenant's queued count goes from 0 to 1, ``on_idle`` when it returns
  to 0 (VTC lifts counters here so idle time is not banked);
* ``order`` when a local scheduler forms a batch (must not change state);
* ``select`` when replicas take work from a model's pending queue (late binding; pure);
* ``charge`` when a step is dispatched.

Counters are integers in milli cost units per unit of weight ("weighted service").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from control.core.tenancy.base import QueuedWork

#: Counters are kept in thousandths of a cost unit so that cost/weight stays integral enough.
COUNTER_SCALE = 1000


class FairSharePolicy(Protocol):
    """One strategy for sharing devices between tenants."""

    name: str

    def set_weights(self, weights: Mapping[str, int]) -> None:
        """Replace tenant weights (each > 0). Tenants not listed get weight 1."""
        ...

    def gate(self, tenant_id: str, now: float) -> float | None:
        """None when the tenant may submit now, else seconds until it may (> 0). May record."""
        ...

    def on_backlogged(self, tenant_id: str, now: float) -> None: ...

    def on_idle(self, tenant_id: str, now: float) -> None: ...

    def order(self, items: Sequence[QueuedWork], now: float) -> list[QueuedWork]:
        """The items in service order (a permutation). Pure: changes no state."""
        ...

    def queue_key(self, item: QueuedWork) -> tuple:
        """Sort key of one tenant's items: ``order`` serves a tenant's items in this order."""
        ...

    def select(
        self, heads: Mapping[str, Sequence[QueuedWork]], limit: int, now: float
    ) -> list[QueuedWork]:
        """The first ``limit`` items ``order`` would give for all queued items, given each
        tenant's leading items (at least ``limit`` of them, or all) sorted by ``queue_key``.
        Pure. Lets a pending queue take its next items without ordering all of it."""
        ...

    def charge(self, tenant_id: str, cost_units: int, now: float) -> None: ...

    def counters(self) -> Mapping[str, int]:
        """Weighted service counter per tenant in milli-units (empty for counter-less policies)."""
        ...
