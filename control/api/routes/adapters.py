"""LoRA adapters: the admin registers, lists and retires every tenant's (``/admin/adapters``,
the generic CRUD router); a tenant lists its own (``GET /v1/adapters``)."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from control.api.crud import Resource, crud_router
from control.api.deps import AnyoneDep, GatewayDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import adapters as a

RESOURCE = Resource(
    "/admin/adapters", "lora_adapter", lambda s: s.lora_adapters, a.AdapterOut, a.AdapterCreate,
    a.AdapterUpdate, a.AdapterFilter, "retire",
)  # fmt: skip

admin_router = crud_router(RESOURCE)
router = APIRouter(tags=["lora_adapter"], responses={k: ERROR_RESPONSES[k] for k in (401, 403)})


@router.get("/v1/adapters")
async def my_adapters(gw: GatewayDep, who: AnyoneDep) -> list[a.AdapterOut]:
    """The calling tenant's adapters, retired ones included (the admin token: every tenant's)."""
    service = gw.services.lora_adapters
    if who.is_admin:
        records = await run_in_threadpool(service.list)
    else:
        records = await run_in_threadpool(service.list, tenant_id=who.tenant_id)
    return [a.AdapterOut.model_validate(r) for r in records]
