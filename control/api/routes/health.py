"""Liveness, readiness and Prometheus metrics (no credential needed)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from control.api.canary_metrics import canary_registry
from control.api.deps import GatewayDep

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, str]


@router.get("/healthz")
async def healthz() -> Health:
    """The process answers. Says nothing about the database or the devices."""
    return Health(status="ok")


@router.get("/readyz", responses={503: {"model": Readiness, "description": "not ready"}})
async def readyz(gw: GatewayDep) -> Readiness:
    """Ready when the database answers and, when inference is served, the runtime has at
    least one healthy device. 503 with the failing checks otherwise."""
    checks: dict[str, str] = {}
    try:
        await run_in_threadpool(gw.services.audit.count)
        checks["database"] = "ok"
    except Exception as exc:  # readiness reports any failure instead of raising it
        checks["database"] = f"unreachable: {type(exc).__name__}"
    if gw.inference is not None:
        checks["runtime"] = gw.inference.readiness()
    ready = all(v == "ok" for v in checks.values())
    body = Readiness(ready=ready, checks=checks)
    if not ready:
        return JSONResponse(status_code=503, content=body.model_dump())  # type: ignore[return-value]
    return body


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def metrics(gw: GatewayDep) -> Response:
    """Prometheus exposition of the gateway's counters and histograms."""
    runtime = None if gw.inference is None else gw.inference.runtime
    extra = () if runtime is None else (runtime.metrics.registry, canary_registry(runtime))
    body = gw.metrics.render(*extra)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
