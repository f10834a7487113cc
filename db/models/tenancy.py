"""Tenancy aggregate: cohorts, tenants, API keys, quotas and headroom reservations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column
from db.vocab import (
    MAX_RESERVED_MILLI,
    PRIORITY_CLASSES,
    QUALITY_CLASSES,
    QUOTA_RESOURCES,
    TENANT_STATUSES,
    in_clause,
)


class Cohort(Base):
    """A group of tenants that lend each other idle quota."""

    __tablename__ = "cohorts"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = created_at_column()


class Tenant(Base):
    """A customer of the fleet, with its fair-share weight and default priority class."""

    __tablename__ = "tenants"
    __table_args__ = (
        CheckConstraint("weight > 0", name="weight_positive"),
        CheckConstraint(in_clause("priority_class", PRIORITY_CLASSES), name="priority_class"),
        CheckConstraint(in_clause("status", TENANT_STATUSES), name="status"),
        CheckConstraint(
            "quality IS NULL OR " + in_clause("quality", QUALITY_CLASSES), name="quality"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    weight: Mapped[int] = mapped_column(default=1)
    priority_class: Mapped[str] = mapped_column(String(16), default="standard")
    status: Mapped[str] = mapped_column(String(16), default="active")
    cohort_id: Mapped[int | None] = mapped_column(
        ForeignKey("cohorts.id", ondelete="RESTRICT"), index=True
    )
    # Its work overtakes other tenants' lower classes, bounded (control/core/tenancy/strict.py)
    strict_priority: Mapped[bool] = mapped_column(default=False, server_default=false())
    #: default quality class of its requests (None: from its priority class)
    quality: Mapped[str | None] = mapped_column(String(16))
    #: may the core run its steps on a cheaper variant when the preferred one is saturated
    allow_degrade: Mapped[bool] = mapped_column(default=False, server_default=false())
    created_at: Mapped[datetime] = created_at_column()


class ApiKey(Base):
    """A tenant's API key: only the public prefix and a keyed digest are stored, never the key."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(
        ForeignKey("tenants.id", ondelete="RESTRICT"), index=True
    )
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    key_digest: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = created_at_column()
    revoked_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]
    # None: never expires; else refused from this moment on (control/api/auth.py)
    expires_at: Mapped[datetime | None]


class Quota(Base):
    """Nominal quota of a tenant on one resource, with Kueue-style borrowing/lending limits.

    A NULL limit means "no limit" (borrow or lend without bound inside the cohort).
    """

    __tablename__ = "quotas"
    __table_args__ = (
        UniqueConstraint("tenant_id", "resource"),
        CheckConstraint(in_clause("resource", QUOTA_RESOURCES), name="resource"),
        CheckConstraint("nominal >= 0", name="nominal_nonnegative"),
        CheckConstraint("borrowing_limit >= 0", name="borrowing_limit_nonnegative"),
        CheckConstraint("lending_limit >= 0", name="lending_limit_nonnegative"),
        CheckConstraint("period_s > 0", name="period_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    resource: Mapped[str] = mapped_column(String(32))
    nominal: Mapped[int]
    borrowing_limit: Mapped[int | None]
    lending_limit: Mapped[int | None]
    period_s: Mapped[int] = mapped_column(default=60)


class HeadroomReservation(Base):
    """Capacity of a device pool held back for some priority classes.

    ``selector`` picks the pool ({"labels": {...}, "accelerator": "H100-80GB",
    "device_ids": [...]}); ``reserved_milli`` is the held-back share in thousandths.
    """

    __tablename__ = "headroom_reservations"
    __table_args__ = (
        CheckConstraint(
            f"reserved_milli >= 0 AND reserved_milli <= {MAX_RESERVED_MILLI}",
            name="reserved_milli_range",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    selector: Mapped[dict[str, Any]] = mapped_column(JSON)
    reserved_milli: Mapped[int]
    allowed_classes: Mapped[list[Any]] = mapped_column(JSON)
    borrowable: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = created_at_column()
