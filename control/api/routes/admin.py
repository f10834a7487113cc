"""Admin routes beyond plain CRUD: plan activation, keys, validated workflows, audit, usage."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response

from control.api.auth import require_admin
from control.api.crud import IntId
from control.api.deps import AdminDep, GatewayDep, PageDep
from control.api.errors import ERROR_RESPONSES, ApiError, Problem
from control.api.live_feed import feed_change
from control.api.pagination import page_of
from control.api.schemas import placement as p
from control.api.schemas import records as r
from control.api.schemas import tenancy as t
from control.api.schemas.common import Page
from control.api.state import Gateway

router = APIRouter(
    dependencies=[Depends(require_admin)],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 413, 422)},
)


@router.post("/admin/placement-plans/{item_id}/activate", tags=["placement_plan"])
def activate_plan(gw: GatewayDep, item_id: IntId, who: AdminDep) -> p.PlanOut:
    """Make the plan the one active plan; the previously active one is retired (one
    transaction, one audit record per plan changed)."""
    record = gw.services.plans.activate(who.actor, item_id)
    return p.PlanOut.model_validate(record)


@router.post("/admin/tenants/{item_id}/keys", status_code=201, tags=["api_key"])
def issue_key(
    gw: GatewayDep, item_id: IntId, body: t.ApiKeyCreate, who: AdminDep
) -> t.ApiKeyIssued:
    """Issue an API key for the tenant, optionally expiring at ``expires_at``. The plaintext
    ``key`` is in this response only."""
    issued = gw.services.api_keys.create_key(who.actor, item_id, body.label, body.expires_at)
    out = t.ApiKeyOut.model_validate(issued.record).model_dump()
    return t.ApiKeyIssued(**out, key=issued.plaintext)


@router.post("/admin/keys/{item_id}/revoke", tags=["api_key"])
def revoke_key(gw: GatewayDep, item_id: IntId, who: AdminDep) -> t.ApiKeyOut:
    """Revoke a key; it stops working at once on this gateway."""
    record = gw.services.api_keys.revoke_key(who.actor, item_id)
    gw.key_cache.clear()
    return t.ApiKeyOut.model_validate(record)


def spec_report(gw: Gateway, spec: dict[str, Any]) -> p.SpecReport:
    """Every problem of ``spec`` per location, from the core's validator."""
    found = gw.spec_validator(spec) if gw.spec_validator is not None else []
    problems = []
    for text in found:
        location, sep, message = text.partition(": ")
        problems.append(Problem(location=location, message=message) if sep else
                        Problem(location="spec", message=text))  # fmt: skip
    return p.SpecReport(valid=not problems, problems=problems)


def _require_valid(gw: Gateway, spec: dict[str, Any]) -> None:
    report = spec_report(gw, spec)
    if not report.valid:
        raise ApiError(
            422,
            "invalid_workflow",
            f"the workflow spec has {len(report.problems)} problem(s); see problems",
            field="spec",
            problems=report.problems,
        )


@router.post("/admin/workflows/validate", tags=["workflow"])
def validate_workflow(gw: GatewayDep, body: p.SpecCheck) -> p.SpecReport:
    """Check a spec against the current model catalogue without saving it."""
    return spec_report(gw, body.spec)


@router.post("/admin/workflows", status_code=201, tags=["workflow"])
def create_workflow(
    gw: GatewayDep, response: Response, body: p.WorkflowCreate, who: AdminDep
) -> p.WorkflowOut:
    """Store a workflow version; a spec with problems is a 422 listing each one by node. An
    active one is served at once (``X-Legato-Live-Config`` says how the live core took it)."""
    _require_valid(gw, body.spec)
    record = gw.services.workflows.create(who.actor, **body.model_dump(exclude_unset=True))
    feed_change(gw, "workflow", record, response)
    return p.WorkflowOut.model_validate(record)


@router.patch("/admin/workflows/{item_id}", tags=["workflow"])
def update_workflow(
    gw: GatewayDep, response: Response, item_id: IntId, body: p.WorkflowUpdate, who: AdminDep
) -> p.WorkflowOut:
    """Change a workflow's spec or status; a new spec is validated like on create. The live
    core serves the new version at once (or stops serving a retired or draft one)."""
    if body.spec is not None:
        _require_valid(gw, body.spec)
    changes = body.model_dump(exclude_unset=True)
    record = gw.services.workflows.update(who.actor, item_id, **changes)
    feed_change(gw, "workflow", record, response)
    return p.WorkflowOut.model_validate(record)


@router.get("/admin/audit", tags=["audit"])
def list_audit(
    gw: GatewayDep,
    where: Annotated[r.AuditFilter, Query()],
    page: PageDep,
    order: Literal["asc", "desc"] = "desc",
) -> Page[r.AuditOut]:
    """The audit log, newest first by default, filtered by entity, actor, action and time
    range (``since`` inclusive, ``until`` exclusive), paged in the database."""
    found = gw.services.audit.page(
        **where.model_dump(exclude_none=True), newest_first=order == "desc",
        offset=page.offset, limit=page.limit,
    )  # fmt: skip
    return page_of(found, page, r.AuditOut.model_validate)
