"""Model variants and LoRA adapters (issue 27).

* ``model_variants``: a precision variant of a served model (``bf16``, ``int8``, ``int4``...),
  its own replica kind with measured memory, load time, price and quality against the base.
* ``model_latency_profiles.variant``: which variant a latency point was measured for (``""``:
  the base model), part of the point's unique key.
* ``tenants.quality`` (the tenant's default quality class; NULL: from its priority class) and
  ``tenants.allow_degrade`` (may the core run its steps on a cheaper variant when the preferred
  one is saturated).
* ``requests.quality`` (the class asked for) and ``requests.degradations`` (the steps that ran
  on another variant than the preferred one, and why).
* ``placements.variant``: the precision variant a placement runs (``""``: the base model).
* ``usage_entries.variant`` and ``usage_entries.adapter``: what really ran, as billed.
* ``lora_adapters``: a tenant's PEFT adapter (a local folder) on a base generate model.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PRECISIONS = "('fp32', 'fp16', 'bf16', 'fp8', 'int8', 'int4', 'q4_1')"
_QUALITY = "('exact', 'balanced', 'fast')"


def upgrade() -> None:
    op.create_table(
        "model_variants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("precision", sa.String(16), nullable=False),
        sa.Column("memory_mib", sa.Integer(), nullable=True),
        sa.Column("load_time_ms", sa.Integer(), nullable=True),
        sa.Column("cost_weight_milli", sa.Integer(), nullable=True),
        sa.Column("quality", sa.JSON(), nullable=False),
        sa.Column("quality_measured_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(16), nullable=False, server_default="active"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_model_variants_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_variants")),
        sa.UniqueConstraint(
            "model_id", "precision", name=op.f("uq_model_variants_model_id_precision")
        ),
        sa.CheckConstraint(f"precision IN {_PRECISIONS}", name=op.f("ck_model_variants_precision")),
        sa.CheckConstraint(
            "status IN ('active', 'retired')", name=op.f("ck_model_variants_status")
        ),
        sa.CheckConstraint(
            "memory_mib IS NULL OR memory_mib > 0", name=op.f("ck_model_variants_memory_positive")
        ),
        sa.CheckConstraint(
            "cost_weight_milli IS NULL OR cost_weight_milli >= 0",
            name=op.f("ck_model_variants_cost_weight_nonnegative"),
        ),
    )
    op.create_index(op.f("ix_model_variants_model_id"), "model_variants", ["model_id"])
    with op.batch_alter_table("model_latency_profiles") as batch:
        batch.add_column(sa.Column("variant", sa.String(16), nullable=False, server_default=""))
        batch.drop_constraint(op.f("uq_model_latency_profiles_point"), type_="unique")
        batch.create_unique_constraint(
            op.f("uq_model_latency_profiles_point"),
            ["model_id", "variant", "device_type", "batch_size", "num_tokens"],
        )
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("quality", sa.String(16), nullable=True))
        batch.add_column(
            sa.Column("allow_degrade", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.create_check_constraint(
            op.f("ck_tenants_quality"), sa.text(f"quality IS NULL OR quality IN {_QUALITY}")
        )
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("quality", sa.String(16), nullable=True))
        batch.add_column(sa.Column("degradations", sa.JSON(), nullable=True))
    with op.batch_alter_table("placements") as batch:
        batch.add_column(sa.Column("variant", sa.String(16), nullable=False, server_default=""))
    with op.batch_alter_table("usage_entries") as batch:
        batch.add_column(sa.Column("variant", sa.String(16), nullable=True))
        batch.add_column(sa.Column("adapter", sa.String(100), nullable=True))
    op.create_table(
        "lora_adapters",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("path", sa.String(500), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("memory_mib", sa.Integer(), nullable=True),
        sa.Column("load_time_ms", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False, server_default="active"),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_lora_adapters_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_lora_adapters_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lora_adapters")),
        sa.UniqueConstraint(
            "tenant_id", "model_id", "name", name=op.f("uq_lora_adapters_tenant_id_model_id_name")
        ),
        sa.CheckConstraint("status IN ('active', 'retired')", name=op.f("ck_lora_adapters_status")),
        sa.CheckConstraint("rank IS NULL OR rank > 0", name=op.f("ck_lora_adapters_rank_positive")),
    )
    op.create_index(op.f("ix_lora_adapters_model_id"), "lora_adapters", ["model_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_lora_adapters_model_id"), table_name="lora_adapters")
    op.drop_table("lora_adapters")
    with op.batch_alter_table("usage_entries") as batch:
        batch.drop_column("adapter")
        batch.drop_column("variant")
    with op.batch_alter_table("placements") as batch:
        batch.drop_column("variant")
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("degradations")
        batch.drop_column("quality")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_constraint(op.f("ck_tenants_quality"), type_="check")
        batch.drop_column("allow_degrade")
        batch.drop_column("quality")
    with op.batch_alter_table("model_latency_profiles") as batch:
        batch.drop_constraint(op.f("uq_model_latency_profiles_point"), type_="unique")
        batch.create_unique_constraint(
            op.f("uq_model_latency_profiles_point"),
            ["model_id", "device_type", "batch_size", "num_tokens"],
        )
        batch.drop_column("variant")
    op.drop_index(op.f("ix_model_variants_model_id"), table_name="model_variants")
    op.drop_table("model_variants")
