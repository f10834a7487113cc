"""Front-door admission limits per tenant: status, bounded queue, token buckets.

These are not cohort quotas (nothing is borrowed): they protect the queues from floods. A
refusal is a ``Rejected`` value with a reason and a retry-after, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable

from control.core.tenancy.base import AdmissionRequest, QuotaSpec, Rejected, TenantSpec
from control.core.tenancy.bucket import TokenBucket
from control.core.tenancy.config import TenancyManagerConfig

_BUCKET_DEMAND = {
    "request_burst": lambda req: 1,
    "token_burst": lambda req: req.est_tokens,
}


class AdmissionLimits:
    """Checks and applies the front-door limits; knows nothing of fair share or quotas."""

    def __init__(self, config: TenancyManagerConfig) -> None:
        self.config = config
        self._tenants: dict[str, TenantSpec] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._max_queued: dict[str, int] = {}
        # tenant -> [(resource, bucket)] by resource: admission looks only at the asker's
        self._buckets_of: dict[str, list[tuple[str, TokenBucket]]] = {}

    def configure(
        self, tenants: Iterable[TenantSpec], quotas: Iterable[QuotaSpec], now: float
    ) -> None:
        """Replace limits. Buckets whose size did not change keep their level."""
        self._tenants = {t.tenant_id: t for t in tenants}
        self._max_queued = {}
        buckets: dict[tuple[str, str], TokenBucket] = {}
        for spec in quotas:
            if spec.resource == "queued_runs":
                self._max_queued[spec.tenant_id] = spec.nominal
            elif spec.resource in _BUCKET_DEMAND:
                key = (spec.tenant_id, spec.resource)
                old = self._buckets.get(key)
                same = old is not None and (old.capacity, old.refill) == (
                    spec.nominal,
                    spec.nominal,
                )
                buckets[key] = (
                    old
                    if same and old is not None
                    else TokenBucket(spec.nominal, spec.nominal, spec.period_s, now)
                )
        self._buckets = buckets
        self._buckets_of = {}
        for (tenant_id, resource), bucket in sorted(buckets.items()):
            self._buckets_of.setdefault(tenant_id, []).append((resource, bucket))

    def tenant(self, tenant_id: str) -> TenantSpec | None:
        return self._tenants.get(tenant_id)

    def max_queued(self, tenant_id: str) -> int:
        return self._max_queued.get(tenant_id, self.config.default_max_queued_runs)

    def check(self, req: AdmissionRequest, waiting_runs: int, now: float) -> Rejected | None:
        """A refusal, or None when the front door lets ``req`` through. Changes nothing."""
        spec = self._tenants.get(req.tenant_id)
        if spec is None and not self.config.admit_unknown_tenants:
            return Rejected(
                req.request_id, f"tenant {req.tenant_id} is not known", retry_after_s=60.0
            )
        if spec is not None and spec.status != "active":
            return Rejected(
                req.request_id, f"tenant {req.tenant_id} is {spec.status}", retry_after_s=60.0
            )
        limit = self.max_queued(req.tenant_id)
        if waiting_runs >= limit:
            return Rejected(
                req.request_id,
                f"tenant {req.tenant_id} already has {waiting_runs:,} "
                f"runs waiting (its queue bound is {limit:,})",
                retry_after_s=self.config.held_retry_after_s,
            )
        tenant_id = req.tenant_id
        for resource, bucket in self._buckets_of.get(tenant_id, ()):
            wait = bucket.wait_for(_BUCKET_DEMAND[resource](req), now)
            if wait > 0:
                return Rejected(
                    req.request_id,
                    (
                        f"tenant {tenant_id} is bursting past its {resource} of {bucket.capacity:,} "
                        f"per {bucket.period_ms / 1000:g} s ({bucket.level(now):,} left)"
                    ),
                    retry_after_s=wait,
                )
        return None

    def take(self, req: AdmissionRequest, now: float) -> None:
        """Consume bucket tokens for an admitted run (after ``check`` returned None)."""
        for resource, bucket in self._buckets_of.get(req.tenant_id, ()):
            bucket.take(_BUCKET_DEMAND[resource](req), now)
