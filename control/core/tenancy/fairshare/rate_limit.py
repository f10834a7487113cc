"""Per-tenant request-rate limiter: the "requests per minute" baseline of LLM APIs.

Each tenant may start at most ``max_requests`` runs in any window of ``window_s`` seconds;
admitted work is then served first come, first served. It isolates tenants only by refusing
work, so it wastes capacity when the others are idle (the paper's RPM baseline).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from control.core.tenancy.fairshare.fcfs import FcfsFairShare


@dataclass(frozen=True)
class RateLimitConfig:
    """Settings of the request-rate limiter.

    max_requests: runs a tenant may start per window (the same for every tenant, times its
        weight when ``scale_by_weight``).
    window_s: length of the sliding window in seconds.
    scale_by_weight: multiply ``max_requests`` by the tenant's weight.
    """

    max_requests: int = 60
    window_s: float = 60.0
    scale_by_weight: bool = True

    def __post_init__(self) -> None:
        if self.max_requests <= 0:
            raise ValueError(f"max_requests must be > 0, got {self.max_requests}")
        if self.window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {self.window_s}")


class RateLimitFairShare(FcfsFairShare):
    """Sliding-window request limit per tenant, FCFS service of what got in (the ordering,
    selection and bookkeeping hooks are FCFS's; only the admission gate differs)."""

    name = "rate_limit"

    def __init__(self, config: RateLimitConfig | None = None) -> None:
        self.config = config or RateLimitConfig()
        self._weights: dict[str, int] = {}
        self._starts: dict[str, deque[float]] = {}

    def set_weights(self, weights: Mapping[str, int]) -> None:
        self._weights = dict(weights)

    def limit(self, tenant_id: str) -> int:
        factor = self._weights.get(tenant_id, 1) if self.config.scale_by_weight else 1
        return self.config.max_requests * factor

    def gate(self, tenant_id: str, now: float) -> float | None:
        """Record a start and return None, or return seconds until the oldest start expires."""
        starts = self._starts.setdefault(tenant_id, deque())
        while starts and starts[0] <= now - self.config.window_s:
            starts.popleft()
        if len(starts) >= self.limit(tenant_id):
            return max(starts[0] + self.config.window_s - now, 1e-3)
        starts.append(now)
        return None
