"""Usage: a tenant sees its own ledger (``/v1/usage``); the admin sees everyone's."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from control.api.deps import AnyoneDep, GatewayDep, PageDep
from control.api.errors import ERROR_RESPONSES, ApiError
from control.api.pagination import PageParams
from control.api.schemas.common import MAX_INT, UtcDateTime
from control.api.schemas.records import UsageOut, UsageReport, UsageTotals
from control.api.state import Gateway
from control.services.errors import NotFound
from control.store.records import UsageLine

router = APIRouter(
    tags=["usage"], responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 413, 422)}
)


def _line(line: UsageLine) -> UsageOut:
    out = UsageOut.model_validate(line.entry)
    return out.model_copy(update={"tenant_id": line.tenant_id, "tenant_name": line.tenant_name})


def _report(
    gw: Gateway,
    tenant_id: int | None,
    request_id: str | None,
    window: tuple[datetime | None, datetime | None],
    page: PageParams,
) -> UsageReport:
    """One page of the ledger in scope, with sums over the whole scope (database-side)."""
    services = gw.services
    if request_id is not None:
        owner = services.requests.get(request_id).tenant_id  # NotFound: 404
        if tenant_id is not None and owner != tenant_id:
            raise NotFound("request", request_id)
    found = services.usage.ledger(tenant_id=tenant_id, request_id=request_id, since=window[0],
                                  until=window[1], offset=page.offset, limit=page.limit)  # fmt: skip
    return UsageReport(
        tenant_id=tenant_id,
        request_id=request_id,
        totals=UsageTotals(**found.totals, entries=found.total),
        items=[_line(x) for x in found.lines],
        total=found.total,
        limit=page.limit,
        offset=page.offset,
    )


TenantQuery = Annotated[int | None, Query(ge=1, le=MAX_INT, description="admin only")]
RequestQuery = Annotated[str | None, Query(min_length=1, max_length=64)]
Since = Annotated[
    UtcDateTime | None, Query(description="entries recorded at or after (UTC without a zone)")
]
Until = Annotated[
    UtcDateTime | None, Query(description="entries recorded before (UTC without a zone)")
]


@router.get("/v1/usage")
async def my_usage(
    gw: GatewayDep,
    who: AnyoneDep,
    page: PageDep,
    tenant_id: TenantQuery = None,
    request_id: RequestQuery = None,
    since: Since = None,
    until: Until = None,
) -> UsageReport:
    """Ledger entries and integer totals. A tenant key sees only its own tenant's usage (and
    gets 403 for another ``tenant_id``); the admin token sees all or one ``tenant_id``."""
    if not who.is_admin:
        if tenant_id is not None and tenant_id != who.tenant_id:
            raise ApiError(403, "forbidden", "a tenant key reads only its own tenant's usage")
        tenant_id = who.tenant_id
    return await run_in_threadpool(_report, gw, tenant_id, request_id, (since, until), page)


@router.get("/admin/usage")
async def admin_usage(
    gw: GatewayDep,
    who: AnyoneDep,
    page: PageDep,
    tenant_id: TenantQuery = None,
    request_id: RequestQuery = None,
    since: Since = None,
    until: Until = None,
) -> UsageReport:
    """Every tenant's ledger (admin only), optionally for one tenant, request or period; each
    entry names its tenant (id and name)."""
    if not who.is_admin:
        raise ApiError(403, "forbidden", "this route needs the admin credential")
    return await run_in_threadpool(_report, gw, tenant_id, request_id, (since, until), page)
