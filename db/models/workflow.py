"""Workflow aggregate: versioned DAG specifications."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column
from db.vocab import WORKFLOW_STATUSES, in_clause


class Workflow(Base):
    """One version of a workflow; ``spec`` is the DAG as JSON (validated by the service)."""

    __tablename__ = "workflows"
    __table_args__ = (
        UniqueConstraint("name", "version"),
        CheckConstraint(in_clause("status", WORKFLOW_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(64))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="draft")
    created_at: Mapped[datetime] = created_at_column()
