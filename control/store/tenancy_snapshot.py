"""Read the stored tenancy configuration as the core's :class:`TenancyConfig`.

The core names tenants, cohorts and devices by strings. Here a tenant is its unique ``name``
(so the core's reasons read "tenant acme ..."), a cohort its ``name`` and a device its unique
``name``; the runtime maps request and device ids to these names the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.core.tenancy.base import HeadroomSpec, QuotaSpec, TenancyConfig, TenantSpec
from db import models as m


def selector_matches(selector: Mapping[str, Any], device: m.Device) -> bool:
    """True when ``device`` is in the pool ``selector`` describes.

    Every key given must match: ``labels`` (each label equal on the device), ``accelerator``
    (equal to the device's accelerator type) and ``device_ids`` (the device's id is listed).
    Devices that are ``down`` belong to no pool.
    """
    if device.status == "down":
        return False
    labels = selector.get("labels") or {}
    if any(device.labels.get(k) != v for k, v in labels.items()):
        return False
    if "accelerator" in selector and device.accelerator != selector["accelerator"]:
        return False
    return "device_ids" not in selector or device.id in selector["device_ids"]


def _tenant_spec(t: m.Tenant, cohorts: dict[int, str]) -> TenantSpec:
    return TenantSpec(
        tenant_id=t.name,
        weight=t.weight,
        priority_class=t.priority_class,
        cohort=cohorts.get(t.cohort_id) if t.cohort_id is not None else None,
        status=t.status,
        strict_priority=t.strict_priority,
        quality=t.quality,
        allow_degrade=t.allow_degrade,
    )


def load_tenancy_config(session: Session) -> TenancyConfig:
    """Tenants that are not retired, their quotas, and headroom pools resolved to devices.

    Reads only; ordered by id so that equal databases give equal configs.
    """
    cohorts = dict(session.execute(select(m.Cohort.id, m.Cohort.name)).tuples().all())
    tenants = session.scalars(
        select(m.Tenant).where(m.Tenant.status != "retired").order_by(m.Tenant.id)
    ).all()
    names = {t.id: t.name for t in tenants}
    tenant_specs = tuple(_tenant_spec(t, cohorts) for t in tenants)
    quotas = session.scalars(select(m.Quota).order_by(m.Quota.id)).all()
    quota_specs = tuple(
        QuotaSpec(
            tenant_id=names[q.tenant_id],
            resource=q.resource,
            nominal=q.nominal,
            borrowing_limit=q.borrowing_limit,
            lending_limit=q.lending_limit,
            period_s=q.period_s,
        )
        for q in quotas
        if q.tenant_id in names
    )
    devices = session.scalars(select(m.Device).order_by(m.Device.id)).all()
    reservations = session.scalars(
        select(m.HeadroomReservation).order_by(m.HeadroomReservation.id)
    ).all()
    headroom = tuple(
        HeadroomSpec(
            reservation_id=h.name,
            device_ids=frozenset(d.name for d in devices if selector_matches(h.selector, d)),
            reserved_milli=h.reserved_milli,
            allowed_classes=frozenset(h.allowed_classes),
            borrowable=h.borrowable,
        )
        for h in reservations
    )
    return TenancyConfig(tenants=tenant_specs, quotas=quota_specs, headroom=headroom)
