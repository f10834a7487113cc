"""Audit aggregate: one append-only record per mutation made through the services."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column


class AuditRecord(Base):
    """Who changed what, with the entity's state before and after (NULL on create/delete)."""

    __tablename__ = "audit_records"
    __table_args__ = (Index("ix_audit_records_entity", "entity_type", "entity_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = created_at_column()
    actor: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(32))
    entity_type: Mapped[str] = mapped_column(String(32))
    entity_id: Mapped[str] = mapped_column(String(64))
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)
