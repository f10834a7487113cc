"""DTOs of the request timeline (``GET /admin/requests/{id}/timeline``) and the slow-run picker
(``GET /admin/runs/slowest``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class StepSpan(BaseModel):
    """One step attempt that came back. Instants are ms after the run's submission; the
    parts (queue, batch wait, transfer, device) are ms and add up to its ready-to-end time."""

    node: str
    attempt: int
    chunk: int | None = None
    key: str
    model: str | None = None
    device: str | None = None
    replica: str | None = None
    batch_id: str
    batch_size: int
    batch_reason: str = ""
    ready_ms: float
    enqueued_ms: float
    dispatched_ms: float
    end_ms: float
    queue_wait_ms: float = Field(description="ready to dispatch: queue and batch wait together")
    queue_ms: float
    batch_wait_ms: float = Field(description="the batcher held the batch, its replica free")
    transfer_ms: float = Field(description="the worker's side beyond compute: inputs, hand-offs")
    device_ms: float = Field(description="its batch's measured compute time")
    ok: bool
    error: str | None = None


class WhereTimeWent(BaseModel):
    totals: dict[str, float] = Field(description="ms per part; outside_ms: outside every step")
    dominant: str
    summary: str


class RunTimeline(BaseModel):
    """A run's spans, the decisions taken for it (admission, routing with candidate scores,
    steals, retries, preemptions) and where its time went."""

    id: str
    tenant_id: int
    tenant: str | None = None
    workflow: str
    version: str
    status: str
    received_at: datetime
    finished_at: datetime | None = None
    latency_ms: float | None = Field(None, description="end to end as its row says")
    total_ms: float = Field(description="submission to end as the runtime measured it")
    recorded: bool = Field(description="False: no timeline was recorded (still running)")
    spans: list[StepSpan]
    decisions: list[dict[str, Any]]
    dropped: int = Field(0, description="spans and decisions left out past the bounds")
    where: WhereTimeWent


class SlowRun(BaseModel):
    id: str
    tenant_id: int
    workflow: str
    version: str
    status: str
    received_at: datetime
    latency_ms: float
    steps: int = Field(description="step spans recorded")
