"""Tenants' LoRA adapters: the record and the repository (one table, ``lora_adapters``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from control.store.base import Repository
from db import models as m


@dataclass(frozen=True)
class LoraAdapterRecord:
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


class LoraAdapterRepository(Repository[m.LoraAdapter, LoraAdapterRecord]):
    row_type = m.LoraAdapter
    record_type = LoraAdapterRecord
