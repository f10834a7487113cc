"""Admin routes of the planner in the product: propose a plan, simulate it in the twin.

``POST /admin/placement-plans/propose`` plans the live fleet with a registered placement
policy for the demand observed over a window (or a given one) and stores a ``proposed`` plan
(201, the plan; 422 naming a bad policy or demand field; 409 when the policy refuses the fleet).
``POST /admin/placement-plans/{id}/simulate`` starts the twin's replay of recent traffic
against the placement in force and the plan (202; the report lands in the plan's
``simulation``, read by ``GET /admin/placement-plans/{id}``; 503 without the simulator).
A rollout (``routes/rollout.py``) of a plan that was not simulated is refused unless forced.
Each mutation is audited.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from control.api.auth import require_admin
from control.api.crud import IntId
from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas.placement import PlanOut, PlanPropose, PlanSimulate, PlanSimulationStarted
from control.api.state import Gateway
from control.services.inference_calls import ServiceUnavailable
from control.services.plan_observer import PlanWatchConfig
from control.services.plan_proposal import PlanProposalService

router = APIRouter(
    dependencies=[Depends(require_admin)],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 413, 422, 503)},
    tags=["placement_plan"],
)

#: Demand and replay window when neither the request nor the gateway's settings give one.
DEFAULT_WINDOW_S = 600.0


def plan_window_s(gw: Gateway, asked: float | None) -> float:
    return asked if asked is not None else float(gw.extras.get("plan_window_s", DEFAULT_WINDOW_S))


def plan_watch(gw: Gateway) -> PlanWatchConfig:
    """The observer's settings (defaults when the gateway was built without them)."""
    return gw.extras.get("plan_watch") or PlanWatchConfig()


def _runnable(gw: Gateway) -> set[str] | None:
    """The model keys the running runtime can load (None without a runtime)."""
    runtime = None if gw.inference is None else getattr(gw.inference, "runtime", None)
    refs = getattr(runtime, "model_refs", None)
    return None if refs is None else set(refs)


@router.post("/admin/placement-plans/propose", status_code=201)
def propose_plan(gw: GatewayDep, body: PlanPropose, who: AdminDep) -> PlanOut:
    """Propose a plan: the named policy over the live fleet (up real devices, loadable models)
    for the demand observed over ``window_s`` (requests and the usage ledger) or ``demand``."""
    record = PlanProposalService(gw.services.factory).propose(
        who.actor, policy=body.policy, window_s=plan_window_s(gw, body.window_s),
        demand=body.demand, note=body.note, auto_rollback=body.auto_rollback,
        runnable=_runnable(gw),
    )  # fmt: skip
    return PlanOut.model_validate(record)


@router.post("/admin/placement-plans/{item_id}/simulate", status_code=202)
def simulate_plan(
    gw: GatewayDep, item_id: IntId, who: AdminDep, body: PlanSimulate | None = None
) -> PlanSimulationStarted:
    """Replay recent traffic (the last ``window_s``; the shipped trace when there was none)
    in the twin against the placement in force and this plan. Follow it with GET on the plan:
    ``simulation.state`` goes running -> done (or failed); done makes a proposed plan
    ``simulated``."""
    simulator: Any = gw.extras.get("plan_simulator")
    if simulator is None:
        raise ServiceUnavailable("no plan simulator is installed on this gateway")
    asked = None if body is None else body.window_s
    running = simulator.start(who.actor, item_id, plan_window_s(gw, asked))
    return PlanSimulationStarted(plan_id=item_id, simulation=dict(running))
