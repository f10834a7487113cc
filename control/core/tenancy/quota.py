"""Quota ledger with cohorts, borrowing and lending limits (after Kueue's quota accounting).

Each tenant has, per resource, a ``nominal`` quota. Tenants of one cohort lend each other idle
nominal quota: tenant o lends at most ``min(lending_limit_o, nominal_o - used_o)``; a borrower
may go over its nominal by at most its ``borrowing_limit``; the cohort's total borrowed amount
never exceeds what its members lend at admission time. Work admitted on borrowed quota is
marked preemptible. A request within its tenant's own nominal quota is always admitted, even
when others borrowed that quota; ``reclaims`` then names borrowed runs to preempt, newest
first, but only runs that have not produced output (never mid-stream).

All amounts are integers in each resource's internal unit (see ``resources.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from control.core.tenancy.base import AdmissionRequest, QuotaSpec, TenantSpec
from control.core.tenancy.holds import Hold, Holds
from control.core.tenancy.resources import RESOURCE_METERS, ResourceMeter
from control.core.tenancy.window import HeldUsage, SlidingUsage


@dataclass(frozen=True)
class QuotaVerdict:
    """Outcome of a quota check: ``ok`` with ``borrowed``, or a refusal with retry time."""

    ok: bool
    borrowed: bool
    reason: str
    retry_after_s: float = 0.0


@dataclass(frozen=True)
class QuotaUse:
    """One tenant's standing on one resource, in the quota's own unit (nominal's unit)."""

    resource: str
    nominal: int
    used: int
    borrowed: int
    borrowing_limit: int | None
    lending_limit: int | None


_NO_QUOTA = QuotaVerdict(True, False, "within nominal quota")


class QuotaLedger:
    """Exact per-tenant, per-resource usage with cohort borrowing. See the module docstring."""

    def __init__(self, device_us_per_unit: int = 1000, held_retry_after_s: float = 1.0) -> None:
        self.device_us_per_unit = device_us_per_unit
        self.held_retry_after_s = held_retry_after_s
        self._specs: dict[tuple[str, str], QuotaSpec] = {}
        # tenant -> its specs by resource: admission looks only at the asking tenant's quotas
        self._specs_of: dict[str, tuple[QuotaSpec, ...]] = {}
        self._cohort_of: dict[str, str | None] = {}
        self._usage: dict[tuple[str, str], SlidingUsage | HeldUsage] = {}
        self._holds = Holds()

    def configure(self, tenants: Iterable[TenantSpec], quotas: Iterable[QuotaSpec]) -> None:
        """Replace tenants' cohorts and quotas; usage recorded so far is kept."""
        self._cohort_of = {t.tenant_id: t.cohort for t in tenants}
        self._specs = {}
        for spec in quotas:
            if spec.resource not in RESOURCE_METERS:
                continue  # admission-only resources are enforced by the admission controller
            for name in ("nominal", "borrowing_limit", "lending_limit"):
                value = getattr(spec, name)
                if value is not None and value < 0:
                    raise ValueError(
                        f"{name} of {spec.tenant_id}/{spec.resource} must be >= 0, got {value}"
                    )
            self._specs[(spec.tenant_id, spec.resource)] = spec
            usage = self._usage.get((spec.tenant_id, spec.resource))
            if isinstance(usage, SlidingUsage):
                usage.period_s = float(spec.period_s)
        by_tenant: dict[str, list[QuotaSpec]] = {}
        for (tenant_id, _resource), spec in sorted(self._specs.items()):
            by_tenant.setdefault(tenant_id, []).append(spec)
        self._specs_of = {t: tuple(specs) for t, specs in by_tenant.items()}

    # -- usage -------------------------------------------------------------------------------

    def _track(self, tenant_id: str, resource: str) -> SlidingUsage | HeldUsage:
        key = (tenant_id, resource)
        if key not in self._usage:
            spec = self._specs.get(key)
            meter = RESOURCE_METERS[resource]
            period = spec.period_s if spec else 60
            self._usage[key] = SlidingUsage(period) if meter.windowed else HeldUsage()
        return self._usage[key]

    def usage(self, tenant_id: str, resource: str, now: float) -> int:
        """Usage counted against quota: recorded usage minus runs already being reclaimed."""
        track = self._track(tenant_id, resource)
        used = track.usage(now)
        holds = self._holds
        for request_id in holds.reclaiming:
            hold = holds.by_id[request_id]
            if hold.tenant_id == tenant_id and resource in hold.resources:
                used -= track.amount_of(request_id, now)
        return used

    def _nominal(self, spec: QuotaSpec) -> int:
        return spec.nominal * RESOURCE_METERS[spec.resource].scale

    def _limit(self, value: int | None, spec: QuotaSpec) -> int | None:
        return None if value is None else value * RESOURCE_METERS[spec.resource].scale

    def _members(self, tenant_id: str) -> list[str]:
        cohort = self._cohort_of.get(tenant_id)
        if cohort is None:
            return [tenant_id]
        return sorted(t for t, c in self._cohort_of.items() if c == cohort)

    def _lendable(self, tenant_id: str, resource: str, now: float) -> int:
        spec = self._specs.get((tenant_id, resource))
        if spec is None:
            return 0
        idle = max(0, self._nominal(spec) - self.usage(tenant_id, resource, now))
        limit = self._limit(spec.lending_limit, spec)
        return idle if limit is None else min(idle, limit)

    def borrowed(self, tenant_id: str, resource: str, now: float) -> int:
        spec = self._specs.get((tenant_id, resource))
        if spec is None:
            return 0
        return max(0, self.usage(tenant_id, resource, now) - self._nominal(spec))

    def overcommit(self, tenant_id: str, resource: str, now: float) -> int:
        """Amount by which the cohort of ``tenant_id`` borrows more than its members lend."""
        members = self._members(tenant_id)
        lent = sum(self._lendable(m, resource, now) for m in members)
        return sum(self.borrowed(m, resource, now) for m in members) - lent

    # -- admission ---------------------------------------------------------------------------

    def check(self, req: AdmissionRequest, now: float) -> QuotaVerdict:
        """Would ``req`` fit? Changes nothing but expiry of old window entries."""
        specs = self._specs_of.get(req.tenant_id)
        if not specs:
            return _NO_QUOTA  # verdicts are immutable values: one serves every such tenant
        borrowed = False
        for spec in specs:
            verdict = self._check_one(req, spec, now)
            if not verdict.ok:
                return verdict
            borrowed = borrowed or verdict.borrowed
        reason = "admitted on quota borrowed in the cohort" if borrowed else "within nominal quota"
        return QuotaVerdict(True, borrowed, reason)

    def _check_one(self, req: AdmissionRequest, spec: QuotaSpec, now: float) -> QuotaVerdict:
        meter = RESOURCE_METERS[spec.resource]
        amount = meter.demand(req, self.device_us_per_unit)
        used = self.usage(req.tenant_id, spec.resource, now)
        nominal = self._nominal(spec)
        if used + amount <= nominal:
            return QuotaVerdict(True, False, "")
        need = used + amount - nominal
        what = (
            f"tenant {req.tenant_id} is over its {spec.resource}: {used:,} used + {amount:,} "
            f"asked > {nominal:,} {meter.unit} nominal"
        )
        limit = self._limit(spec.borrowing_limit, spec)
        cohort = self._cohort_of.get(req.tenant_id)
        if cohort is None:
            return self._refuse(f"{what}, and it is in no cohort", req, spec, meter, now)
        if limit is not None and need > limit:
            return self._refuse(
                f"{what}, and {need:,} would exceed its borrowing limit {limit:,}",
                req,
                spec,
                meter,
                now,
            )
        members = [m for m in self._members(req.tenant_id) if m != req.tenant_id]
        lent = sum(self._lendable(m, spec.resource, now) for m in members)
        others = sum(self.borrowed(m, spec.resource, now) for m in members)
        if others + need > lent:  # the cohort's borrowing may not exceed what is lent
            return self._refuse(
                f"{what}, and cohort {cohort} has only {max(0, lent - others):,} idle to lend",
                req,
                spec,
                meter,
                now,
            )
        return QuotaVerdict(True, True, "")

    def _refuse(
        self, reason: str, req: AdmissionRequest, spec: QuotaSpec, meter: ResourceMeter, now: float
    ) -> QuotaVerdict:
        amount = meter.demand(req, self.device_us_per_unit)
        track = self._track(req.tenant_id, spec.resource)
        wait = track.seconds_until_at_most(self._nominal(spec) - amount, now)
        if wait is None or wait <= 0:
            wait = float(spec.period_s) if meter.windowed else self.held_retry_after_s
        return QuotaVerdict(False, False, reason, retry_after_s=wait)

    def commit(self, req: AdmissionRequest, borrowed: bool, now: float) -> None:
        """Record an admitted run's demand on every resource its tenant has a quota for."""
        if req.request_id in self._holds.by_id:
            raise ValueError(f"request_id {req.request_id!r} is already admitted")
        resources = tuple(spec.resource for spec in self._specs_of.get(req.tenant_id, ()))
        for resource in resources:
            amount = RESOURCE_METERS[resource].demand(req, self.device_us_per_unit)
            self._track(req.tenant_id, resource).add(req.request_id, amount, now)
        self._holds.add(req.request_id, Hold(req.tenant_id, borrowed, now, resources))

    def release(self, request_id: str, used_tokens: int, used_cost_units: int, now: float) -> bool:
        """End a run: free held amounts, correct windowed ones to actual use. False if unknown."""
        hold = self._holds.pop(request_id)
        if hold is None:
            return False
        for resource in hold.resources:
            actual = RESOURCE_METERS[resource].actual(
                used_tokens, used_cost_units, self.device_us_per_unit
            )
            self._track(hold.tenant_id, resource).correct(request_id, actual, now)
        return True

    def is_borrowed(self, request_id: str) -> bool:
        hold = self._holds.by_id.get(request_id)
        return hold is not None and hold.borrowed

    # -- reclaim -----------------------------------------------------------------------------

    def reclaims(self, now: float, produced_output: Set[str]) -> list[tuple[str, str]]:
        """(request_id, reason) of borrowed runs to preempt so owners get their quota back.

        Marks the named runs as being reclaimed (their usage stops counting) so they are named
        once; they leave the ledger when ``release`` is called for them.
        """
        orders: list[tuple[str, str]] = []
        for request_id in self._holds.reclaim_candidates(produced_output):
            hold = self._holds.by_id[request_id]
            for resource in hold.resources:
                over = self.overcommit(hold.tenant_id, resource, now)
                if (
                    over > 0
                    and self.borrowed(hold.tenant_id, resource, now) > 0
                    and self._track(hold.tenant_id, resource).amount_of(request_id, now) > 0
                ):
                    self._holds.name_for_reclaim(request_id)
                    cohort = self._cohort_of.get(hold.tenant_id)
                    orders.append(
                        (
                            request_id,
                            (
                                f"run {request_id} of tenant {hold.tenant_id} runs on {resource} borrowed "
                                f"in cohort {cohort}; its owners reclaim their nominal quota "
                                f"(cohort over-committed by {over:,})"
                            ),
                        )
                    )
                    break
        return orders

    def uses(self, tenant_id: str, now: float) -> tuple[QuotaUse, ...]:
        """The tenant's standing on each resource it has a quota for, in nominal units."""
        out = []
        for (t, resource), spec in sorted(self._specs.items()):
            if t != tenant_id:
                continue
            scale = RESOURCE_METERS[resource].scale
            used = self.usage(tenant_id, resource, now)
            out.append(
                QuotaUse(
                    resource,
                    spec.nominal,
                    -(-used // scale),
                    -(-self.borrowed(tenant_id, resource, now) // scale),
                    spec.borrowing_limit,
                    spec.lending_limit,
                )
            )
        return tuple(out)
