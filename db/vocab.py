"""Closed vocabularies of the schema: the only values the string-coded columns accept.

The tables enforce them with CHECK constraints and the services validate against the same
tuples before writing, so a bad value is refused with a message naming it.
"""

from __future__ import annotations

NODE_STATUSES = ("up", "draining", "down")
DEVICE_KINDS = ("cpu", "cuda", "declared")
DEVICE_STATUSES = ("up", "draining", "down")
MODEL_TASKS = ("embed", "rerank", "generate", "classify", "tool")
WEIGHT_SOURCES = ("package", "path", "hf_hub", "declared")
MODEL_STATUSES = ("active", "retired")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "q4_1")
PLAN_STATUSES = ("draft", "proposed", "simulated", "active", "retired", "rolled_back")
POOL_KINDS = ("hot", "cold")
WORKFLOW_STATUSES = ("draft", "active", "retired")
PRIORITY_CLASSES = ("critical", "standard", "batch")
#: What a request asks of a model with precision variants: the base (``exact``), a variant
#: whose measured quality passes the floor (``balanced``), or the cheapest (``fast``).
QUALITY_CLASSES = ("exact", "balanced", "fast")
TENANT_STATUSES = ("active", "suspended", "retired")
QUOTA_RESOURCES = (
    "tokens_per_min",
    "requests_per_min",
    "concurrent_requests",
    "device_seconds_per_hour",
    # Admission limits (per tenant, not borrowable): token buckets and the queued-run bound.
    "request_burst",
    "token_burst",
    "queued_runs",
)
REQUEST_STATUSES = ("queued", "running", "succeeded", "failed", "rejected", "cancelled")
TRACE_FORMATS = ("azure", "mooncake", "servegen", "synthetic")
WHATIF_STATUSES = ("pending", "running", "succeeded", "failed")

#: Largest share of a pool a headroom reservation may hold back, in thousandths (500 = 50%).
MAX_RESERVED_MILLI = 500


def in_clause(column: str, values: tuple[str, ...]) -> str:
    """SQL text of a CHECK that ``column`` holds one of ``values`` (all plain identifiers)."""
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"
