"""The live snapshot for the console: the core's view, per tenant counters and explanations."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class TenantLive(BaseModel):
    """One tenant's live figures: runs in flight, steps queued, and why they wait."""

    tenant: str
    running: int
    queued_steps: int
    explanations: list[str]


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
