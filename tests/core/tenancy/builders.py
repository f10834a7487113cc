"""Builders for tenancy tests: requests, queued steps and configs with readable defaults."""

from __future__ import annotations

from control.core.tenancy.base import (
    AdmissionRequest,
    QueuedWork,
    QuotaSpec,
    TenancyConfig,
    TenantSpec,
)


def request(
    rid: str,
    tenant: str,
    tokens: int = 100,
    cls: str = "standard",
    at: float = 0.0,
    deadline: float | None = None,
) -> AdmissionRequest:
    return AdmissionRequest(rid, tenant, cls, tokens, tokens, at, deadline)


def step(
    key: str,
    tenant: str,
    cost: int = 10,
    cls: str = "standard",
    at: float = 0.0,
    deadline: float | None = None,
    rid: str | None = None,
) -> QueuedWork:
    return QueuedWork(key, rid or key, tenant, cls, at, cost, deadline)


def config(
    tenants: dict[str, tuple[int, str | None]], quotas: tuple[QuotaSpec, ...] = (), headroom=()
) -> TenancyConfig:
    """tenants: id -> (weight, cohort)."""
    specs = tuple(TenantSpec(t, w, cohort=c) for t, (w, c) in tenants.items())
    return TenancyConfig(specs, quotas, tuple(headroom))
