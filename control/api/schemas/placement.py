"""DTOs of placement plans, placements and workflows."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from control.api.errors import Problem
from control.api.schemas.common import Body, Dto, Id, Positive, name_field
from db import vocab

PlanStatus = Literal[vocab.PLAN_STATUSES]  # type: ignore[valid-type]
#: Statuses a caller may set directly; activation and retirement have their own routes.
EditablePlanStatus = Literal["draft", "simulated"]
PoolKind = Literal[vocab.POOL_KINDS]  # type: ignore[valid-type]
WorkflowStatus = Literal[vocab.WORKFLOW_STATUSES]  # type: ignore[valid-type]


class PlanOut(Dto):
    id: int
    status: str
    parent_id: int | None
    author: str
    note: str
    created_at: datetime


class PlanCreate(Body):
    """A new draft plan; its author is the caller's credential."""

    parent_id: Id | None = None
    note: str = Field("", max_length=10_000)
    status: EditablePlanStatus = "draft"


class PlanUpdate(Body):
    note: str | None = Field(None, max_length=10_000)
    status: EditablePlanStatus | None = None


class PlanFilter(BaseModel):
    status: PlanStatus | None = None
    parent_id: Id | None = None


class PlacementOut(Dto):
    id: int
    plan_id: int
    model_id: int
    device_ids: list[int]
    replicas: int
    pool: str
    reason: str


class PlacementCreate(Body):
    plan_id: Id
    model_id: Id
    device_ids: list[Id] = Field(min_length=1, description="one group per replica set")
    replicas: Positive = 1
    pool: PoolKind = "hot"
    reason: str = Field("", max_length=10_000)


class PlacementUpdate(Body):
    device_ids: list[Id] | None = Field(None, min_length=1)
    replicas: Positive | None = None
    pool: PoolKind | None = None
    reason: str | None = Field(None, max_length=10_000)


class PlacementFilter(BaseModel):
    plan_id: Id | None = None
    model_id: Id | None = None


class WorkflowOut(Dto):
    id: int
    name: str
    version: str
    spec: dict[str, Any]
    status: str
    created_at: datetime


class WorkflowCreate(Body):
    name: str = name_field(200)
    version: str = name_field(64)
    spec: dict[str, Any] = Field(description="the DAG: inputs, outputs, nodes, edges")
    status: WorkflowStatus = "draft"


class WorkflowUpdate(Body):
    spec: dict[str, Any] | None = None
    status: WorkflowStatus | None = None


class WorkflowFilter(BaseModel):
    name: str | None = None
    version: str | None = None
    status: WorkflowStatus | None = None


class SpecCheck(Body):
    spec: dict[str, Any]


class SpecReport(BaseModel):
    """Validation of a spec: ``valid`` and every problem with its location (per node)."""

    valid: bool
    problems: list[Problem]
