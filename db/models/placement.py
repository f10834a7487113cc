"""Placement aggregate: versioned plans and the placements (model -> device group) they hold."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, created_at_column
from db.vocab import PLAN_STATUSES, POOL_KINDS, in_clause


class PlacementPlan(Base):
    """A version of the fleet's placement; ``parent_id`` is the plan it was derived from.

    A plan the planner proposed keeps how (``origin``: policy, demand, window, what it could
    not place); ``simulation`` is the twin's replay of recent traffic against it (what makes it
    ``simulated``); ``observation`` the p50/p99 observed live after its rollout, beside the
    prediction; ``flagged`` says the observation missed the prediction by more than the twin's
    published error plus the margin; ``auto_rollback`` (None: the setting decides) whether that
    rolls the plan back by itself."""

    __tablename__ = "placement_plans"
    __table_args__ = (CheckConstraint(in_clause("status", PLAN_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="draft")
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("placement_plans.id", ondelete="SET NULL")
    )
    author: Mapped[str] = mapped_column(String(100))
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = created_at_column()
    origin: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    simulation: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    observation: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    flagged: Mapped[bool] = mapped_column(default=False, server_default=false())
    auto_rollback: Mapped[bool | None]


class Placement(Base):
    """Replicas of one model on one device group (several ids for a tensor-parallel group)."""

    __tablename__ = "placements"
    __table_args__ = (
        CheckConstraint(in_clause("pool", POOL_KINDS), name="pool"),
        CheckConstraint("replicas >= 1", name="replicas_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    plan_id: Mapped[int] = mapped_column(
        ForeignKey("placement_plans.id", ondelete="CASCADE"), index=True
    )
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="RESTRICT"))
    #: the precision variant placed (a ModelVariant's precision; "": the base model)
    variant: Mapped[str] = mapped_column(String(16), default="", server_default="")
    device_ids: Mapped[list[Any]] = mapped_column(JSON)
    replicas: Mapped[int] = mapped_column(default=1)
    pool: Mapped[str] = mapped_column(String(8), default="hot")
    reason: Mapped[str] = mapped_column(Text, default="")
