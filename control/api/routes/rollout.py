"""Admin routes that roll placement plans out on the live runtime (and back), and show progress.

``POST /admin/placement-plans/{id}/rollout`` starts converging the live fleet to the plan's
placements on the real devices; ``POST /admin/placement-plans/{id}/rollback`` goes back to the
placement before that plan's rollout (409 unless it is the live runtime's last completed
rollout); ``POST /admin/placement-plans/rollback`` does the same for whatever rollout completed
last. The POSTs answer 202 at once; ``GET /admin/placement-plans/{id}/rollout`` shows progress
(see :func:`rollout_progress` for the JSON). 409 while another rollout is in progress, or
when the core refuses the plan (the body's ``detail`` says why: e.g. a tensor-parallel group no
interconnect domain can hold; nothing changes), 409 for a plan the twin has not simulated
unless the body says ``{"force": true}`` (``control.services.plan_gate``; the rollout's audit
record then says forced and why), 503 without a live runtime (the GET works without one, from
the audit log). On a gateway built with the plan settings, each rollout started here is
watched by ``control.services.plan_observer`` (observed p50/p99 beside the prediction, flag,
automatic rollback where enabled).

Plan lifecycle: a completed rollout makes the plan ``active`` (the previous active plan
``retired``); a failed load (the core restores the previous placement) or a completed rollback
makes it ``rolled_back`` and the plan active before it ``active`` again; all audited.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from control.api.auth import require_admin
from control.api.crud import IntId
from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES
from control.api.routes.plans import plan_watch
from control.api.schemas.placement import RolloutRequest
from control.api.state import Gateway
from control.services.inference_calls import ServiceUnavailable
from control.services.plan_gate import unsimulated_reason
from control.services.plan_observer import PlanObserver
from control.services.rollout import RolloutService

router = APIRouter(
    dependencies=[Depends(require_admin)],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 413, 422, 503)},
    tags=["placement_plan"],
)


class RolloutPlacement(BaseModel):
    model: str
    device_ids: list[str]
    replicas: int
    pool: str


class RolloutStarted(BaseModel):
    plan_id: str
    placements: list[RolloutPlacement]
    status: str = "started"


class RollbackStarted(BaseModel):
    plan_id: str | None = None
    status: str = "rollback requested"


class RolloutTransitionOut(BaseModel):
    at: str = Field(description="when it was recorded (ISO 8601)")
    phase: str = Field(description="rollout | rollback")
    from_: str | None = Field(alias="from", description="state before ('' when it started)")
    to: str | None = Field(description="state after")
    reason: str | None

    model_config = {"populate_by_name": True}


class RolloutProgressOut(BaseModel):
    """Progress of one plan's rollout (fields as ``control.services.rollout.RolloutProgress``)."""

    plan_id: int
    plan_status: str = Field(description="draft | simulated | active | retired | rolled_back")
    previous_plan_id: int | None = Field(description="plan active when the rollout started")
    phase: str | None = Field(description="rollout | rollback; null: never rolled out")
    state: str | None = Field(description="loading | draining | completed | aborted | failed")
    in_progress: bool
    live: bool = Field(description="figures from the running core (false: audit log only)")
    steps_done: int | None = Field(description="replica loads + evictions done")
    steps_total: int | None = Field(description="replica loads + evictions needed (null: unknown)")
    current_step: str
    loads_pending: list[str]
    draining: list[str]
    blocked: list[str] = Field(description="'model@devices' loads waiting for memory")
    loaded: int
    evicted: int
    moved: int = Field(description="queued steps moved off draining replicas")
    errors: list[str] = Field(description="reasons of aborted / failed transitions, oldest first")
    transitions: list[RolloutTransitionOut]


def rollouts(gw: Gateway, need_runtime: bool = True) -> RolloutService:
    """A rollout service over the gateway's live runtime (503 without one unless
    ``need_runtime`` is False: then a service that only reads progress). It holds no state of
    its own: the transitions are recorded by the runtime's ``on_rollout`` callback."""
    runtime = None if gw.inference is None else getattr(gw.inference, "runtime", None)
    if runtime is None and need_runtime:
        raise ServiceUnavailable("no live runtime: rollouts need a running gateway runtime")
    return RolloutService(gw.services.factory, gw.services.plans, runtime)


@router.post("/admin/placement-plans/{item_id}/rollout", status_code=202)
async def rollout_plan(
    gw: GatewayDep, item_id: IntId, who: AdminDep, body: RolloutRequest | None = None
) -> RolloutStarted:
    """Roll the plan out on the live fleet (real devices only); the plan becomes active when
    the rollout completes, ``rolled_back`` when a failed load makes the core restore. 409 with
    the core's reason when the core refuses the plan as it stands (nothing changes), and 409
    naming why for a plan the twin has not simulated unless ``force: true`` (then the rollout's
    audit record says forced). The observed p50/p99 of the window after it completes are
    stored with the plan (``control.services.plan_observer``)."""
    service = rollouts(gw)
    service.placement_event(item_id)  # a plan nothing of which could run is refused as such first
    forced = unsimulated_reason(gw.services.plans.get(item_id), force=bool(body and body.force))
    event = await service.start(who.actor, item_id, forced=forced)
    watch_rollout(gw, service, item_id)
    placements = [RolloutPlacement(model=k, device_ids=list(d), replicas=n, pool=p)
                  for k, d, n, p in event.placements]  # fmt: skip
    return RolloutStarted(plan_id=event.plan_id, placements=placements)


def watch_rollout(gw: Gateway, service: RolloutService, plan_id: int) -> None:
    """Start the observer of this rollout on the running loop (the task set keeps it alive),
    on a gateway built with the plan settings (``extras["plan_watch"]``: ``build_gateway``
    installs them; an app built without them, e.g. a test's, observes nothing)."""
    if gw.extras.get("plan_watch") is None:
        return
    observer = PlanObserver(gw.services.factory, service, plan_watch(gw))
    tasks: set[asyncio.Task[None]] = gw.extras.setdefault("plan_watches", set())
    task = asyncio.get_running_loop().create_task(observer.watch(plan_id))
    tasks.add(task)
    task.add_done_callback(tasks.discard)


@router.get("/admin/placement-plans/{item_id}/rollout")
async def rollout_progress(gw: GatewayDep, item_id: IntId) -> RolloutProgressOut:
    """Progress of the plan's rollout (or of its rollback), for the console to poll.

    JSON: ``{"plan_id": 12, "plan_status": "active", "previous_plan_id": 11,
    "phase": "rollout", "state": "loading", "in_progress": true, "live": true,
    "steps_done": 1, "steps_total": 3, "current_step": "loading 1 replica(s): m:1@cpu:0#2",
    "loads_pending": ["m:1@cpu:0#2"], "draining": [], "blocked": [], "loaded": 1,
    "evicted": 0, "moved": 0, "errors": [], "transitions": [{"at": "2026-11-29T23:40:00",
    "phase": "rollout", "from": "", "to": "loading", "reason": "..."}]}``.
    ``phase``/``state`` are null for a plan never rolled out; ``live`` false means the figures
    come from the audit log only (e.g. no runtime, or another plan's rollout runs now)."""
    view = rollouts(gw, need_runtime=False).progress(item_id)
    out: dict[str, Any] = {**view.__dict__}
    out["transitions"] = [RolloutTransitionOut(**t) for t in view.transitions]
    return RolloutProgressOut(**out)


@router.post("/admin/placement-plans/{item_id}/rollback", status_code=202)
async def rollback_one(gw: GatewayDep, item_id: IntId, who: AdminDep) -> RollbackStarted:
    """Roll back this plan: the placement before its rollout is restored the same safe way;
    when that completes the plan is ``rolled_back`` and the previous plan ``active`` again."""
    await rollouts(gw).rollback(who.actor, item_id)
    return RollbackStarted(plan_id=str(item_id))


@router.post("/admin/placement-plans/rollback", status_code=202)
async def rollback_plan(gw: GatewayDep, who: AdminDep) -> RollbackStarted:
    """Go back to the placement held before the last completed rollout."""
    await rollouts(gw).rollback(who.actor)
    return RollbackStarted()
