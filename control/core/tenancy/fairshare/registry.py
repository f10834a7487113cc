"""Fair-share policies by name (a :class:`~control.core.registry.PolicyRegistry`)."""

from __future__ import annotations

from control.core.registry import PolicyEntry, PolicyRegistry
from control.core.tenancy.fairshare.base import FairSharePolicy
from control.core.tenancy.fairshare.fcfs import FcfsConfig, FcfsFairShare
from control.core.tenancy.fairshare.rate_limit import RateLimitConfig, RateLimitFairShare
from control.core.tenancy.fairshare.vtc import VtcConfig, VtcFairShare

FAIR_SHARE_POLICIES: PolicyRegistry[FairSharePolicy] = PolicyRegistry(
    "fair-share policy",
    (
        PolicyEntry(
            "vtc", VtcConfig, VtcFairShare, "weighted virtual token counter (token-fair, default)"
        ),
        PolicyEntry("fcfs", FcfsConfig, FcfsFairShare, "first come, first served (baseline)"),
        PolicyEntry(
            "rate_limit", RateLimitConfig, RateLimitFairShare,
            "per-tenant request-rate limit, then FCFS (baseline)",
        ),
    ),
)  # fmt: skip


def make_fair_share(name: str, config: object | None = None) -> FairSharePolicy:
    """Build the policy registered as ``name`` (default config if None). Raises ValueError
    naming an unknown policy, TypeError when ``config`` is not the policy's config class."""
    return FAIR_SHARE_POLICIES.build(name, config)
