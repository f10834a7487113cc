"""Plain, immutable records the repositories hand out instead of ORM rows.

One record per table, one field per column, same names. JSON columns arrive as deep copies, so
changing a record's dict never reaches the database or another record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class NodeRecord:
    id: int
    name: str
    address: str | None
    labels: dict[str, Any]
    status: str
    created_at: datetime


@dataclass(frozen=True)
class DeviceRecord:
    id: int
    name: str
    node_id: int
    kind: str
    accelerator: str | None
    memory_mib: int
    precisions: list[str]
    interconnect_group: str | None
    status: str
    labels: dict[str, Any]
    is_real: bool
    created_at: datetime


@dataclass(frozen=True)
class ModelRecord:
    id: int
    name: str
    version: str
    task: str
    weights_source: str
    weights_location: str
    memory_mib: int
    precisions: list[str]
    load_time_ms: int | None
    max_batch_size: int
    max_batch_tokens: int
    tp_degree: int
    cost_weight_milli: int
    continuous_batching: bool
    prefill_chunk_tokens: int
    status: str
    created_at: datetime
    min_replicas: int = 0
    max_replicas: int | None = None
    scale_out_delay_ms: int | None = None
    idle_ms: int | None = None


@dataclass(frozen=True)
class LatencyProfileRecord:
    id: int
    model_id: int
    device_type: str
    batch_size: int
    num_tokens: int
    latency_us: int
    decode_us_per_token: int | None
    measured_at: datetime
    variant: str = ""  # the precision variant measured ("": the base model)


@dataclass(frozen=True)
class PlacementPlanRecord:
    id: int
    status: str
    parent_id: int | None
    author: str
    note: str
    created_at: datetime
    origin: dict[str, Any] | None = None
    simulation: dict[str, Any] | None = None
    observation: dict[str, Any] | None = None
    flagged: bool = False
    auto_rollback: bool | None = None


@dataclass(frozen=True)
class PlacementRecord:
    id: int
    plan_id: int
    model_id: int
    device_ids: list[int]
    replicas: int
    pool: str
    reason: str
    #: the precision variant placed ("": the base model)
    variant: str = ""


@dataclass(frozen=True)
class WorkflowRecord:
    id: int
    name: str
    version: str
    spec: dict[str, Any]
    status: str
    created_at: datetime


@dataclass(frozen=True)
class CohortRecord:
    id: int
    name: str
    description: str
    created_at: datetime


@dataclass(frozen=True)
class TenantRecord:
    id: int
    name: str
    weight: int
    priority_class: str
    status: str
    cohort_id: int | None
    created_at: datetime
    strict_priority: bool = False
    quality: str | None = None
    allow_degrade: bool = False


@dataclass(frozen=True)
class ApiKeyRecord:
    id: int
    tenant_id: int
    prefix: str
    key_digest: str
    label: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
    expires_at: datetime | None = None


@dataclass(frozen=True)
class QuotaRecord:
    id: int
    tenant_id: int
    resource: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    period_s: int


@dataclass(frozen=True)
class HeadroomRecord:
    id: int
    name: str
    selector: dict[str, Any]
    reserved_milli: int
    allowed_classes: list[str]
    borrowable: bool
    created_at: datetime


@dataclass(frozen=True)
class RequestRecord:
    id: str
    tenant_id: int
    idempotency_key: str | None
    body_hash: str
    workflow_name: str
    workflow_version: str
    status: str
    priority_class: str
    received_at: datetime
    started_at: datetime | None
    first_token_at: datetime | None
    finished_at: datetime | None
    error: str | None
    result: dict[str, Any] | None
    #: the quality class asked for (None: the tenant's default) and the steps that ran on
    #: another precision variant than the preferred one: [{node, wanted, ran, kind, reason}]
    quality: str | None = None
    degradations: list[Any] | None = None


@dataclass(frozen=True)
class UsageRecord:
    id: int
    request_id: str
    node_id: str
    attempt: str
    model_id: int | None
    device_id: int | None
    input_tokens: int
    output_tokens: int
    device_ms: int
    cost_units: int
    recorded_at: datetime
    #: the precision variant that ran (None: the base model)
    variant: str | None = None
    #: the LoRA adapter that ran (None: none)
    adapter: str | None = None


@dataclass(frozen=True)
class TraceRecord:
    id: int
    name: str
    format: str
    path: str
    num_rows: int
    attribution: str
    created_at: datetime


@dataclass(frozen=True)
class WhatIfRunRecord:
    id: int
    status: str
    progress_milli: int
    scenario: dict[str, Any]
    results: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    error: str | None


@dataclass(frozen=True)
class AuditRecordView:
    id: int
    at: datetime
    actor: str
    action: str
    entity_type: str
    entity_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class UsageLine:
    """A ledger entry with the tenant its request belongs to."""

    entry: UsageRecord
    tenant_id: int
    tenant_name: str
