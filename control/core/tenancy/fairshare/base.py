"""Contract of a fair-share policy inside the tenancy manager.

The manager tracks which tenants are backlogged (have queued work) and calls the policy at
these points:

* ``gate`` when a run asks for admission (baselines such as a request-rate limiter refuse here);
* ``on_backlogged`` when a tenant's queued count goes from 0 to 1, ``on_idle`` when it returns
  to 0 (VTC lifts counters here so idle time is not banked);
* ``order`` when a local scheduler forms a batch (must not change state);
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

    def charge(self, tenant_id: str, cost_units: int, now: float) -> None: ...

    def counters(self) -> Mapping[str, int]:
        """Weighted service counter per tenant in milli-units (empty for counter-less policies)."""
        ...
