"""Analysis aggregate: stored traces, what-if runs and fidelity reports of the digital twin."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, Float, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column
from db.vocab import TRACE_FORMATS, WHATIF_STATUSES, in_clause


class Trace(Base):
    """A request trace on disk the twin can replay, with where it came from."""

    __tablename__ = "traces"
    __table_args__ = (
        CheckConstraint(in_clause("format", TRACE_FORMATS), name="format"),
        CheckConstraint("num_rows >= 0", name="num_rows_nonnegative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    format: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(String(500))
    num_rows: Mapped[int] = mapped_column(default=0)
    attribution: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = created_at_column()


class WhatIfRun(Base):
    """A twin run of a scenario; ``progress_milli`` goes 0..1000 while it runs."""

    __tablename__ = "whatif_runs"
    __table_args__ = (
        CheckConstraint(in_clause("status", WHATIF_STATUSES), name="status"),
        CheckConstraint("progress_milli >= 0 AND progress_milli <= 1000", name="progress_range"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    progress_milli: Mapped[int] = mapped_column(default=0)
    scenario: Mapped[dict[str, Any]] = mapped_column(JSON)
    results: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = created_at_column()
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)


class FidelityReport(Base):
    """One measurement of the twin's error against the live stack on a trace slice.

    Append-only: a row is written once per ``legato sim validate --store`` (or API run) and
    never changed. Errors are ratios and percentage points (floats: they are measurements, not
    quota or billing quantities).
    """

    __tablename__ = "fidelity_reports"
    __table_args__ = (
        CheckConstraint("p50_error >= 0", name="p50_error_nonnegative"),
        CheckConstraint("p99_error >= 0", name="p99_error_nonnegative"),
        Index("ix_fidelity_reports_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[datetime] = created_at_column()
    trace: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    p50_error: Mapped[float] = mapped_column(Float)
    p99_error: Mapped[float] = mapped_column(Float)
    slo_attainment_error_pp: Mapped[float] = mapped_column(Float)
    live: Mapped[dict[str, Any]] = mapped_column(JSON)
    twin: Mapped[dict[str, Any]] = mapped_column(JSON)
