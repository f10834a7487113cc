"""Fleet aggregate: nodes and the devices they hold (real ones and ones declared for the twin)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column
from db.vocab import DEVICE_KINDS, DEVICE_STATUSES, NODE_STATUSES, in_clause


class Node(Base):
    """A machine that hosts devices; ``name`` is the operator-facing identity."""

    __tablename__ = "nodes"
    __table_args__ = (CheckConstraint(in_clause("status", NODE_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    address: Mapped[str | None] = mapped_column(String(200))
    labels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="up")
    created_at: Mapped[datetime] = created_at_column()


class Device(Base):
    """One accelerator or CPU slot on a node.

    ``is_real`` tells a device the executor can run on (local CPU or CUDA) from one declared
    only so that the twin can simulate a fleet we do not have (``accelerator`` = "H100-80GB").
    """

    __tablename__ = "devices"
    __table_args__ = (
        CheckConstraint(in_clause("kind", DEVICE_KINDS), name="kind"),
        CheckConstraint(in_clause("status", DEVICE_STATUSES), name="status"),
        CheckConstraint("memory_mib > 0", name="memory_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="RESTRICT"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    accelerator: Mapped[str | None] = mapped_column(String(64))
    memory_mib: Mapped[int]
    precisions: Mapped[list[Any]] = mapped_column(JSON, default=list)
    interconnect_group: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="up")
    labels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    is_real: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = created_at_column()
