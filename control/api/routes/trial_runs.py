"""Workflow test runs started by the admin on behalf of a named tenant.

The console tests a workflow with sample input without issuing and revoking a temporary key:
the run goes through the same core, admission and ledger as the tenant's own runs (it spends
and is billed to that tenant), and the start is audited under the admin's name.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from control.api.auth import Principal
from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES, ApiError
from control.api.running import (
    body_hash,
    inference_of,
    raise_for_outcome,
    run_out,
    settled,
    start_run,
)
from control.api.schemas.inference import RunOut, WorkflowTrialCreate
from control.clock import utcnow
from control.services.run_adapters import attach_adapter

router = APIRouter(
    tags=["workflow"],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 422, 429, 502, 503, 504)},
)
Name = Annotated[str, Path(min_length=1, max_length=200)]
Version = Annotated[str, Path(min_length=1, max_length=64)]


@router.post(
    "/admin/workflows/{name}/versions/{version}/test-runs",
    responses={202: {"model": RunOut, "description": "async: accepted, poll the run id"}},
)
async def start_trial(
    gw: GatewayDep, name: Name, version: Version, body: WorkflowTrialCreate, who: AdminDep
) -> RunOut:
    """Run the workflow as tenant ``tenant_id`` (audited as ``test_run``, billed to that
    tenant). sync: the finished run with each node's output and time; async: 202."""
    tenant = await run_in_threadpool(gw.services.tenants.get, body.tenant_id)
    if tenant.status != "active":
        raise ApiError(422, "invalid_value", f"tenant {tenant.name} is {tenant.status}",
                       field="tenant_id")  # fmt: skip
    on_behalf = Principal(kind="tenant", actor=f"{who.actor}/test-run", tenant_id=tenant.id,
                          tenant_name=tenant.name)  # fmt: skip
    inputs = body.model_dump(exclude={"mode", "timeout_s", "tenant_id"})
    digest = body_hash(f"test-run:{name}:{version}", inputs)
    lora = await attach_adapter(inference_of(gw), tenant.id, (name, version), body.adapter)
    started = await start_run(gw, on_behalf, (name, version), body.inputs, digest, None,
                              max_output_tokens=body.max_output_tokens,
                              session_id=body.session_id, sampling=lora)  # fmt: skip
    run_id = started.request.id
    await run_in_threadpool(lambda: gw.services.audit.record(
        at=utcnow(), actor=who.actor, action="test_run", entity_type="request", entity_id=run_id,
        after={"tenant_id": tenant.id, "tenant": tenant.name, "workflow": f"{name}:{version}"},
    ))  # fmt: skip
    if body.mode == "async":
        content = run_out(started.request).model_dump(mode="json")
        return JSONResponse(status_code=202, content=content)  # type: ignore[return-value]
    record = await settled(gw, run_id, body.timeout_s or gw.config.sync_timeout_s)
    raise_for_outcome(record)
    return run_out(record)
