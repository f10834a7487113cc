"""The live snapshot for the console: the core's view, per tenant counters and explanations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class TenantLive(BaseModel):
    """One tenant's live figures: runs in flight, steps waiting (bound to a replica's queue,
    pending for a replica of their model, or unplaced), and why they wait."""

    tenant: str
    running: int
    queued_steps: int = Field(
        description="steps waiting: in replica queues, pending (unbound) or unplaced"
    )
    explanations: list[str]


class RecentRun(BaseModel):
    """A run this gateway finished recently (newest first in the snapshot)."""

    id: str
    tenant_id: int
    workflow: str
    status: str
    received_at: datetime
    finished_at: datetime | None
    error: str | None = None
    usage: dict[str, int] | None = None


class LiveSnapshot(BaseModel):
    """Everything is plain JSON of the core's immutable snapshot (seconds on the runtime's
    monotonic clock); ``tenants`` summarises it per tenant."""

    now: float
    tenants: list[TenantLive]
    runs: list[dict[str, Any]]
    queues: dict[str, list[dict[str, Any]]]
    unplaced: list[dict[str, Any]]
    devices: list[dict[str, Any]]
    replicas: list[dict[str, Any]]
    batches: list[dict[str, Any]]
    counters: dict[str, int]
    preload: dict[str, Any]
    tenancy: Any
    rollout: dict[str, Any] | None = Field(
        None, description="the placement rollout in progress or last finished (core RolloutView)"
    )
    splits: dict[str, Any] = Field(default_factory=dict, description="canary traffic splits")
    cold_starts: int = 0
    cold_starts_avoided: int = 0
    pending: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict, description="steps waiting for a replica of their model"
    )
    recently_finished: list[dict[str, Any]] = Field(
        default_factory=list, description="runs the core finished recently"
    )
    recent_runs: list[RecentRun] = Field(
        default_factory=list, description="runs this gateway recorded as finished, newest first"
    )
