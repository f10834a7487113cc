"""Tenancy use cases: cohorts, tenants, quotas and headroom reservations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.services import rules as r
from control.services.base import CrudService, Reference
from control.services.errors import ValidationError
from control.store import records as rec
from control.store import repositories as repo
from db import vocab


class CohortService(CrudService[rec.CohortRecord]):
    """Cohorts; deleting one that still has tenants is a Conflict."""

    entity = "cohort"
    repository = repo.CohortRepository
    rules = (r.text("name", 100), r.free_text("description"))
    unique_keys = (("name",),)


class TenantService(CrudService[rec.TenantRecord]):
    """Tenants: unique name, fair-share weight > 0, default priority class, cohort, and
    ``strict_priority`` (its work overtakes other tenants' lower classes, bounded), the default
    ``quality`` class of its requests and ``allow_degrade`` (precision variants)."""

    entity = "tenant"
    repository = repo.TenantRepository
    rules = (
        r.text("name", 100),
        r.positive("weight"),
        r.one_of("priority_class", vocab.PRIORITY_CLASSES),
        r.one_of("status", vocab.TENANT_STATUSES),
        r.boolean("strict_priority"),
        r.one_of("quality", vocab.QUALITY_CLASSES),
        r.boolean("allow_degrade"),
    )
    references = (Reference("cohort_id", repo.CohortRepository, "cohort"),)
    unique_keys = (("name",),)
    retired_status = "retired"


class QuotaService(CrudService[rec.QuotaRecord]):
    """Quotas in integer units per ``period_s``; a None limit means unlimited."""

    entity = "quota"
    repository = repo.QuotaRepository
    rules = (
        r.one_of("resource", vocab.QUOTA_RESOURCES),
        r.at_least("nominal", 0),
        r.at_least("borrowing_limit", 0),
        r.at_least("lending_limit", 0),
        r.positive("period_s"),
    )
    references = (Reference("tenant_id", repo.TenantRepository, "tenant"),)
    unique_keys = (("tenant_id", "resource"),)
    updatable = frozenset({"nominal", "borrowing_limit", "lending_limit", "period_s"})
    stamp_field = None


_SELECTOR_KEYS = {"labels": dict, "accelerator": str, "device_ids": list}


def _selector(value: Any) -> bool:
    if not isinstance(value, dict) or not value:
        return False
    return all(k in _SELECTOR_KEYS and isinstance(v, _SELECTOR_KEYS[k]) for k, v in value.items())


class HeadroomService(CrudService[rec.HeadroomRecord]):
    """Headroom reservations; ``reserved_milli`` in [0, 500] (at most half a pool)."""

    entity = "headroom_reservation"
    repository = repo.HeadroomRepository
    rules = (
        r.text("name", 100),
        r.Rule(
            "selector",
            _selector,
            "must be an object with labels (object), accelerator (string) or device_ids (list)",
        ),
        r.between("reserved_milli", 0, vocab.MAX_RESERVED_MILLI),
        r.each_of("allowed_classes", vocab.PRIORITY_CLASSES),
        r.boolean("borrowable"),
    )
    unique_keys = (("name",),)

    def _check_values(self, values: Mapping[str, Any]) -> None:
        selector = values.get("selector") or {}
        if not all(r.is_int(i) for i in selector.get("device_ids", [])):
            raise ValidationError("selector", selector, "device_ids must be integer device ids")
