"""The request timeline (admin): a run's step spans and the core's decisions for it, and the
recent slow runs an operator picks one from."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from starlette.concurrency import run_in_threadpool

from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas.common import MAX_INT
from control.api.schemas.records import RequestStatus
from control.api.schemas.timeline import RunTimeline, SlowRun
from control.api.state import Gateway
from control.services import run_timeline
from control.services.errors import NotFound
from control.store.records import RequestRecord

router = APIRouter(
    tags=["request"], responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 422)}
)
RunId = Annotated[str, Path(min_length=1, max_length=64)]


async def _record(gw: Gateway, run_id: str) -> RequestRecord:
    """The run as it stands: this process's memory first (a run just finished), else the DB."""
    if gw.inference is not None:
        return await gw.inference.get(run_id)
    return await run_in_threadpool(gw.services.requests.get, run_id)


def _tenant_name(gw: Gateway, tenant_id: int) -> str | None:
    try:
        return gw.services.tenants.get(tenant_id).name
    except NotFound:
        return None


@router.get("/admin/requests/{run_id}/timeline")
async def request_timeline(gw: GatewayDep, run_id: RunId, who: AdminDep) -> RunTimeline:
    """The run's timeline (admin only; 404 for an unknown run): per step attempt its queue
    wait, batch wait, transfer and device time on which device and replica; the decisions
    taken for it; and a one-line summary of where its time went."""
    record = await _record(gw, run_id)
    tenant = await run_in_threadpool(_tenant_name, gw, record.tenant_id)
    return RunTimeline.model_validate(run_timeline.timeline_view(record, tenant))


@router.get("/admin/runs/slowest")
async def slowest_runs(
    gw: GatewayDep,
    who: AdminDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    tenant_id: Annotated[int | None, Query(ge=1, le=MAX_INT)] = None,
    workflow: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    status: RequestStatus | None = None,
) -> list[SlowRun]:
    """The slowest of the most recent finished runs (the last ``run_timeline.SLOW_SCAN``
    matching the filters), slowest first (admin only)."""
    where: dict[str, object] = {}
    for column, value in (("tenant_id", tenant_id), ("workflow_name", workflow),
                          ("status", status)):  # fmt: skip
        if value is not None:
            where[column] = value
    found = await run_in_threadpool(
        lambda: gw.services.requests.page(limit=run_timeline.SLOW_SCAN, newest_first=True, **where)
    )
    return [SlowRun.model_validate(r) for r in run_timeline.slowest(found.items, limit)]
