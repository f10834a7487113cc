"""Usage: a tenant sees its own ledger (``/v1/usage``); the admin sees everyone's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from control.api.auth import Principal, any_principal
from control.api.errors import ERROR_RESPONSES, ApiError
from control.api.pagination import PageParams, page_params
from control.api.schemas.common import MAX_INT
from control.api.schemas.records import UsageOut, UsageReport, UsageTotals
from control.api.state import gateway
from control.services.inference import usage_entries

router = APIRouter(
    tags=["usage"], responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 413, 422)}
)


def _report(
    request: Request, tenant_id: int | None, request_id: str | None, page: PageParams
) -> UsageReport:
    gw = gateway(request)
    entries = usage_entries(gw.services, tenant_id=tenant_id, request_id=request_id)
    totals = {k: sum(getattr(e, k) for e in entries)
              for k in ("input_tokens", "output_tokens", "device_ms", "cost_units")}  # fmt: skip
    chosen = entries[page.offset : page.offset + page.limit]
    return UsageReport(
        tenant_id=tenant_id,
        request_id=request_id,
        totals=UsageTotals(**totals, entries=len(entries)),
        items=[UsageOut.model_validate(e) for e in chosen],
        total=len(entries),
        limit=page.limit,
        offset=page.offset,
    )


TenantQuery = Annotated[int | None, Query(ge=1, le=MAX_INT, description="admin only")]
RequestQuery = Annotated[str | None, Query(min_length=1, max_length=64)]


@router.get("/v1/usage")
async def my_usage(
    request: Request,
    who: Annotated[Principal, Depends(any_principal)],
    tenant_id: TenantQuery = None,
    request_id: RequestQuery = None,
    page: PageParams = Depends(page_params),
) -> UsageReport:
    """Ledger entries and integer totals. A tenant key sees only its own tenant's usage (and
    gets 403 for another ``tenant_id``); the admin token sees all or one ``tenant_id``."""
    if not who.is_admin:
        if tenant_id is not None and tenant_id != who.tenant_id:
            raise ApiError(403, "forbidden", "a tenant key reads only its own tenant's usage")
        tenant_id = who.tenant_id
    return await run_in_threadpool(_report, request, tenant_id, request_id, page)


@router.get("/admin/usage")
async def admin_usage(
    request: Request,
    who: Annotated[Principal, Depends(any_principal)],
    tenant_id: TenantQuery = None,
    request_id: RequestQuery = None,
    page: PageParams = Depends(page_params),
) -> UsageReport:
    """Every tenant's ledger (admin only), optionally for one tenant or request."""
    if not who.is_admin:
        raise ApiError(403, "forbidden", "this route needs the admin credential")
    return await run_in_threadpool(_report, request, tenant_id, request_id, page)
