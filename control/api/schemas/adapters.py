"""DTOs of tenants' LoRA adapters (``/admin/adapters``, ``/v1/adapters``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from control.api.schemas.common import Body, Dto, Id, NonNegative, name_field
from db.models.variants import VARIANT_STATUSES

AdapterStatus = Literal[VARIANT_STATUSES]  # type: ignore[valid-type]


class AdapterOut(Dto):
    id: int
    tenant_id: int
    model_id: int
    name: str
    path: str
    rank: int | None
    memory_mib: int | None
    load_time_ms: int | None
    status: str
    created_at: datetime


class AdapterCreate(Body):
    tenant_id: Id
    model_id: Id = Field(description="the base generate model the adapter was trained on")
    name: str = name_field(100, "what the tenant's runs name in their `adapter` field")
    path: str = name_field(500, "a local PEFT folder under the model source roots")
    load_time_ms: NonNegative | None = Field(
        None, description="measured load time (the core's routing cost of a replica lacking it)"
    )


class AdapterUpdate(Body):
    load_time_ms: NonNegative | None = None


class AdapterFilter(BaseModel):
    tenant_id: Id | None = None
    model_id: Id | None = None
    name: str | None = Field(None, max_length=100)
    status: AdapterStatus | None = None
