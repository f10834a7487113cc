"""The core's policies from the settings, read once when the gateway or ``legato serve`` starts.

The named settings (``LEGATO_BATCHING``, ``LEGATO_BATCHING_MAX_DELAY_S``, ``LEGATO_ROUTING``,
``LEGATO_FAIR_SHARE``, ``LEGATO_INTERCONNECTS``: the transfer pricing of a named fabric) apply
first, then ``LEGATO_CORE_POLICIES`` (any field of the policy
document, those fixed at start included), over the serving defaults. A bad value stops the
start with the field named (:class:`~control.services.policy_doc.PolicyFieldError`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from control.config import Settings
from control.core.context import CoreConfig
from control.core.routing.interconnects import interconnect
from control.core.tenancy.config import TenancyManagerConfig
from control.services.policy_doc import Policies, PolicyFieldError, merge, plain
from control.services.policy_fields import ALL_FIELDS


def policies_from_settings(settings: Settings, base: CoreConfig) -> Policies:
    """``base`` with the settings' policies applied (the module doc)."""
    named: dict[str, Any] = {"batching": settings.batching, "routing": settings.routing,
                             "fair_share": settings.fair_share}  # fmt: skip
    if settings.batching_max_delay_s is not None:
        named["batching_config"] = {"max_queue_delay_s": settings.batching_max_delay_s}
    if settings.interconnects:
        try:
            named["transfer"] = plain(interconnect(settings.interconnects))
        except ValueError as exc:
            raise PolicyFieldError("transfer", f"LEGATO_INTERCONNECTS: {exc}") from None
    policies = merge(Policies(base), named, ALL_FIELDS)
    return merge(policies, settings.core_policies, ALL_FIELDS)


def tenancy_of(policies: Policies, base: TenancyManagerConfig) -> TenancyManagerConfig:
    """``base`` with the policies' fair-share policy."""
    return replace(base, fair_share=policies.fair_share,
                   fair_share_config=policies.fair_share_config)  # fmt: skip
