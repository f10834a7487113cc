"""Immutable views of the tenancy half for the API, the console and the twin's reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from control.core.tenancy.headroom import HeadroomPoolSnapshot
from control.core.tenancy.quota import QuotaUse

if TYPE_CHECKING:
    from control.core.tenancy.manager import TenancyManager


@dataclass(frozen=True)
class TenantSnapshot:
    """One tenant's standing. ``counter_milli`` is weighted service in milli cost units
    (absent for policies without counters); ``quota`` lists each resource with a quota."""

    tenant_id: str
    weight: int
    priority_class: str
    cohort: str | None
    status: str
    counter_milli: int | None
    queued_steps: int
    waiting_runs: int
    in_flight_runs: int
    borrowed_runs: int
    quota: tuple[QuotaUse, ...]


@dataclass(frozen=True)
class TenancySnapshot:
    """The whole tenancy half at the last ``now`` it was told about."""

    as_of: float
    policy: str
    least_served: str | None
    tenants: tuple[TenantSnapshot, ...]
    headroom: tuple[HeadroomPoolSnapshot, ...]

    def tenant(self, tenant_id: str) -> TenantSnapshot:
        """The tenant's entry; raises KeyError naming an unknown tenant."""
        for entry in self.tenants:
            if entry.tenant_id == tenant_id:
                return entry
        raise KeyError(f"tenant {tenant_id!r} is not in the snapshot")


def snapshot_of(mgr: TenancyManager) -> TenancySnapshot:
    """``mgr``'s immutable view as of the last ``now`` it saw."""
    counters = mgr.fair.counters()
    runs = mgr.runs.values()
    known = set(mgr._weights) | set(mgr._queued_by_tenant) | {r.tenant_id for r in runs}
    tenants = []
    for tenant_id in sorted(known):
        spec = mgr.limits.tenant(tenant_id)
        own = [r for r in runs if r.tenant_id == tenant_id]
        tenants.append(
            TenantSnapshot(
                tenant_id,
                mgr.weight(tenant_id),
                spec.priority_class if spec else "standard",
                spec.cohort if spec else None,
                spec.status if spec else "unknown",
                counters.get(tenant_id),
                len(mgr._queued_by_tenant.get(tenant_id, {})),
                mgr._waiting.get(tenant_id, 0),
                len(own),
                sum(r.borrowed for r in own),
                mgr.ledger.uses(tenant_id, mgr._now),
            )
        )
    return TenancySnapshot(
        mgr._now, mgr.fair.name, mgr.least_served(), tuple(tenants), mgr.headroom.snapshot()
    )
