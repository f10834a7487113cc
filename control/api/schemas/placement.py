"""DTOs of placement plans, placements and workflows."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from control.api.errors import Problem
from control.api.schemas.common import Body, Dto, Id, Positive, name_field
from db import vocab

PlanStatus = Literal[vocab.PLAN_STATUSES]  # type: ignore[valid-type]
#: Statuses a caller may set directly: activation and retirement have their own routes, a
#: plan becomes ``proposed`` by ``/propose`` and ``simulated`` only by a twin replay.
EditablePlanStatus = Literal["draft"]
PoolKind = Literal[vocab.POOL_KINDS]  # type: ignore[valid-type]
WorkflowStatus = Literal[vocab.WORKFLOW_STATUSES]  # type: ignore[valid-type]


class PlanOut(Dto):
    id: int
    status: str
    parent_id: int | None
    author: str
    note: str
    created_at: datetime
    origin: dict[str, Any] | None = Field(
        None, description="how a proposed plan was made: policy, demand, unplaced models"
    )
    simulation: dict[str, Any] | None = Field(
        None,
        description="the twin's replay of recent traffic: state, current and plan "
        "figures (p50_s, p99_s, throughput_rps, slo_attainment, per tenant), verdict",
    )
    observation: dict[str, Any] | None = Field(
        None, description="p50/p99 observed live after the rollout beside the prediction"
    )
    flagged: bool = Field(False, description="observed p99 beyond prediction + error + margin")
    auto_rollback: bool | None = Field(
        None, description="roll back when flagged (null: the LEGATO_PLAN_AUTO_ROLLBACK setting)"
    )


class PlanCreate(Body):
    """A new draft plan; its author is the caller's credential."""

    parent_id: Id | None = None
    note: str = Field("", max_length=10_000)
    status: EditablePlanStatus = "draft"
    auto_rollback: bool | None = None


class PlanUpdate(Body):
    note: str | None = Field(None, max_length=10_000)
    status: EditablePlanStatus | None = None
    auto_rollback: bool | None = None


class PlanPropose(Body):
    """What to plan for: the demand observed over the last ``window_s`` seconds (default: the
    LEGATO_PLAN_DEMAND_WINDOW_S setting), or ``demand`` as given."""

    policy: str = Field("planner", max_length=100, description="a registered placement policy")
    window_s: float | None = Field(None, gt=0, le=86_400 * 30)
    demand: dict[str, Any] | None = Field(
        None,
        description='{"models": {key: {"arrival_rate": r, "service_s": s}}, '
        '"traffic": [{"a": key, "b": key, "rate": r}]}',
    )
    note: str = Field("", max_length=10_000)
    auto_rollback: bool | None = None


class PlanSimulate(Body):
    window_s: float | None = Field(None, gt=0, le=86_400 * 30,
                                   description="seconds of recent traffic replayed")  # fmt: skip


class PlanSimulationStarted(BaseModel):
    plan_id: int
    simulation: dict[str, Any]


class RolloutRequest(Body):
    force: bool = Field(False, description="roll out a plan that was not simulated (audited)")


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
    variant: str = ""


VARIANT = "the precision variant placed (a model variant's precision); empty: the base model"


class PlacementCreate(Body):
    plan_id: Id
    model_id: Id
    device_ids: list[Id] = Field(min_length=1, description="one group per replica set")
    replicas: Positive = 1
    pool: PoolKind = "hot"
    reason: str = Field("", max_length=10_000)
    variant: str = Field("", max_length=16, description=VARIANT)


class PlacementUpdate(Body):
    device_ids: list[Id] | None = Field(None, min_length=1)
    replicas: Positive | None = None
    pool: PoolKind | None = None
    reason: str | None = Field(None, max_length=10_000)
    variant: str | None = Field(None, max_length=16, description=VARIANT)


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
