"""Fair share under contention: demo bursts (start, list, stop) and the fair-share history.

``/admin/demo/bursts`` answers 403 (saying how to turn them on) unless the gateway runs with
``LEGATO_DEMO_BURSTS=true`` (``legato up``'s demo does); a burst above the configured caps is a
422 naming the field. Starting and stopping a burst are audited under the admin's name; its runs
are the tenant's (billed to it). ``/admin/fair-share/history`` reads the samples the gateway
takes every second or so (empty without a live runtime).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from control.api.demo_bursts import EXTRA, Burst, BurstLimits, DemoBursts, default_inputs
from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES, ApiError
from control.api.running import inference_of
from control.api.state import Gateway
from control.clock import utcnow, wall_time

router = APIRouter(
    tags=["fair share"], responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 422, 503)}
)
SAMPLER = "fair_share_sampler"
OFF = ("demo bursts are off on this gateway: start it with LEGATO_DEMO_BURSTS=true "
       "(`make up` / `legato up` turn them on for the demo)")  # fmt: skip
BurstId = Annotated[str, Path(min_length=1, max_length=64)]


class BurstCreate(BaseModel):
    """A bounded burst of one tenant's runs of one workflow."""

    model_config = ConfigDict(extra="forbid")
    tenant: str = Field(min_length=1, max_length=200, description="the tenant's name")
    workflow: str = Field(pattern=r"^[^:]+:[^:]+$", max_length=265, description="name:version")
    rate_per_s: float = Field(gt=0, description="runs submitted per second")
    duration_s: float = Field(gt=0, description="seconds the burst lasts")
    max_requests: int | None = Field(None, ge=1, description="stop after this many runs")
    inputs: dict[str, Any] | None = Field(
        None, description="each run's inputs (default: a short text for every text input)"
    )
    max_output_tokens: int = Field(16, ge=0, le=4096, description="per generate step")


class BurstOut(BaseModel):
    id: str
    tenant: str
    tenant_id: int
    workflow: str
    rate_per_s: float
    duration_s: float
    max_requests: int
    started_by: str
    started_at: float = Field(description="epoch seconds")
    ends_by: float = Field(description="epoch seconds")
    ended_at: float | None
    state: str = Field(description="running | finished | stopped | failed")
    sent: int
    accepted: int = Field(description="recorded and handed to the core")
    refused: int = Field(description="refused at the gateway (429 and the like)")
    last_refusal: str | None
    recent_run_ids: list[str]


class FairShareHistory(BaseModel):
    every_s: float = Field(description="sampling interval")
    samples: list[dict[str, Any]] = Field(
        description="oldest first: {at (epoch s), core_now, tenants: [{tenant, weight, "
        "received, entitled, served_milli, queued_steps, waiting_runs, in_flight_runs, "
        "borrowed_runs, preempted_total}]}"
    )


def bursts_of(gw: Gateway) -> DemoBursts:
    """The gateway's bursts; 403 saying how to enable them when they are off."""
    if not gw.config.demo_bursts:
        raise ApiError(403, "demo_bursts_off", OFF)
    bursts = gw.extras.get(EXTRA)
    if bursts is None:
        limits = BurstLimits(gw.config.demo_burst_max_rate_per_s,
                             gw.config.demo_burst_max_duration_s,
                             gw.config.demo_burst_max_requests)  # fmt: skip
        bursts = gw.extras[EXTRA] = DemoBursts(gw, limits)
    return bursts


def _check_bounds(body: BurstCreate, limits: BurstLimits) -> None:
    for name, value, cap in (("rate_per_s", body.rate_per_s, limits.max_rate_per_s),
                             ("duration_s", body.duration_s, limits.max_duration_s),
                             ("max_requests", body.max_requests or 0, limits.max_requests)):  # fmt: skip
        if value > cap:
            raise ApiError(422, "invalid_value", f"{name}={value:g} is above this gateway's cap "
                           f"of {cap:g} (LEGATO_DEMO_BURST_MAX_*)", field=name)  # fmt: skip


def _checked(gw: Gateway, body: BurstCreate) -> tuple[Any, dict[str, Any]]:
    """The tenant's record and the runs' inputs; 422 naming the field that is wrong."""
    found = gw.services.tenants.list(name=body.tenant)
    if not found or found[0].status != "active":
        raise ApiError(422, "invalid_value", f"no active tenant {body.tenant!r}", field="tenant")
    name, _, version = body.workflow.partition(":")
    workflow = gw.services.workflows.by_name(name, version)
    if workflow is None or workflow.status != "active":
        raise ApiError(422, "invalid_value", f"no active workflow {body.workflow!r}",
                       field="workflow")  # fmt: skip
    inputs = body.inputs or default_inputs(workflow.spec, f"demo burst for {body.tenant}")
    if inputs is None:
        raise ApiError(422, "invalid_value", f"workflow {body.workflow} has inputs other than "
                       "text: give them in `inputs`", field="inputs")  # fmt: skip
    return found[0], inputs


@router.post("/admin/demo/bursts", status_code=201)
async def start_burst(gw: GatewayDep, body: BurstCreate, who: AdminDep) -> BurstOut:
    """Start a bounded burst of ``tenant``'s runs (audited ``demo_burst_start``)."""
    bursts = bursts_of(gw)
    _check_bounds(body, bursts.limits)
    inference_of(gw)  # 503 without a live runtime
    tenant, inputs = await run_in_threadpool(_checked, gw, body)
    cap = body.max_requests or bursts.limits.max_requests
    burst = Burst(id=bursts.new_id(), tenant=tenant.name, tenant_id=tenant.id,
                  workflow=body.workflow, rate_per_s=body.rate_per_s, duration_s=body.duration_s,
                  max_requests=cap, started_by=who.actor, started_at=wall_time())  # fmt: skip
    await run_in_threadpool(lambda: gw.services.audit.record(
        at=utcnow(), actor=who.actor, action="demo_burst_start", entity_type="demo_burst",
        entity_id=burst.id, after=burst.view()))  # fmt: skip
    ensure_sampling(gw)
    bursts.start(burst, inputs, body.max_output_tokens)
    return BurstOut(**burst.view())


@router.get("/admin/demo/bursts")
async def list_bursts(gw: GatewayDep, who: AdminDep) -> list[BurstOut]:
    """Running and recent bursts, newest first, with their counts."""
    return [BurstOut(**b.view()) for b in bursts_of(gw).list()]


@router.delete("/admin/demo/bursts/{burst_id}")
async def stop_burst(gw: GatewayDep, burst_id: BurstId, who: AdminDep) -> BurstOut:
    """Stop a burst early (audited ``demo_burst_stop``; runs already sent go on)."""
    bursts = bursts_of(gw)
    before = bursts.get(burst_id).view()
    burst = await bursts.stop(burst_id)
    await run_in_threadpool(lambda: gw.services.audit.record(
        at=utcnow(), actor=who.actor, action="demo_burst_stop", entity_type="demo_burst",
        entity_id=burst.id, before=before, after=burst.view()))  # fmt: skip
    return BurstOut(**burst.view())


def ensure_sampling(gw: Gateway) -> None:
    """Start the gateway's fair-share sampler if it is not running (a test that starts the live
    path without the app's lifespan); nothing without a live runtime."""
    sampler = gw.extras.get(SAMPLER)
    if sampler is not None:
        sampler.ensure_started()


@router.get("/admin/fair-share/history")
async def fair_share_history(
    gw: GatewayDep, who: AdminDep,
    minutes: Annotated[float, Query(gt=0, le=60, description="how far back")] = 5,
) -> FairShareHistory:  # fmt: skip
    """Per-tenant received versus entitled share, queue depth, borrowing and preemptions,
    sampled every second or so over the last ``minutes`` (the gateway keeps about ten)."""
    ensure_sampling(gw)
    sampler = gw.extras.get(SAMPLER)
    if sampler is None:
        return FairShareHistory(every_s=gw.config.fair_history_every_s, samples=[])
    samples = sampler.history.since(wall_time() - minutes * 60)
    return FairShareHistory(every_s=sampler.every_s, samples=samples)
