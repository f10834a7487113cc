"""Model variants aggregate: precision variants of a served model and tenants' LoRA adapters.

A variant (``bf16``, ``int8``...) is a replica kind of its own: the core keys it
``name:version@precision`` and places, routes and bills it apart from the base model. Its
``memory_mib`` and ``quality`` are measured by ``legato profile`` (NULL/empty until then).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column
from db.vocab import PRECISIONS, in_clause

VARIANT_STATUSES = ("active", "retired")


class ModelVariant(Base):
    """One precision variant of a served model, with its measured memory, price and quality."""

    __tablename__ = "model_variants"
    __table_args__ = (
        UniqueConstraint("model_id", "precision"),
        CheckConstraint(in_clause("precision", PRECISIONS), name="precision"),
        CheckConstraint(in_clause("status", VARIANT_STATUSES), name="status"),
        CheckConstraint("memory_mib IS NULL OR memory_mib > 0", name="memory_positive"),
        CheckConstraint(
            "cost_weight_milli IS NULL OR cost_weight_milli >= 0", name="cost_weight_nonnegative"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    precision: Mapped[str] = mapped_column(String(16))
    memory_mib: Mapped[int | None]
    load_time_ms: Mapped[int | None]
    #: price per unit of work; NULL: the base model's weight scaled by measured memory
    cost_weight_milli: Mapped[int | None]
    #: measured against the base on fixed inputs, e.g. {"metric": "cosine", "mean": 0.999,
    #: "min": 0.997, "inputs": 64}; empty until measured
    quality: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    quality_measured_at: Mapped[datetime | None]
    status: Mapped[str] = mapped_column(String(16), default="active", server_default="active")
    created_at: Mapped[datetime] = created_at_column()


class LoraAdapter(Base):
    """A tenant's LoRA adapter (PEFT format, a local folder) on a base generate model."""

    __tablename__ = "lora_adapters"
    __table_args__ = (
        UniqueConstraint("tenant_id", "model_id", "name"),
        CheckConstraint(in_clause("status", VARIANT_STATUSES), name="status"),
        CheckConstraint("rank IS NULL OR rank > 0", name="rank_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    path: Mapped[str] = mapped_column(String(500))
    rank: Mapped[int | None]
    memory_mib: Mapped[int | None]
    load_time_ms: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(16), default="active", server_default="active")
    created_at: Mapped[datetime] = created_at_column()
