"""DTOs of model precision variants (``/admin/models/{id}/variants``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from control.api.schemas.common import Body, Dto, NonNegative
from control.api.schemas.fleet import Precision


class VariantOut(Dto):
    id: int
    model_id: int
    precision: str
    memory_mib: int | None = Field(description="measured by `legato profile` (null until then)")
    load_time_ms: int | None
    cost_weight_milli: int | None
    quality: dict[str, Any] = Field(
        description="measured against the fp32 base on fixed inputs: metric, score, mean, min, "
        "inputs (empty until measured)"
    )
    quality_measured_at: datetime | None
    status: str
    created_at: datetime


class VariantCreate(Body):
    precision: Precision = Field(description="the variant's precision (not the base's fp32)")
    cost_weight_milli: NonNegative | None = Field(
        None, description="price per unit of work; null: the base's weight scaled by memory"
    )


class VariantList(Dto):
    exact_floor: float = Field(
        description="quality score below which a variant serves no exact traffic "
        "(setting LEGATO_EXACT_QUALITY_FLOOR)"
    )
    items: list[VariantOut]
