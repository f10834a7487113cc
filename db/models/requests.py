"""Request aggregate: workflow runs and the append-only usage ledger billed against them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column
from db.vocab import PRIORITY_CLASSES, REQUEST_STATUSES, in_clause


class Request(Base):
    """One workflow run asked for by a tenant.

    ``(tenant_id, idempotency_key)`` is unique; NULL keys are distinct on both backends, so
    requests without a key never collide.
    """

    __tablename__ = "requests"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key"),
        CheckConstraint(in_clause("status", REQUEST_STATUSES), name="status"),
        CheckConstraint(in_clause("priority_class", PRIORITY_CLASSES), name="priority_class"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="RESTRICT"))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    body_hash: Mapped[str] = mapped_column(String(64))
    workflow_name: Mapped[str] = mapped_column(String(200))
    workflow_version: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    priority_class: Mapped[str] = mapped_column(String(16), default="standard")
    received_at: Mapped[datetime] = created_at_column()
    started_at: Mapped[datetime | None]
    first_token_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    #: the quality class asked for (None: the tenant's default)
    quality: Mapped[str | None] = mapped_column(String(16))
    #: steps that ran on another variant than the preferred one: [{node, wanted, ran, reason}]
    degradations: Mapped[list[Any] | None] = mapped_column(JSON)


class UsageEntry(Base):
    """One billed step attempt. Append-only; unique per (request, DAG node, attempt) so that a
    retried or replayed step can never be billed twice."""

    __tablename__ = "usage_entries"
    __table_args__ = (
        UniqueConstraint("request_id", "node_id", "attempt"),
        CheckConstraint("input_tokens >= 0", name="input_tokens_nonnegative"),
        CheckConstraint("output_tokens >= 0", name="output_tokens_nonnegative"),
        CheckConstraint("device_ms >= 0", name="device_ms_nonnegative"),
        CheckConstraint("cost_units >= 0", name="cost_units_nonnegative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    request_id: Mapped[str] = mapped_column(ForeignKey("requests.id", ondelete="RESTRICT"))
    node_id: Mapped[str] = mapped_column(String(100))
    attempt: Mapped[str] = mapped_column(String(32))
    model_id: Mapped[int | None] = mapped_column(ForeignKey("models.id", ondelete="RESTRICT"))
    device_id: Mapped[int | None] = mapped_column(ForeignKey("devices.id", ondelete="RESTRICT"))
    input_tokens: Mapped[int] = mapped_column(default=0)
    output_tokens: Mapped[int] = mapped_column(default=0)
    device_ms: Mapped[int] = mapped_column(default=0)
    cost_units: Mapped[int] = mapped_column(default=0)
    #: the precision variant that really ran (None: the base model)
    variant: Mapped[str | None] = mapped_column(String(16))
    #: the LoRA adapter it ran with (None: none)
    adapter: Mapped[str | None] = mapped_column(String(100))
    recorded_at: Mapped[datetime] = created_at_column()


class RunInput(Base):
    """What an accepted run needs to be run again after a restart: its inputs, sampling and
    the names the runtime knows it by. One row per request, written in the accept's commit and
    deleted once the request has ended (a restart purges those of ended requests). Read only
    by the gateway's recovery, never served: ``tenant_id`` repeats the request's so that no
    read can join one tenant's inputs to another's request."""

    __tablename__ = "run_inputs"

    request_id: Mapped[str] = mapped_column(
        ForeignKey("requests.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="RESTRICT"))
    tenant_name: Mapped[str] = mapped_column(String(200))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    session_id: Mapped[str | None] = mapped_column(String(200))
    max_output_tokens: Mapped[int] = mapped_column(default=0)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    sampling: Mapped[dict[str, Any]] = mapped_column(JSON)
    recorded_at: Mapped[datetime] = created_at_column()


class RunStep(Base):
    """The output of one completed step of a resumable (async) run, written in the commit of
    the step's ledger entry and deleted once the request has ended (like ``run_inputs``). A
    restarted gateway hands these to the resumed run as done: they are neither run nor billed
    again. ``chunk`` is -1 for a step that is not a map chunk."""

    __tablename__ = "run_steps"

    request_id: Mapped[str] = mapped_column(
        ForeignKey("requests.id", ondelete="CASCADE"), primary_key=True
    )
    node_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    chunk: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    route_label: Mapped[str | None] = mapped_column(String(200))
    item_count: Mapped[int | None]
    output: Mapped[dict[str, Any]] = mapped_column(JSON)
    recorded_at: Mapped[datetime] = created_at_column()
