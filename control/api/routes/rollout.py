"""Admin routes that roll placement plans out on the live runtime (and back).

``POST /admin/placement-plans/{id}/rollout`` starts converging the live fleet to the plan's
placements on the real devices; ``POST /admin/placement-plans/rollback`` goes back to the
placement before the last completed rollout. Both answer 202 at once: progress shows in the
snapshot's ``rollout`` and in the audit log. 409 while another rollout is in progress, 503
without a live runtime.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from control.api.auth import Principal, require_admin
from control.api.crud import IntId
from control.api.errors import ERROR_RESPONSES
from control.api.state import Gateway, gateway
from control.services.inference import ServiceUnavailable
from control.services.rollout import RolloutService

router = APIRouter(
    dependencies=[Depends(require_admin)],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 503)},
    tags=["placement_plan"],
)
Admin = Annotated[Principal, Depends(require_admin)]


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
    status: str = "rollback requested"


def rollouts(gw: Gateway) -> RolloutService:
    """The gateway's rollout service, built once per inference service (503 without one)."""
    if gw.inference is None or getattr(gw.inference, "runtime", None) is None:
        raise ServiceUnavailable("no live runtime: rollouts need a running gateway runtime")
    svc = gw.extras.get("rollouts")
    if svc is None or svc[0] is not gw.inference:
        svc = (gw.inference, RolloutService(gw.inference.factory, gw.services.plans, gw.inference))
        gw.extras["rollouts"] = svc
    return svc[1]


@router.post("/admin/placement-plans/{item_id}/rollout", status_code=202)
async def rollout_plan(request: Request, item_id: IntId, who: Admin) -> RolloutStarted:
    """Roll the plan out on the live fleet (real devices only); the plan becomes active when
    the rollout completes, ``rolled_back`` when a failed load makes the core restore."""
    event = await rollouts(gateway(request)).start(who.actor, item_id)
    placements = [RolloutPlacement(model=k, device_ids=list(d), replicas=n, pool=p)
                  for k, d, n, p in event.placements]  # fmt: skip
    return RolloutStarted(plan_id=event.plan_id, placements=placements)


@router.post("/admin/placement-plans/rollback", status_code=202)
async def rollback_plan(request: Request, who: Admin) -> RollbackStarted:
    """Go back to the placement held before the last completed rollout."""
    await rollouts(gateway(request)).rollback(who.actor)
    return RollbackStarted()
