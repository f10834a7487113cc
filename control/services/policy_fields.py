"""Where each field of the core's configuration is set: the one table.

Every field of :class:`~control.core.context.CoreConfig` (and the tenancy half's fair-share
policy) has a row: the typed settings (``LEGATO_...``) that set it when the gateway starts, and
whether ``PATCH /admin/policies`` may change it on the running core. ``LEGATO_CORE_POLICIES``
(a JSON object of the document of :mod:`control.services.policy_doc`) reaches every field, the
named settings the common ones. A field missing here is reachable from nowhere:
``tests/services/test_policy_fields.py`` walks CoreConfig and fails on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exposure:
    """How one top-level field of the policy document is reached."""

    settings: tuple[str, ...]  # Settings attributes that set it at start
    live: bool  # PATCH /admin/policies may change it while the core runs


_ALL = "core_policies"

POLICY_FIELDS: dict[str, Exposure] = {
    "batching": Exposure(("batching", _ALL), live=True),
    "batching_config": Exposure(("batching_max_delay_s", _ALL), live=True),
    "routing": Exposure(("routing", _ALL), live=True),
    "routing_config": Exposure((_ALL,), live=True),
    "stealing": Exposure((_ALL,), live=True),
    "transfer": Exposure(("interconnects", _ALL), live=True),
    "prefix_capacity_blocks": Exposure((_ALL,), live=True),
    # fixed at start: the gateway hashes prompts into blocks of this size as the core routes
    "prefix_block_tokens": Exposure(("prefix_block_tokens", _ALL), live=False),
    "speculative_preload": Exposure((_ALL,), live=True),
    "scale_to_zero_idle_s": Exposure((_ALL,), live=True),
    "finished_runs_kept": Exposure((_ALL,), live=False),
    "binding": Exposure((_ALL,), live=True),
    "request_ids_kept_s": Exposure((_ALL,), live=False),
    "max_device_loss_retries": Exposure((_ALL,), live=True),
    "capacity_admission": Exposure(("capacity_admission", "capacity_margin", _ALL), live=True),
    "max_recomputes": Exposure((_ALL,), live=True),
    # live: steps that become ready after the change are ordered the new way
    "step_order": Exposure((_ALL,), live=True),
    "canary": Exposure(
        (
            "canary_error_margin",
            "canary_p99_margin",
            "canary_p99_min_delta_s",
            "canary_min_samples",
            "canary_window",
            _ALL,
        ),
        live=True,
    ),  # fmt: skip
    "variants": Exposure(("exact_quality_floor", _ALL), live=True),
    "fair_share": Exposure(("fair_share", _ALL), live=True),
    "fair_share_config": Exposure((_ALL,), live=True),
}

#: The fields PATCH /admin/policies takes.
LIVE_FIELDS = frozenset(name for name, row in POLICY_FIELDS.items() if row.live)
#: Every field: what LEGATO_CORE_POLICIES takes at start.
ALL_FIELDS = frozenset(POLICY_FIELDS)
