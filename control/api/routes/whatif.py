"""What-if runs of the twin: create (optionally submitting at once), submit, read progress and
results (list/get/delete come from the generic CRUD router).

The engine (:class:`control.api.twin.TwinEngine` over the twin's ``control.services.whatif``)
is optional: it offers ``submit(actor, run_id)``, which starts the run in the background and
moves its ``status``/``progress_milli``/``results`` through ``WhatIfService``, and may offer
``prepare(scenario)``: a missing (or ``"active"``) ``baseline`` becomes the fleet in force under
``workload`` (``trace_name`` a stored trace), and variants may name operator changes
(``headroom_set``: reservations as they would be saved; ``headroom_reserved_milli``,
``quota_scale_milli``, ``quota_set``: quotas created, edited or deleted; ``tenant_set``: tenants
changed; ``plan_id``, ``workflow``), which become the twin's sections. A change
that could not be saved is a 422 naming its field, and nothing is stored.
Without an engine, submitting is a 503 that says so and the run stays ``pending``.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from control.api.auth import Principal, require_admin
from control.api.crud import IntId
from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES, ApiError
from control.api.ports import ScenarioPreparer
from control.api.schemas.records import WhatIfCreate, WhatIfOut
from control.api.state import Gateway

router = APIRouter(
    tags=["whatif_run"],
    dependencies=[Depends(require_admin)],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 413, 422, 503)},
)


def _submit(gw: Gateway, who: Principal, run_id: int) -> WhatIfOut:
    run = gw.services.whatif.get(run_id)
    if run.status != "pending":
        raise ApiError(409, "conflict", f"what-if run {run_id} is {run.status}, not pending")
    if gw.whatif_engine is None:
        raise ApiError(503, "unavailable", "no what-if engine is installed on this gateway")
    gw.whatif_engine.submit(who.actor, run_id)
    return WhatIfOut.model_validate(gw.services.whatif.get(run_id))


@router.post("/admin/whatif", status_code=201)
def create_whatif(gw: GatewayDep, body: WhatIfCreate, who: AdminDep) -> WhatIfOut:
    """Store a pending what-if run for ``scenario``; ``submit: true`` starts it too."""
    if body.submit and gw.whatif_engine is None:  # refuse before writing anything
        raise ApiError(503, "unavailable", "no what-if engine is installed on this gateway")
    scenario = body.scenario
    if isinstance(gw.whatif_engine, ScenarioPreparer):
        scenario = gw.whatif_engine.prepare(scenario)
    record = gw.services.whatif.create(who.actor, scenario=scenario)
    if body.submit:
        return _submit(gw, who, record.id)
    return WhatIfOut.model_validate(record)


@router.post("/admin/whatif/{item_id}/submit")
def submit_whatif(gw: GatewayDep, item_id: IntId, who: AdminDep) -> WhatIfOut:
    """Start a pending run on the twin; follow it with GET /admin/whatif/{id}."""
    return _submit(gw, who, item_id)
