"""Placement plans proposed by the planner and gated by the twin: a ``proposed`` status, how
the plan was proposed (``origin``), the twin's replay against it (``simulation``), what was
observed live after its rollout (``observation``), the ``flagged`` mark and ``auto_rollback``.

Existing plans get no origin, simulation or observation, are not flagged, and follow the
``LEGATO_PLAN_AUTO_ROLLBACK`` setting (``auto_rollback`` NULL).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = "status IN ('draft', 'simulated', 'active', 'retired', 'rolled_back')"
_NEW = "status IN ('draft', 'proposed', 'simulated', 'active', 'retired', 'rolled_back')"


def _status_check(batch: object, clause: str) -> None:
    batch.drop_constraint(op.f("ck_placement_plans_status"), type_="check")  # type: ignore[attr-defined]
    batch.create_check_constraint(op.f("ck_placement_plans_status"), sa.text(clause))  # type: ignore[attr-defined]


def upgrade() -> None:
    with op.batch_alter_table("placement_plans") as batch:
        batch.add_column(sa.Column("origin", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("simulation", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("observation", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("flagged", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch.add_column(sa.Column("auto_rollback", sa.Boolean(), nullable=True))
        _status_check(batch, _NEW)


def downgrade() -> None:
    op.execute("UPDATE placement_plans SET status = 'draft' WHERE status = 'proposed'")
    with op.batch_alter_table("placement_plans") as batch:
        _status_check(batch, _OLD)
        for column in ("auto_rollback", "flagged", "observation", "simulation", "origin"):
            batch.drop_column(column)
