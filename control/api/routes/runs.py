"""Workflow runs: start one by name and version (sync, async or streamed), read it back by
long-poll, follow its tokens as server-sent events, or do all of it over a WebSocket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from control.api.deps import AdminDep, AnyoneDep, GatewayDep, PageDep, TenantDep
from control.api.errors import ERROR_RESPONSES
from control.api.pagination import page_of
from control.api.running import (
    IdempotencyKey,
    body_hash,
    inference_of,
    own_run,
    raise_for_outcome,
    run_out,
    settled,
    start_run,
)
from control.api.schemas.common import Page
from control.api.schemas.inference import RunCreate, RunOut
from control.api.schemas.records import RequestOut, RequestStatus
from control.api.state import Gateway, gateway
from control.services.run_adapters import attach_adapter
from control.store.records import RequestRecord

router = APIRouter(
    tags=["runs"],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 413, 422, 429, 502, 503, 504)},
)
Name = Annotated[str, Path(min_length=1, max_length=200)]
Version = Annotated[str, Path(min_length=1, max_length=64)]
RunId = Annotated[str, Path(min_length=1, max_length=64)]


@router.post(
    "/v1/workflows/{name}/versions/{version}/runs",
    responses={202: {"model": RunOut, "description": "async: accepted, poll the run id"},
               200: {"content": {"text/event-stream": {}}, "model": RunOut}},
)  # fmt: skip
async def create_run(
    request: Request, name: Name, version: Version, body: RunCreate, who: TenantDep,
    key: IdempotencyKey = None,
) -> RunOut:  # fmt: skip
    """Run the workflow on the tenant's inputs. sync: the finished run (504 after
    ``timeout_s``); async: 202 with the run id; stream: SSE ``token`` events then ``result``."""
    gw = gateway(request)
    digest = body_hash(f"workflow:{name}:{version}", body.model_dump(exclude={"mode", "timeout_s"}))
    lora = await attach_adapter(inference_of(gw), who.tenant_id, (name, version), body.adapter)
    started = await start_run(gw, who, (name, version), body.inputs, digest, key,
                              max_output_tokens=body.max_output_tokens,
                              session_id=body.session_id, sampling=lora, quality=body.quality,
                              announce_at_end=body.mode == "sync",
                              timeout_s=_timeout(gw, body))  # fmt: skip
    run_id = started.request.id
    if body.mode == "async":
        return JSONResponse(
            status_code=202, content=run_out(started.request).model_dump(mode="json")
        )  # type: ignore[return-value]
    if body.mode == "stream":
        return StreamingResponse(sse_events(gw, run_id), media_type="text/event-stream")  # type: ignore[return-value]
    record = await settled(gw, run_id, _timeout(gw, body) or gw.config.sync_timeout_s)
    raise_for_outcome(record)
    return run_out(record)


def _timeout(gw: Gateway, body: RunCreate) -> float | None:
    """How long a sync caller waits (its run's deadline); None for async and stream runs."""
    return (body.timeout_s or gw.config.sync_timeout_s) if body.mode == "sync" else None


@router.get("/v1/runs")
def list_runs(
    gw: GatewayDep,
    who: AnyoneDep,
    page: PageDep,
    status: RequestStatus | None = None,
) -> Page[RunOut]:
    """The caller's runs, newest first (the admin token sees every tenant's)."""
    where = {} if status is None else {"status": status}
    if not who.is_admin:
        where["tenant_id"] = who.tenant_id
    found = gw.services.requests.page(
        offset=page.offset, limit=page.limit, newest_first=True, **where
    )
    return page_of(found, page, run_out)


@router.get("/v1/runs/{run_id}")
async def get_run(
    gw: GatewayDep,
    run_id: RunId,
    who: AnyoneDep,
    wait: Annotated[float, Query(ge=0, le=600, description="long-poll: seconds to wait")] = 0,
) -> RunOut:
    """A run; with ``wait`` the answer comes when it ends or after ``wait`` seconds."""
    record = await run_in_threadpool(gw.services.requests.get, run_id)
    own_run(who, record)
    if wait > 0 and record.status in ("queued", "running") and gw.inference is not None:
        record = await gw.inference.wait(run_id, min(wait, gw.config.max_wait_s))
    return run_out(record)


@router.post("/v1/runs/{run_id}/cancel")
async def cancel_run(gw: GatewayDep, run_id: RunId, who: TenantDep) -> RunOut:
    """Cancel the tenant's own run: it stops (queued steps dropped, running ones cancelled,
    nothing billed after this answer but work already done) and the answer is the run, now
    ``cancelled``. Cancelling a cancelled run answers it again; an ended run is a 409."""
    record = own_run(who, await run_in_threadpool(gw.services.requests.get, run_id))
    return run_out(await _cancel(gw, record.id, who.actor, f"cancelled by tenant {who.actor}"))


@router.delete("/admin/requests/{run_id}", tags=["request"])
async def cancel_request(gw: GatewayDep, run_id: RunId, who: AdminDep) -> RequestOut:
    """Cancel any tenant's request (admin): the same runtime cancel as a tenant's."""
    record = await run_in_threadpool(gw.services.requests.get, run_id)
    done = await _cancel(gw, record.id, who.actor, f"cancelled by {who.actor}")
    return RequestOut.model_validate(done, from_attributes=True)


async def _cancel(gw: Gateway, run_id: str, actor: str, reason: str) -> RequestRecord:
    if gw.inference is None:  # no live runtime: the row only (as a run cannot be going on)
        record = await run_in_threadpool(gw.services.requests.get, run_id)
        if record.status == "cancelled":
            return record  # idempotent, as through the runtime
        return await run_in_threadpool(gw.services.requests.retire, actor, run_id)
    return await gw.inference.cancel(run_id, actor, reason)


@router.get(
    "/v1/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE stream"}},
)
async def run_events(gw: GatewayDep, run_id: RunId, who: AnyoneDep) -> StreamingResponse:
    """Server-sent events of a run: ``token`` events while it generates, then one ``result``
    event with the run (``cancelled`` for a cancelled run; at once when it has already ended)."""
    record = own_run(who, await run_in_threadpool(gw.services.requests.get, run_id))
    ended = record if record.status not in ("queued", "running") else None
    if ended is None:
        inference_of(gw)  # 503 now, as JSON: not once the stream has started
    return StreamingResponse(sse_events(gw, run_id, ended), media_type="text/event-stream")


def _sse(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()


async def sse_events(
    gw: Gateway, run_id: str, ended: RequestRecord | None = None
) -> AsyncIterator[bytes]:
    """Token deltas while the run goes on, then its settled record as ``result``; a run that
    has ``ended`` already is answered at once (with or without a live runtime)."""
    if ended is not None:
        yield _sse(_end_event(ended), run_out(ended).model_dump(mode="json"))
        return
    inference = inference_of(gw)
    deltas = inference.stream(run_id)
    if deltas is not None:
        async for d in deltas:
            yield _sse("token", {"node": d.node_id, "index": d.index, "text": d.text})
    record = await inference.wait(run_id, gw.config.max_wait_s)
    yield _sse(_end_event(record), run_out(record).model_dump(mode="json"))


def _end_event(record: RequestRecord) -> str:
    return "cancelled" if record.status == "cancelled" else "result"  # a cancel ends it plainly
