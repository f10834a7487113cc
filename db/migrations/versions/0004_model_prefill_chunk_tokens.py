"""Served models: per-model chunked prefill budget for continuous batching.

Existing rows get 0 (each prompt prefilled in one iteration), the behaviour of every model
before the setting.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(
            sa.Column(
                "prefill_chunk_tokens", sa.Integer(), server_default=sa.text("0"), nullable=False
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_column("prefill_chunk_tokens")
