"""Immutable views of the tenancy half for the API, the console and the twin's reports."""

from __future__ import annotations

from dataclasses import dataclass

from control.core.tenancy.headroom import HeadroomPoolSnapshot
from control.core.tenancy.quota import QuotaUse


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
