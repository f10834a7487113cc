"""What-if variants of tenancy as an operator would save it: quotas created, edited or deleted
(``quota_set``) and tenants' weight, priority class, cohort or flags changed (``tenant_set``).

Each knob takes the baseline's ``quotas``/``tenants`` sections (the core's QuotaSpec and
TenantSpec fields, tenants by name) and returns them changed, after the very checks the quota or
tenant service would make on the save (its field rules, the referenced tenant or cohort exists,
one quota per tenant and resource), so a preview never shows a change that could not be saved.
A refusal is a ``ValidationError`` naming ``<where>[i].<field>``. Reads only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.services.errors import ValidationError
from control.services.tenancy import QuotaService, TenantService
from db import models as m

#: Used for their field checks only (they never run a unit of work, so they need no database).
_QUOTAS = QuotaService(sessionmaker())
_TENANTS = TenantService(sessionmaker())
_LIMITS = ("nominal", "borrowing_limit", "lending_limit", "period_s")


def _items(value: Any, where: str, what: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(i, Mapping) for i in value):
        raise ValidationError(where, value, f"must be a list of {what} (objects)")
    return [dict(i) for i in value]


def _checked(service: Any, values: Mapping[str, Any], creating: bool, where: str) -> None:
    try:
        service.check_fields(values, creating=creating)
    except ValidationError as exc:
        raise ValidationError(f"{where}.{exc.field}", exc.value, exc.message) from None


def _stored(session: Session, row_type: type, item: dict[str, Any], where: str, what: str) -> Any:
    row = session.get(row_type, item.pop("id")) if isinstance(item.get("id"), int) else None
    if row is None:
        raise ValidationError(f"{where}.id", item.get("id"), f"no {what} with this id")
    return row


def _quota_spec(tenant: str, values: Mapping[str, Any]) -> dict[str, Any]:
    return {"tenant_id": tenant, "resource": values["resource"], "nominal": int(values["nominal"]),
            "borrowing_limit": values.get("borrowing_limit"),
            "lending_limit": values.get("lending_limit"),
            "period_s": int(values.get("period_s") or 60)}  # fmt: skip


def _one_quota(session: Session, section: list[dict], item: dict[str, Any], where: str) -> list:
    """``section`` with one quota change applied (see :func:`quota_set`)."""
    if "id" not in item:  # a new quota, as POST /admin/quotas would take it
        _checked(_QUOTAS, item, True, where)
        tenant = session.get(m.Tenant, item["tenant_id"])
        if tenant is None:
            raise ValidationError(f"{where}.tenant_id", item["tenant_id"], "no tenant with this id")
        if any(
            q["tenant_id"] == tenant.name and q["resource"] == item["resource"] for q in section
        ):
            raise ValidationError(f"{where}.resource", item["resource"],
                                  f"tenant {tenant.name} already has this quota: edit it")  # fmt: skip
        return [*section, _quota_spec(tenant.name, item)]
    row = _stored(session, m.Quota, item, where, "quota")
    tenant = session.get(m.Tenant, row.tenant_id)
    others = [q for q in section
              if (q["tenant_id"], q["resource"]) != (tenant.name, row.resource)]  # fmt: skip
    if item.pop("delete", False) is True:
        return others
    _checked(_QUOTAS, item, False, where)
    merged = {"resource": row.resource, **{k: getattr(row, k) for k in _LIMITS}, **item}
    return [*others, _quota_spec(tenant.name, merged)]


def quota_set(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """Quotas as the operator would save them, in order: ``{"tenant_id", "resource",
    "nominal", ...}`` creates one, ``{"id", <fields>}`` edits stored quota ``id`` and
    ``{"id", "delete": true}`` deletes it."""
    section = [dict(q) for q in base.get("quotas") or ()]
    for i, item in enumerate(_items(value, where, "quota changes")):
        section = _one_quota(session, section, item, f"{where}[{i}]")
    return {"quotas": section}


def _one_tenant(session: Session, base: Mapping[str, Any], item: dict, where: str) -> dict:
    """``base``'s tenants and quotas with one tenant change applied (see :func:`tenant_set`)."""
    row = _stored(session, m.Tenant, item, where, "tenant")
    _checked(_TENANTS, item, False, where)
    cohort = row.cohort_id
    if "cohort_id" in item:
        cohort = item["cohort_id"]
        if cohort is not None and session.get(m.Cohort, cohort) is None:
            raise ValidationError(f"{where}.cohort_id", cohort, "no cohort with this id")
    tenants = [dict(t) for t in base.get("tenants") or () if t["tenant_id"] != row.name]
    quotas = [dict(q) for q in base.get("quotas") or ()]
    spec = {"tenant_id": row.name, "weight": item.get("weight", row.weight),
            "priority_class": item.get("priority_class", row.priority_class),
            "cohort": session.get(m.Cohort, cohort).name if cohort is not None else None,
            "status": item.get("status", row.status),
            "strict_priority": bool(item.get("strict_priority", row.strict_priority)),
            "quality": item.get("quality", row.quality),
            "allow_degrade": bool(item.get("allow_degrade", row.allow_degrade))}  # fmt: skip
    if spec["status"] == "retired":  # the core no longer knows it, nor its quotas
        return {"tenants": tenants, "quotas": [q for q in quotas if q["tenant_id"] != row.name]}
    return {"tenants": [*tenants, spec], "quotas": quotas}


def tenant_set(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """Tenants as the operator would save them: ``{"id", <fields>}`` changes stored tenant
    ``id`` (weight, priority_class, cohort_id, status, strict_priority, quality,
    allow_degrade, name)."""
    current = {"tenants": base.get("tenants") or (), "quotas": base.get("quotas") or ()}
    for i, item in enumerate(_items(value, where, "tenant changes")):
        current = _one_tenant(session, current, item, f"{where}[{i}]")
    return current
