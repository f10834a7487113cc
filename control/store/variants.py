"""Repository and plain record of model precision variants (``model_variants`` rows).

Records are immutable copies (the quality JSON deep-copied); the repository works inside the
caller's transaction and never commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from control.store.base import Repository
from db.models.variants import ModelVariant


@dataclass(frozen=True)
class VariantRecord:
    id: int
    model_id: int
    precision: str
    memory_mib: int | None
    load_time_ms: int | None
    cost_weight_milli: int | None
    quality: dict[str, Any]
    quality_measured_at: datetime | None
    status: str
    created_at: datetime


class VariantRepository(Repository[ModelVariant, VariantRecord]):
    row_type = ModelVariant
    record_type = VariantRecord
