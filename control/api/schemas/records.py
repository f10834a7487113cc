"""DTOs of what the system records: runs (requests), the usage ledger, the audit log, what-if
runs and traces."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from control.api.schemas.common import Body, Dto, Id, UtcDateTime
from db import vocab

RequestStatus = Literal[vocab.REQUEST_STATUSES]  # type: ignore[valid-type]
WhatIfStatus = Literal[vocab.WHATIF_STATUSES]  # type: ignore[valid-type]


class RequestOut(Dto):
    id: str
    tenant_id: int
    idempotency_key: str | None
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


class RequestFilter(BaseModel):
    tenant_id: Id | None = None
    status: RequestStatus | None = None
    workflow_name: str | None = None


class UsageOut(Dto):
    id: int
    request_id: str
    tenant_id: int | None = Field(None, description="tenant of the request billed")
    tenant_name: str | None = None
    node_id: str
    attempt: str
    model_id: int | None
    device_id: int | None
    input_tokens: int
    output_tokens: int
    device_ms: int
    cost_units: int
    recorded_at: datetime
    variant: str | None = Field(None, description="the precision variant that ran (None: the base)")
    adapter: str | None = Field(None, description="the LoRA adapter that ran (None: none)")


class UsageTotals(BaseModel):
    input_tokens: int
    output_tokens: int
    device_ms: int
    cost_units: int
    entries: int


class UsageReport(BaseModel):
    """Ledger entries of one scope (a tenant, a request or all) and their integer sums."""

    tenant_id: int | None
    request_id: str | None
    totals: UsageTotals
    items: list[UsageOut]
    total: int
    limit: int
    offset: int


class AuditOut(Dto):
    id: int
    at: datetime
    actor: str
    action: str
    entity_type: str
    entity_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class AuditFilter(BaseModel):
    entity_type: str | None = Field(None, max_length=64)
    entity_id: str | None = Field(None, max_length=64)
    actor: str | None = Field(None, max_length=200)
    action: str | None = Field(None, max_length=32)
    since: UtcDateTime | None = Field(None, description="records at or after this time (UTC "
                                      "when no zone is given)")  # fmt: skip
    until: UtcDateTime | None = Field(None, description="records before this time (UTC when "
                                      "no zone is given)")  # fmt: skip


class WhatIfOut(Dto):
    id: int
    status: str
    progress_milli: int
    scenario: dict[str, Any]
    results: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    error: str | None


class WhatIfCreate(Body):
    scenario: dict[str, Any] = Field(
        description="{baseline, variants, seeds} in the twin's scenario format; without a "
        "baseline, {workload, variants, seeds} tries the variants on the live fleet"
    )
    submit: bool = Field(False, description="start the twin on it at once")


class WhatIfFilter(BaseModel):
    status: WhatIfStatus | None = None


class TraceOut(Dto):
    id: int
    name: str
    format: str
    path: str
    num_rows: int
    attribution: str
    created_at: datetime
