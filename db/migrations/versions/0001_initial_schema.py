"""Initial control-plane schema: fleet, catalog, placement, workflows, tenancy, requests,
usage ledger, traces, what-if runs and the audit log.

Constraint names follow db.base.NAMING_CONVENTION; string vocabularies are frozen here as
CHECK constraints (a later change to db.vocab needs its own revision).

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("actor", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("entity_type", sa.String(length=32), nullable=False),
        sa.Column("entity_id", sa.String(length=64), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_records")),
    )
    op.create_index(
        op.f("ix_audit_records_entity"), "audit_records", ["entity_type", "entity_id"], unique=False
    )

    op.create_table(
        "cohorts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cohorts")),
        sa.UniqueConstraint("name", name=op.f("uq_cohorts_name")),
    )
    op.create_table(
        "headroom_reservations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("selector", sa.JSON(), nullable=False),
        sa.Column("reserved_milli", sa.Integer(), nullable=False),
        sa.Column("allowed_classes", sa.JSON(), nullable=False),
        sa.Column("borrowable", sa.Boolean(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(
            "reserved_milli >= 0 AND reserved_milli <= 500",
            name=op.f("ck_headroom_reservations_reserved_milli_range"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_headroom_reservations")),
        sa.UniqueConstraint("name", name=op.f("uq_headroom_reservations_name")),
    )
    op.create_table(
        "models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("task", sa.String(length=16), nullable=False),
        sa.Column("weights_source", sa.String(length=16), nullable=False),
        sa.Column("weights_location", sa.String(length=500), nullable=False),
        sa.Column("memory_mib", sa.Integer(), nullable=False),
        sa.Column("precisions", sa.JSON(), nullable=False),
        sa.Column("load_time_ms", sa.Integer(), nullable=True),
        sa.Column("max_batch_size", sa.Integer(), nullable=False),
        sa.Column("max_batch_tokens", sa.Integer(), nullable=False),
        sa.Column("tp_degree", sa.Integer(), nullable=False),
        sa.Column("cost_weight_milli", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("status IN ('active', 'retired')", name=op.f("ck_models_status")),
        sa.CheckConstraint(
            "task IN ('embed', 'rerank', 'generate', 'classify', 'tool')",
            name=op.f("ck_models_task"),
        ),
        sa.CheckConstraint(
            "weights_source IN ('package', 'path', 'hf_hub', 'declared')",
            name=op.f("ck_models_weights_source"),
        ),
        sa.CheckConstraint(
            "cost_weight_milli >= 0", name=op.f("ck_models_cost_weight_nonnegative")
        ),
        sa.CheckConstraint("max_batch_size >= 1", name=op.f("ck_models_max_batch_size_positive")),
        sa.CheckConstraint(
            "max_batch_tokens >= 1", name=op.f("ck_models_max_batch_tokens_positive")
        ),
        sa.CheckConstraint("memory_mib > 0", name=op.f("ck_models_memory_positive")),
        sa.CheckConstraint("tp_degree >= 1", name=op.f("ck_models_tp_degree_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_models_name_version")),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("address", sa.String(length=200), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("status IN ('up', 'draining', 'down')", name=op.f("ck_nodes_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("name", name=op.f("uq_nodes_name")),
    )
    op.create_table(
        "placement_plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("author", sa.String(length=100), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(
            "status IN ('draft', 'simulated', 'active', 'retired', 'rolled_back')",
            name=op.f("ck_placement_plans_status"),
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["placement_plans.id"],
            name=op.f("fk_placement_plans_parent_id_placement_plans"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placement_plans")),
    )
    op.create_table(
        "traces",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("num_rows", sa.Integer(), nullable=False),
        sa.Column("attribution", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(
            "format IN ('azure', 'mooncake', 'servegen', 'synthetic')",
            name=op.f("ck_traces_format"),
        ),
        sa.CheckConstraint("num_rows >= 0", name=op.f("ck_traces_num_rows_nonnegative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_traces")),
        sa.UniqueConstraint("name", name=op.f("uq_traces_name")),
    )
    op.create_table(
        "whatif_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("progress_milli", sa.Integer(), nullable=False),
        sa.Column("scenario", sa.JSON(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'succeeded', 'failed')",
            name=op.f("ck_whatif_runs_status"),
        ),
        sa.CheckConstraint(
            "progress_milli >= 0 AND progress_milli <= 1000",
            name=op.f("ck_whatif_runs_progress_range"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_whatif_runs")),
    )
    op.create_table(
        "workflows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(
            "status IN ('draft', 'active', 'retired')", name=op.f("ck_workflows_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflows")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_workflows_name_version")),
    )
    op.create_table(
        "devices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("accelerator", sa.String(length=64), nullable=True),
        sa.Column("memory_mib", sa.Integer(), nullable=False),
        sa.Column("precisions", sa.JSON(), nullable=False),
        sa.Column("interconnect_group", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("is_real", sa.Boolean(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("kind IN ('cpu', 'cuda', 'declared')", name=op.f("ck_devices_kind")),
        sa.CheckConstraint("status IN ('up', 'draining', 'down')", name=op.f("ck_devices_status")),
        sa.CheckConstraint("memory_mib > 0", name=op.f("ck_devices_memory_positive")),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_devices_node_id_nodes"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_devices")),
        sa.UniqueConstraint("name", name=op.f("uq_devices_name")),
    )
    op.create_index(op.f("ix_devices_node_id"), "devices", ["node_id"], unique=False)

    op.create_table(
        "model_latency_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("device_type", sa.String(length=64), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("num_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_us", sa.Integer(), nullable=False),
        sa.Column("decode_us_per_token", sa.Integer(), nullable=True),
        sa.Column(
            "measured_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(
            "batch_size >= 1", name=op.f("ck_model_latency_profiles_batch_size_positive")
        ),
        sa.CheckConstraint(
            "latency_us >= 0", name=op.f("ck_model_latency_profiles_latency_nonnegative")
        ),
        sa.CheckConstraint(
            "num_tokens >= 0", name=op.f("ck_model_latency_profiles_num_tokens_nonnegative")
        ),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_model_latency_profiles_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_latency_profiles")),
        sa.UniqueConstraint(
            "model_id",
            "device_type",
            "batch_size",
            "num_tokens",
            name="uq_model_latency_profiles_point",
        ),
    )
    op.create_index(
        op.f("ix_model_latency_profiles_model_id"),
        "model_latency_profiles",
        ["model_id"],
        unique=False,
    )

    op.create_table(
        "placements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("device_ids", sa.JSON(), nullable=False),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=8), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.CheckConstraint("pool IN ('hot', 'cold')", name=op.f("ck_placements_pool")),
        sa.CheckConstraint("replicas >= 1", name=op.f("ck_placements_replicas_positive")),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_placements_model_id_models"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["placement_plans.id"],
            name=op.f("fk_placements_plan_id_placement_plans"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placements")),
    )
    op.create_index(op.f("ix_placements_plan_id"), "placements", ["plan_id"], unique=False)

    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("priority_class", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("cohort_id", sa.Integer(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(
            "priority_class IN ('critical', 'standard', 'batch')",
            name=op.f("ck_tenants_priority_class"),
        ),
        sa.CheckConstraint(
            "status IN ('active', 'suspended', 'retired')", name=op.f("ck_tenants_status")
        ),
        sa.CheckConstraint("weight > 0", name=op.f("ck_tenants_weight_positive")),
        sa.ForeignKeyConstraint(
            ["cohort_id"],
            ["cohorts.id"],
            name=op.f("fk_tenants_cohort_id_cohorts"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )
    op.create_index(op.f("ix_tenants_cohort_id"), "tenants", ["cohort_id"], unique=False)

    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_digest", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_api_keys_tenant_id_tenants"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    op.create_index(op.f("ix_api_keys_tenant_id"), "api_keys", ["tenant_id"], unique=False)

    op.create_table(
        "quotas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("resource", sa.String(length=32), nullable=False),
        sa.Column("nominal", sa.Integer(), nullable=False),
        sa.Column("borrowing_limit", sa.Integer(), nullable=True),
        sa.Column("lending_limit", sa.Integer(), nullable=True),
        sa.Column("period_s", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "resource IN ('tokens_per_min', 'requests_per_min', 'concurrent_requests', 'device_seconds_per_hour', 'request_burst', 'token_burst', 'queued_runs')",
            name=op.f("ck_quotas_resource"),
        ),
        sa.CheckConstraint(
            "borrowing_limit >= 0", name=op.f("ck_quotas_borrowing_limit_nonnegative")
        ),
        sa.CheckConstraint("lending_limit >= 0", name=op.f("ck_quotas_lending_limit_nonnegative")),
        sa.CheckConstraint("nominal >= 0", name=op.f("ck_quotas_nominal_nonnegative")),
        sa.CheckConstraint("period_s > 0", name=op.f("ck_quotas_period_positive")),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_quotas_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quotas")),
        sa.UniqueConstraint("tenant_id", "resource", name=op.f("uq_quotas_tenant_id_resource")),
    )
    op.create_table(
        "requests",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("body_hash", sa.String(length=64), nullable=False),
        sa.Column("workflow_name", sa.String(length=200), nullable=False),
        sa.Column("workflow_version", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("priority_class", sa.String(length=16), nullable=False),
        sa.Column(
            "received_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_token_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.CheckConstraint(
            "priority_class IN ('critical', 'standard', 'batch')",
            name=op.f("ck_requests_priority_class"),
        ),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'succeeded', 'failed', 'rejected', 'cancelled')",
            name=op.f("ck_requests_status"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_requests_tenant_id_tenants"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_requests")),
        sa.UniqueConstraint(
            "tenant_id", "idempotency_key", name=op.f("uq_requests_tenant_id_idempotency_key")
        ),
    )
    op.create_index(op.f("ix_requests_status"), "requests", ["status"], unique=False)

    op.create_table(
        "usage_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=36), nullable=False),
        sa.Column("node_id", sa.String(length=100), nullable=False),
        sa.Column("attempt", sa.String(length=32), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=True),
        sa.Column("device_id", sa.Integer(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("device_ms", sa.Integer(), nullable=False),
        sa.Column("cost_units", sa.Integer(), nullable=False),
        sa.Column(
            "recorded_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("cost_units >= 0", name=op.f("ck_usage_entries_cost_units_nonnegative")),
        sa.CheckConstraint("device_ms >= 0", name=op.f("ck_usage_entries_device_ms_nonnegative")),
        sa.CheckConstraint(
            "input_tokens >= 0", name=op.f("ck_usage_entries_input_tokens_nonnegative")
        ),
        sa.CheckConstraint(
            "output_tokens >= 0", name=op.f("ck_usage_entries_output_tokens_nonnegative")
        ),
        sa.ForeignKeyConstraint(
            ["device_id"],
            ["devices.id"],
            name=op.f("fk_usage_entries_device_id_devices"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_usage_entries_model_id_models"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["requests.id"],
            name=op.f("fk_usage_entries_request_id_requests"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_entries")),
        sa.UniqueConstraint(
            "request_id",
            "node_id",
            "attempt",
            name=op.f("uq_usage_entries_request_id_node_id_attempt"),
        ),
    )


def downgrade() -> None:
    op.drop_table("usage_entries")
    op.drop_index(op.f("ix_requests_status"), table_name="requests")

    op.drop_table("requests")
    op.drop_table("quotas")
    op.drop_index(op.f("ix_api_keys_tenant_id"), table_name="api_keys")

    op.drop_table("api_keys")
    op.drop_index(op.f("ix_tenants_cohort_id"), table_name="tenants")

    op.drop_table("tenants")
    op.drop_index(op.f("ix_placements_plan_id"), table_name="placements")

    op.drop_table("placements")
    op.drop_index(op.f("ix_model_latency_profiles_model_id"), table_name="model_latency_profiles")

    op.drop_table("model_latency_profiles")
    op.drop_index(op.f("ix_devices_node_id"), table_name="devices")

    op.drop_table("devices")
    op.drop_table("workflows")
    op.drop_table("whatif_runs")
    op.drop_table("traces")
    op.drop_table("placement_plans")
    op.drop_table("nodes")
    op.drop_table("models")
    op.drop_table("headroom_reservations")
    op.drop_table("cohorts")
    op.drop_index(op.f("ix_audit_records_entity"), table_name="audit_records")

    op.drop_table("audit_records")
