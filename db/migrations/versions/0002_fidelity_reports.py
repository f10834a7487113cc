"""Fidelity reports: each measured error of the twin against the live stack.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fidelity_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("trace", sa.String(length=200), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("p50_error", sa.Float(), nullable=False),
        sa.Column("p99_error", sa.Float(), nullable=False),
        sa.Column("slo_attainment_error_pp", sa.Float(), nullable=False),
        sa.Column("live", sa.JSON(), nullable=False),
        sa.Column("twin", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "p50_error >= 0", name=op.f("ck_fidelity_reports_p50_error_nonnegative")
        ),
        sa.CheckConstraint(
            "p99_error >= 0", name=op.f("ck_fidelity_reports_p99_error_nonnegative")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fidelity_reports")),
    )
    op.create_index(
        op.f("ix_fidelity_reports_created_at"), "fidelity_reports", ["created_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_fidelity_reports_created_at"), table_name="fidelity_reports")
    op.drop_table("fidelity_reports")
