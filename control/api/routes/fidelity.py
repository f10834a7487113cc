"""Fidelity of the twin: the stored measurements of its error against the live stack.

``GET /admin/fidelity/latest`` is what the console shows next to every twin prediction;
``GET /admin/fidelity`` lists every report, newest first. Reports are written by
``legato sim validate --store`` and by every validation started with
``POST /admin/fidelity/runs`` (in a worker process, one at a time; see
``control.services.fidelity.runner``). Starting one needs a runner installed as
``gateway.extras["fidelity_runner"]`` (a ``FidelityRunner`` over the gateway's database, put
there by the command that serves the API); without one the route answers 503 and says so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import Field

from control.api.auth import require_admin
from control.api.deps import GatewayDep, PageDep
from control.api.errors import ERROR_RESPONSES, ApiError
from control.api.pagination import page_of
from control.api.schemas.common import Body, Dto, Page
from control.services.fidelity.runner import FidelityRequest, ValidationRunning
from control.services.fidelity_reports import NoFidelityReport

router = APIRouter(
    tags=["fidelity"],
    dependencies=[Depends(require_admin)],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 422, 503)},
)


class FidelityReportOut(Dto):
    """One validation of the twin against the live stack on a trace slice."""

    id: int
    created_at: datetime
    trace: str = Field(description="name of the replayed trace slice")
    p50_error: float = Field(description="|twin p50 - live p50| / live p50")
    p99_error: float = Field(description="|twin p99 - live p99| / live p99")
    slo_attainment_error_pp: float = Field(
        description="twin minus live SLO attainment, in percentage points"
    )
    live: dict[str, Any] = Field(description="summary of the live run")
    twin: dict[str, Any] = Field(description="summary of the twin's run")
    config: dict[str, Any] = Field(description="settings of the validation")
    workflow: str = Field(
        "embed", description="validated workflow: embed (one model), rag or agent (whole DAG)"
    )
    load: float | None = Field(
        None, description="offered load, fraction of measured capacity (the highest validated)"
    )

    @classmethod
    def of(cls, record: Any) -> FidelityReportOut:
        """The stored report, with the workflow and load its config names (older reports,
        embed-only, kept theirs as ``target_utilization``)."""
        out = cls.model_validate(record)
        cfg = out.config
        load = cfg.get("load", cfg.get("target_utilization"))
        return out.model_copy(update={"workflow": cfg.get("workflow", "embed"),
                                      "load": float(load) if load is not None else None})  # fmt: skip


@router.get("/admin/fidelity/latest")
def latest_fidelity(gw: GatewayDep) -> FidelityReportOut:
    """The newest fidelity report; 404 (saying how to make one) when none is stored."""
    try:
        found = gw.services.fidelity_reports.latest()
    except NoFidelityReport as exc:
        raise ApiError(404, "not_found", str(exc)) from exc
    return FidelityReportOut.of(found)


@router.get("/admin/fidelity")
def list_fidelity(gw: GatewayDep, page: PageDep) -> Page[FidelityReportOut]:
    """Fidelity reports, newest first (``limit``/``offset``)."""
    svc = gw.services.fidelity_reports
    found = svc.newest_first(offset=page.offset, limit=page.limit)
    return page_of(found, page, FidelityReportOut.of)


class FidelityRunIn(Body):
    """Settings of an API-started validation (see ``legato sim validate``)."""

    requests: int = Field(120, ge=2, le=1000, description="requests of the trace slice")
    rate_factor: float | None = Field(
        None, gt=0, le=1000, description="trace time scaling; null: chosen for `load`"
    )
    load: float = Field(0.5, ge=0.05, le=0.95, description="offered load of the worker")
    slo_s: float = Field(0.1, gt=0, le=60, description="end-to-end SLO in seconds")
    repeats: int = Field(1, ge=1, le=5, description="independent runs; figures are medians")


class FidelityRunOut(Dto):
    running: bool
    detail: str


@router.post("/admin/fidelity/runs", status_code=202)
def start_fidelity(gw: GatewayDep, body: FidelityRunIn) -> FidelityRunOut:
    """Start a validation of the twin against the live stack (about a minute per repeat, in a
    worker process); its result is stored as a fidelity report. 409 while one runs, 503 when
    this gateway has no runner."""
    runner = gw.extras.get("fidelity_runner")
    if runner is None:
        raise ApiError(503, "unavailable", "no fidelity runner is installed on this gateway")
    try:
        runner.start(FidelityRequest(**body.model_dump()))
    except ValidationRunning as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    return FidelityRunOut(
        running=True,
        detail="validation started; GET /admin/fidelity/latest shows its report when done",
    )
