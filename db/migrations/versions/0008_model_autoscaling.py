"""Served models: per-model autoscaling settings.

``min_replicas`` (0 on existing rows), ``max_replicas`` (null: autoscaling off, the behaviour of
every model before the settings), ``scale_out_delay_ms`` and ``idle_ms`` (null: no scale-out on
backlog, no scale-in; milliseconds, as every stored duration).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(
            sa.Column("min_replicas", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
        batch.add_column(sa.Column("max_replicas", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("scale_out_delay_ms", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("idle_ms", sa.Integer(), nullable=True))
        batch.create_check_constraint(
            op.f("ck_models_min_replicas_nonnegative"), "min_replicas >= 0"
        )


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_constraint(op.f("ck_models_min_replicas_nonnegative"), type_="check")
        batch.drop_column("idle_ms")
        batch.drop_column("scale_out_delay_ms")
        batch.drop_column("max_replicas")
        batch.drop_column("min_replicas")
