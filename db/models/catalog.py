"""Model catalog aggregate: served models and their measured latency profiles."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, String, UniqueConstraint, false, text
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column
from db.vocab import MODEL_STATUSES, MODEL_TASKS, WEIGHT_SOURCES, in_clause


class ServedModel(Base):
    """One version of a model the fleet can serve, with what placement needs to know."""

    __tablename__ = "models"
    __table_args__ = (
        UniqueConstraint("name", "version"),
        CheckConstraint(in_clause("task", MODEL_TASKS), name="task"),
        CheckConstraint(in_clause("weights_source", WEIGHT_SOURCES), name="weights_source"),
        CheckConstraint(in_clause("status", MODEL_STATUSES), name="status"),
        CheckConstraint("memory_mib > 0", name="memory_positive"),
        CheckConstraint("max_batch_size >= 1", name="max_batch_size_positive"),
        CheckConstraint("max_batch_tokens >= 1", name="max_batch_tokens_positive"),
        CheckConstraint("tp_degree >= 1", name="tp_degree_positive"),
        CheckConstraint("cost_weight_milli >= 0", name="cost_weight_nonnegative"),
        CheckConstraint("min_replicas >= 0", name="min_replicas_nonnegative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(64))
    task: Mapped[str] = mapped_column(String(16))
    weights_source: Mapped[str] = mapped_column(String(16))
    weights_location: Mapped[str] = mapped_column(String(500))
    memory_mib: Mapped[int]
    precisions: Mapped[list[Any]] = mapped_column(JSON, default=list)
    load_time_ms: Mapped[int | None]
    max_batch_size: Mapped[int] = mapped_column(default=1)
    max_batch_tokens: Mapped[int] = mapped_column(default=2048)
    tp_degree: Mapped[int] = mapped_column(default=1)
    cost_weight_milli: Mapped[int] = mapped_column(default=1000)
    #: Iteration-level batching: new requests join the running decode loop (generate models
    #: only, checked by the model service). An operator's choice per model, because it pays
    #: off on GPU engines but loses throughput on a CPU, where each join's prefill costs a
    #: full weight read. Server default false: rows from before the column stay static.
    continuous_batching: Mapped[bool] = mapped_column(default=False, server_default=false())
    #: Chunked prefill with continuous batching (0: off): each loop iteration carries the
    #: running sequences' decode tokens and at most this many tokens in all, the rest of the
    #: budget going to waiting prompts, so a long prompt no longer stalls the running answers.
    prefill_chunk_tokens: Mapped[int] = mapped_column(default=0, server_default=text("0"))
    #: Autoscaling (``control.core.autoscaler``), on while ``max_replicas`` is set: between
    #: min and max replicas, one more when the predicted queue delay exceeds
    #: ``scale_out_delay_ms``, one fewer (drained) after ``idle_ms`` without work. The model
    #: service checks them together (min <= max, positive times).
    min_replicas: Mapped[int] = mapped_column(default=0, server_default=text("0"))
    max_replicas: Mapped[int | None]
    scale_out_delay_ms: Mapped[int | None]
    idle_ms: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(16), default="active")
    created_at: Mapped[datetime] = created_at_column()


class ModelLatencyProfile(Base):
    """Measured latency of one model on one device type at one (batch size, tokens) point."""

    __tablename__ = "model_latency_profiles"
    __table_args__ = (
        # Named by hand: the derived name passes PostgreSQL's 63-character limit.
        UniqueConstraint(
            "model_id",
            "variant",
            "device_type",
            "batch_size",
            "num_tokens",
            name="uq_model_latency_profiles_point",
        ),
        CheckConstraint("batch_size >= 1", name="batch_size_positive"),
        CheckConstraint("num_tokens >= 0", name="num_tokens_nonnegative"),
        CheckConstraint("latency_us >= 0", name="latency_nonnegative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    #: the precision variant measured ("": the base model)
    variant: Mapped[str] = mapped_column(String(16), default="", server_default="")
    device_type: Mapped[str] = mapped_column(String(64))
    batch_size: Mapped[int]
    num_tokens: Mapped[int]
    latency_us: Mapped[int]
    decode_us_per_token: Mapped[int | None]
    measured_at: Mapped[datetime] = created_at_column()
