"""One repository per table, with the queries the services need beyond plain CRUD."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select

from control.store import records as rec
from control.store.base import PageOf, Repository
from db import models as m

_SUMMED = ("input_tokens", "output_tokens", "device_ms", "cost_units")


def time_range(
    column: Any, since: datetime | None, until: datetime | None
) -> list[ColumnElement[bool]]:
    """Clauses for ``since <= column < until`` (each bound only when given)."""
    clauses = []
    if since is not None:
        clauses.append(column >= since)
    if until is not None:
        clauses.append(column < until)
    return clauses


class NodeRepository(Repository[m.Node, rec.NodeRecord]):
    row_type = m.Node
    record_type = rec.NodeRecord


class DeviceRepository(Repository[m.Device, rec.DeviceRecord]):
    row_type = m.Device
    record_type = rec.DeviceRecord

    def existing_ids(self, ids: list[int]) -> set[int]:
        """Which of ``ids`` name a device."""
        query = select(m.Device.id).where(m.Device.id.in_(ids))
        return set(self.session.scalars(query))


class ModelRepository(Repository[m.ServedModel, rec.ModelRecord]):
    row_type = m.ServedModel
    record_type = rec.ModelRecord


class LatencyProfileRepository(Repository[m.ModelLatencyProfile, rec.LatencyProfileRecord]):
    row_type = m.ModelLatencyProfile
    record_type = rec.LatencyProfileRecord


class PlacementPlanRepository(Repository[m.PlacementPlan, rec.PlacementPlanRecord]):
    row_type = m.PlacementPlan
    record_type = rec.PlacementPlanRecord


class PlacementRepository(Repository[m.Placement, rec.PlacementRecord]):
    row_type = m.Placement
    record_type = rec.PlacementRecord


class WorkflowRepository(Repository[m.Workflow, rec.WorkflowRecord]):
    row_type = m.Workflow
    record_type = rec.WorkflowRecord


class CohortRepository(Repository[m.Cohort, rec.CohortRecord]):
    row_type = m.Cohort
    record_type = rec.CohortRecord


class TenantRepository(Repository[m.Tenant, rec.TenantRecord]):
    row_type = m.Tenant
    record_type = rec.TenantRecord


class ApiKeyRepository(Repository[m.ApiKey, rec.ApiKeyRecord]):
    row_type = m.ApiKey
    record_type = rec.ApiKeyRecord


class QuotaRepository(Repository[m.Quota, rec.QuotaRecord]):
    row_type = m.Quota
    record_type = rec.QuotaRecord


class HeadroomRepository(Repository[m.HeadroomReservation, rec.HeadroomRecord]):
    row_type = m.HeadroomReservation
    record_type = rec.HeadroomRecord


class RequestRepository(Repository[m.Request, rec.RequestRecord]):
    row_type = m.Request
    record_type = rec.RequestRecord


class UsageRepository(Repository[m.UsageEntry, rec.UsageRecord]):
    row_type = m.UsageEntry
    record_type = rec.UsageRecord

    def totals(self, **equal: object) -> dict[str, int]:
        """Sums of tokens, device ms and cost units over the matching entries (0 when none)."""
        query = select(*(func.coalesce(func.sum(getattr(m.UsageEntry, c)), 0) for c in _SUMMED))
        row = self.session.execute(query.filter_by(**equal)).one()
        return {c: int(v) for c, v in zip(_SUMMED, row, strict=True)}

    def ledger(
        self,
        *,
        tenant_id: int | None = None,
        request_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> tuple[PageOf[rec.UsageLine], dict[str, int]]:
        """A page of entries (oldest first) with their tenant, filtered in the database by
        tenant, request and ``recorded_at`` range; plus the integer sums and count over every
        match (not just the page)."""
        u, q, t = m.UsageEntry, m.Request, m.Tenant
        where = time_range(u.recorded_at, since, until)
        if tenant_id is not None:
            where.append(q.tenant_id == tenant_id)
        if request_id is not None:
            where.append(u.request_id == request_id)
        joined = select(u, t.id, t.name).join(q, q.id == u.request_id).join(t, t.id == q.tenant_id)
        sums = select(func.count(), *(func.coalesce(func.sum(getattr(u, c)), 0) for c in _SUMMED))
        sums = sums.select_from(u).join(q, q.id == u.request_id).where(*where)
        count, *values = self.session.execute(sums).one()
        query = joined.where(*where).order_by(u.id).offset(offset)
        if limit is not None:
            query = query.limit(limit)
        lines = [rec.UsageLine(self.to_record(row), tid, name)
                 for row, tid, name in self.session.execute(query)]  # fmt: skip
        totals = {c: int(v) for c, v in zip(_SUMMED, values, strict=True)}
        return PageOf(lines, int(count)), totals


class TraceRepository(Repository[m.Trace, rec.TraceRecord]):
    row_type = m.Trace
    record_type = rec.TraceRecord


class WhatIfRunRepository(Repository[m.WhatIfRun, rec.WhatIfRunRecord]):
    row_type = m.WhatIfRun
    record_type = rec.WhatIfRunRecord


class AuditRepository(Repository[m.AuditRecord, rec.AuditRecordView]):
    row_type = m.AuditRecord
    record_type = rec.AuditRecordView
