"""``TenancyManager``: the tenancy half of the core, assembled from pluggable parts.

Parts: a fair-share policy from the registry (VTC by default) with strict priority across
tenants layered on its order (``strict``), the front-door admission limits (status, bounded
queue, token buckets), the cohort quota ledger and the headroom guard. The
manager tracks runs and queued steps so it knows who is backlogged, what is waiting, and what
was borrowed. It is driven by ``ControlCore`` at the points listed in ``base.py``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence, Set
from dataclasses import replace

from control.core.tenancy.admission import AdmissionLimits
from control.core.tenancy.base import (
    AdmissionDecision,
    AdmissionRequest,
    Admitted,
    HeadroomDecision,
    PoolUsage,
    QueuedWork,
    QueuePositions,
    ReclaimOrder,
    Rejected,
    TenancyConfig,
    priority_rank,
)
from control.core.tenancy.config import TenancyManagerConfig
from control.core.tenancy.explain import explain_run, queue_positions
from control.core.tenancy.fairshare import make_fair_share
from control.core.tenancy.fairshare.base import COUNTER_SCALE
from control.core.tenancy.headroom import HeadroomGuard
from control.core.tenancy.quota import QuotaLedger
from control.core.tenancy.snapshot import TenancySnapshot, snapshot_of
from control.core.tenancy.strict import strict_order
from control.core.values import record


@record
class RunState:
    """An admitted run as the tenancy half sees it."""

    tenant_id: str
    priority_class: str
    borrowed: bool
    admitted_at: float
    started: bool = False


class TenancyManager:
    """Implements ``TenancyPolicy``. Every method is a pure state transition on ``now``."""

    def __init__(self, config: TenancyManagerConfig | None = None) -> None:
        self.config = config or TenancyManagerConfig()
        self.fair = make_fair_share(self.config.fair_share, self.config.fair_share_config)
        self.limits = AdmissionLimits(self.config)
        self.ledger = QuotaLedger(
            self.config.device_us_per_cost_unit, self.config.held_retry_after_s
        )
        self.headroom = HeadroomGuard()
        self.runs: dict[str, RunState] = {}
        self.queued: dict[str, QueuedWork] = {}
        self._queued_by_tenant: dict[str, dict[str, QueuedWork]] = {}
        # request id -> its queued step keys: release drops them without scanning the queue
        self._queued_by_request: dict[str, set[str]] = {}
        self._waiting: dict[str, int] = {}
        self._rejections: OrderedDict[str, Rejected] = OrderedDict()
        self._weights: dict[str, int] = {}
        self._strict: frozenset[str] = frozenset()
        self._now = 0.0

    def set_fair_share(self, name: str, config: object | None, now: float) -> None:
        """Replace the fair-share policy by ``name`` (``config``: its own, None: defaults),
        keeping runs, queues and quotas; the new policy starts with no service counted, told
        the weights and which tenants are backlogged now. Raises ValueError (unknown name) or
        TypeError (a config of another type) changing nothing."""
        fair = make_fair_share(name, config)
        fair.set_weights(self._weights)
        for tenant_id, own in self._queued_by_tenant.items():
            if own:
                fair.on_backlogged(tenant_id, now)
        self.fair, self._now = fair, now
        self.config = replace(self.config, fair_share=name, fair_share_config=config)

    def configure(self, config: TenancyConfig, now: float) -> None:
        """Replace tenants, quotas and reservations. Runs, queues and counters are kept."""
        self._now = now
        for tenant in config.tenants:
            if tenant.weight <= 0:
                raise ValueError(
                    f"weight of tenant {tenant.tenant_id!r} must be > 0, got {tenant.weight}"
                )
        self._weights = {t.tenant_id: t.weight for t in config.tenants}
        self._strict = frozenset(t.tenant_id for t in config.tenants if t.strict_priority)
        self.fair.set_weights(self._weights)
        self.limits.configure(config.tenants, config.quotas, now)
        self.ledger.configure(config.tenants, config.quotas)
        self.headroom.configure(config.headroom)

    # -- admission ---------------------------------------------------------------------------

    def admit(self, req: AdmissionRequest, now: float) -> AdmissionDecision:
        """Admit or refuse a run. Refusals are values; a duplicate request id raises ValueError."""
        self._now = now
        if req.request_id in self.runs:
            raise ValueError(f"request_id {req.request_id!r} is already admitted")
        priority_rank(req.priority_class)  # raises ValueError naming an unknown class
        refusal = self.limits.check(req, self._waiting.get(req.tenant_id, 0), now)
        if refusal is None:
            verdict = self.ledger.check(req, now)
            if not verdict.ok:
                refusal = Rejected(req.request_id, verdict.reason, verdict.retry_after_s)
        if refusal is None:
            wait = self.fair.gate(req.tenant_id, now)
            if wait is not None:
                refusal = Rejected(
                    req.request_id,
                    f"tenant {req.tenant_id} is over its request rate ({self.fair.name} policy)",
                    wait,
                )
        if refusal is not None:
            self._remember(refusal)
            return refusal
        self.limits.take(req, now)
        self.ledger.commit(req, verdict.borrowed, now)
        self.runs[req.request_id] = RunState(
            req.tenant_id, req.priority_class, verdict.borrowed, now
        )
        self._waiting[req.tenant_id] = self._waiting.get(req.tenant_id, 0) + 1
        return Admitted(req.request_id, verdict.borrowed, verdict.reason)

    def _remember(self, refusal: Rejected) -> None:
        self._rejections[refusal.request_id] = refusal
        while len(self._rejections) > self.config.max_remembered_rejections:
            self._rejections.popitem(last=False)

    def release(self, request_id: str, used_tokens: int, used_cost_units: int, now: float) -> None:
        """End a run: free its quota (windowed use corrected to actual) and drop its queued
        steps. Unknown ids (never admitted, or already released) are ignored."""
        self._now = now
        run = self.runs.pop(request_id, None)
        if run is None:
            return
        if not run.started:
            self._waiting[run.tenant_id] -= 1
        for key in list(self._queued_by_request.get(request_id, ())):
            self.on_dequeue(key, now)
        self.ledger.release(request_id, used_tokens, used_cost_units, now)

    # -- queues and fair share ---------------------------------------------------------------

    def on_enqueue(self, item: QueuedWork, now: float) -> None:
        """Record a ready step; a tenant going from 0 to 1 queued step becomes backlogged."""
        self._now = now
        if item.key in self.queued:
            raise ValueError(f"step key {item.key!r} is already queued")
        priority_rank(item.priority_class)
        own = self._queued_by_tenant.setdefault(item.tenant_id, {})
        self.queued[item.key] = item
        own[item.key] = item
        keys = self._queued_by_request.get(item.request_id)
        if keys is None:
            self._queued_by_request[item.request_id] = {item.key}
        else:
            keys.add(item.key)
        if len(own) == 1:
            self.fair.on_backlogged(item.tenant_id, now)

    def on_dequeue(self, key: str, now: float) -> None:
        """A queued step left without dispatch (cancelled, moved). Unknown keys are ignored."""
        self._now = now
        item = self.queued.pop(key, None)
        if item is None:
            return
        own = self._queued_by_tenant[item.tenant_id]
        del own[key]
        keys = self._queued_by_request[item.request_id]
        keys.discard(key)
        if not keys:
            del self._queued_by_request[item.request_id]
        if not own:
            self.fair.on_idle(item.tenant_id, now)

    def order(self, items: Sequence[QueuedWork], now: float) -> list[QueuedWork]:
        """Items in service order: the fair-share policy's, with strict-priority tenants'
        items moved ahead of lower classes (``strict``); changes nothing."""
        self._now = now
        return self._strict_order(self.fair.order(items, now))

    def _strict_order(self, fair_order: Sequence[QueuedWork]) -> list[QueuedWork]:
        lead = self.config.strict_priority_lead * COUNTER_SCALE
        return strict_order(fair_order, self._strict, self.fair.counters(), self._weights, lead)

    def queue_key(self, item: QueuedWork) -> tuple:
        """How the fair-share policy sorts one tenant's own items."""
        return self.fair.queue_key(item)

    def select(
        self, heads: Mapping[str, Sequence[QueuedWork]], limit: int, now: float
    ) -> list[QueuedWork]:
        """The next ``limit`` items of a pending queue in service order; changes nothing.
        With a strict-priority tenant waiting, all the heads are ordered (its lifted items
        are among its own heads, which are sorted by class)."""
        self._now = now
        if not self._strict.intersection(t for t, own in heads.items() if own):
            return self.fair.select(heads, limit, now)
        everything = self.fair.select(heads, sum(len(own) for own in heads.values()), now)
        return self._strict_order(everything)[:limit]

    def charge(self, tenant_id: str, cost_units: int, now: float, key: str | None = None) -> None:
        """A step was dispatched: charge its tenant and take the step off the queue books.

        Without ``key`` the step is matched to the tenant's queued step of the same cost that
        the policy would serve first (or to its first step when none costs exactly that)."""
        self._now = now
        item = self.queued.get(key) if key is not None else self._match(tenant_id, cost_units, now)
        self.fair.charge(tenant_id, cost_units, now)
        if item is None:
            return
        run = self.runs.get(item.request_id)
        if run is not None and not run.started:
            run.started = True
            self._waiting[run.tenant_id] -= 1
        self.on_dequeue(item.key, now)

    def _match(self, tenant_id: str, cost_units: int, now: float) -> QueuedWork | None:
        own = list(self._queued_by_tenant.get(tenant_id, {}).values())
        if not own:
            return None
        same = [it for it in own if it.cost_units == cost_units] or own
        return self.fair.order(same, now)[0]

    # -- headroom, reclaim, explanations -----------------------------------------------------

    def headroom_check(
        self, device_id: str, priority_class: str, usage: Mapping[str, PoolUsage]
    ) -> HeadroomDecision:
        return self.headroom.check(device_id, priority_class, usage)

    def reclaims(self, now: float, produced_output: Set[str]) -> list[ReclaimOrder]:
        """Borrowed runs to preempt so owners get their nominal quota back. Runs in
        ``produced_output`` are never named. Each run is named once; release it after."""
        self._now = now
        return [
            ReclaimOrder(rid, reason) for rid, reason in self.ledger.reclaims(now, produced_output)
        ]

    def explain(self, request_id: str, now: float, positions: QueuePositions | None = None) -> str:
        """A sentence saying why the request waits, runs, or was refused. ``positions`` (from
        :meth:`queue_positions` at ``now``) is for views that explain many requests at once."""
        self._now = now
        return explain_run(self, request_id, now, positions)

    def queue_positions(self, now: float) -> QueuePositions:
        """Every queued request's place in the fair-share order now (one O(n log n) ordering)."""
        self._now = now
        return queue_positions(self, now)

    def next_wakeup(self, now: float) -> float | None:
        """Always None: tenancy decisions change only on events; refusals carry retry-after."""
        return None

    def weight(self, tenant_id: str) -> int:
        return self._weights.get(tenant_id, 1)

    def rejection(self, request_id: str) -> Rejected | None:
        return self._rejections.get(request_id)

    def least_served(self) -> str | None:
        """The backlogged tenant with the smallest counter (None without counters/backlog)."""
        counters = self.fair.counters()
        backlogged = [t for t, own in self._queued_by_tenant.items() if own and t in counters]
        return min(backlogged, key=lambda t: (counters[t], t)) if backlogged else None

    def snapshot(self) -> TenancySnapshot:
        """Immutable view as of the last ``now`` seen."""
        return snapshot_of(self)
