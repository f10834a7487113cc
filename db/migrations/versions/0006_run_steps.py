"""Durable runs: the outputs of completed steps of resumable runs, so a restarted gateway
resumes them without running those steps again.

A new table; runs open at the upgrade have no rows (they resume from their first step).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_steps",
        sa.Column("request_id", sa.String(length=36), nullable=False),
        sa.Column("node_id", sa.String(length=100), nullable=False),
        sa.Column("chunk", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("route_label", sa.String(length=200), nullable=True),
        sa.Column("item_count", sa.Integer(), nullable=True),
        sa.Column("output", sa.JSON(), nullable=False),
        sa.Column(
            "recorded_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["requests.id"],
            name=op.f("fk_run_steps_request_id_requests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("request_id", "node_id", "chunk", name=op.f("pk_run_steps")),
    )


def downgrade() -> None:
    op.drop_table("run_steps")
