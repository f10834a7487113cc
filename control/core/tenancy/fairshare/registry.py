"""Fair-share policies by name. Add a strategy by adding an entry, never an ``elif``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from control.core.tenancy.fairshare.base import FairSharePolicy
from control.core.tenancy.fairshare.fcfs import FcfsConfig, FcfsFairShare
from control.core.tenancy.fairshare.rate_limit import RateLimitConfig, RateLimitFairShare
from control.core.tenancy.fairshare.vtc import VtcConfig, VtcFairShare


@dataclass(frozen=True)
class FairShareEntry:
    """A registered policy: its config class and a factory taking an instance of it."""

    config_type: type
    factory: Callable[[Any], FairSharePolicy]
    help: str


FAIR_SHARE_POLICIES: dict[str, FairShareEntry] = {
    "vtc": FairShareEntry(
        VtcConfig, VtcFairShare, "weighted virtual token counter (token-fair, default)"
    ),
    "fcfs": FairShareEntry(FcfsConfig, FcfsFairShare, "first come, first served (baseline)"),
    "rate_limit": FairShareEntry(
        RateLimitConfig, RateLimitFairShare, "per-tenant request-rate limit, then FCFS (baseline)"
    ),
}


def make_fair_share(name: str, config: object | None = None) -> FairSharePolicy:
    """Build the policy registered as ``name``.

    Raises ValueError naming an unknown policy, TypeError when ``config`` is not the policy's
    config class.
    """
    entry = FAIR_SHARE_POLICIES.get(name)
    if entry is None:
        raise ValueError(
            f"unknown fair-share policy {name!r}; expected one of {sorted(FAIR_SHARE_POLICIES)}"
        )
    if config is None:
        config = entry.config_type()
    if not isinstance(config, entry.config_type):
        raise TypeError(
            f"config for {name!r} must be {entry.config_type.__name__}, got {type(config).__name__}"
        )
    return entry.factory(config)
