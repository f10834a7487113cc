"""Contract between the orchestration half of the core and its tenancy half.

The orchestration half (``control.core.engine.ControlCore``) owns runs, DAG progress, queues,
routing and batching. The tenancy half owns everything that depends on *who* asks: admission
(token buckets, concurrency caps, bounded queues), quotas with cohorts and borrowing, fair share
between tenants, headroom reservations, priority classes and preemption of borrowed work.

``ControlCore.step(now)`` calls the tenancy half at fixed points, in this order:

1. ``admit`` for every submitted request (a refusal becomes a ``Reject`` action);
2. ``on_enqueue`` when a ready step enters a queue (a model's pending queue or a replica's);
3. ``order`` when a local scheduler forms a batch: the queue is taken in the returned order;
   ``select`` when free replicas take work from a model's pending (not yet bound) queue;
4. ``headroom_check`` before a step is dispatched on a device of a reserved pool;
5. ``charge`` when a step is dispatched (cost units from :class:`CostModel`, and the step key);
6. ``on_dequeue`` when a queued step leaves a queue without being dispatched (cancelled, moved);
7. ``reclaims`` once per step, to preempt borrowed work whose owner wants its quota back;
8. ``release`` when a run ends (success, failure, rejection after admission, preemption).

All methods are pure state transitions: no I/O, no clock reads; ``now`` is seconds on the
driver's clock. Quantities are integers (tokens, cost units, milli-fractions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Protocol

from control.core.values import keeps_dict, value

#: Priority classes, most urgent first. Order within a tenant follows this rank.
PRIORITY_CLASSES: tuple[str, ...] = ("critical", "standard", "batch")


_RANKS = {c: i for i, c in enumerate(PRIORITY_CLASSES)}


def priority_rank(priority_class: str) -> int:
    """Rank of a class (0 = most urgent). Raises ValueError naming an unknown class."""
    rank = _RANKS.get(priority_class)
    if rank is None:
        raise ValueError(
            f"unknown priority class {priority_class!r}; expected one of {PRIORITY_CLASSES}"
        )
    return rank


@value
class AdmissionRequest:
    """What admission needs to know about one workflow run before it starts."""

    request_id: str
    tenant_id: str
    priority_class: str
    est_tokens: int  # input + expected output tokens over all nodes of the run
    est_cost_units: int  # the same in the common cost scale (see CostModel)
    arrival: float
    deadline: float | None = None


@value
class Admitted:
    request_id: str
    borrowed: bool  # admitted on quota borrowed in the cohort: preemptible until first output
    reason: str


@value
class Rejected:
    request_id: str
    reason: str  # a sentence a person can read, e.g. "tenant acme is over its 6000 tokens/min"
    retry_after_s: float  # > 0: when a retry could succeed


AdmissionDecision = Admitted | Rejected


@value
class QueuedWork:
    """One step of a run waiting in a local queue; fair share orders these."""

    key: str  # unique step key (run id, node id, attempt)
    request_id: str
    tenant_id: str
    priority_class: str
    arrival: float  # when the step became ready
    cost_units: int  # estimated cost of this step in the common scale
    deadline: float | None = None
    #: set under ``step_order: critical_path`` (``control.core.step_order``): the latest start
    #: that lets its run end in time given the predicted work still ahead of it; a tenant's
    #: items of one class sort by it instead of by deadline and arrival. None: today's order
    order_at: float | None = None


@dataclass(frozen=True)
class PoolUsage:
    """Occupancy of one device, in batch slots, as the orchestration half sees it now."""

    device_id: str
    capacity_slots: int
    used_slots: int
    used_slots_preemptible: int = 0


@dataclass(frozen=True)
class HeadroomDecision:
    allowed: bool
    preemptible: bool  # allowed only as preemptible work inside someone else's reservation
    reason: str


@value
class ReclaimOrder:
    """Preempt this run: its borrowed quota is reclaimed by the owner."""

    request_id: str
    reason: str


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class TenantSpec:
    tenant_id: str
    weight: int  # fair-share weight, > 0 (integers; ratios between tenants matter)
    priority_class: str = "standard"  # default class of the tenant's requests
    cohort: str | None = None
    status: str = "active"
    # Its items overtake other tenants' lower-class items, within a bounded lead (see strict.py)
    strict_priority: bool = False
    #: default quality class of its requests (None: from the priority class) and whether the
    #: core may run its steps on a cheaper precision variant when the preferred one is saturated
    quality: str | None = None
    allow_degrade: bool = False


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class QuotaSpec:
    """Quota of one tenant on one resource (tokens_per_min, requests_per_min, concurrent_requests, ...)."""

    tenant_id: str
    resource: str
    nominal: int
    borrowing_limit: int | None = None  # None: may borrow without limit inside the cohort
    lending_limit: int | None = None  # None: may lend all its idle nominal quota
    period_s: int = 60


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class HeadroomSpec:
    reservation_id: str
    device_ids: frozenset[str]  # the pool the selector matched
    reserved_milli: int  # reserved fraction of the pool capacity in thousandths (150 = 15%)
    allowed_classes: frozenset[str]
    borrowable: bool  # others may use it, preemptibly


@dataclass(frozen=True)
class TenancyConfig:
    tenants: tuple[TenantSpec, ...] = ()
    quotas: tuple[QuotaSpec, ...] = ()
    headroom: tuple[HeadroomSpec, ...] = ()


@dataclass(frozen=True)
class QueuePositions:
    """Where each queued request stands in the fair-share order at one instant: its first
    item's index (0-based) among ``total`` queued items. Ordering the queue costs
    O(n log n); a view that explains every queued request gets this once, not per request
    (per request it made a snapshot quadratic in the backlog and stalled the live driver)."""

    first_index: Mapping[str, int]
    total: int


class TenancyPolicy(Protocol):
    """The tenancy half of the core. Implementations keep their own state."""

    def configure(self, config: TenancyConfig, now: float) -> None: ...

    def admit(self, req: AdmissionRequest, now: float) -> AdmissionDecision: ...

    def release(
        self, request_id: str, used_tokens: int, used_cost_units: int, now: float
    ) -> None: ...

    def on_enqueue(self, item: QueuedWork, now: float) -> None: ...

    def on_dequeue(self, key: str, now: float) -> None: ...

    def order(self, items: Sequence[QueuedWork], now: float) -> list[QueuedWork]: ...

    def queue_key(self, item: QueuedWork) -> tuple:
        """Sort key of one tenant's queued items; ``order`` and ``select`` respect it."""
        ...

    def select(
        self, heads: Mapping[str, Sequence[QueuedWork]], limit: int, now: float
    ) -> list[QueuedWork]:
        """First ``limit`` items of ``order`` over a pending queue, from each tenant's leading
        items (its first ``limit``, or all, sorted by ``queue_key``). Changes nothing."""
        ...

    def charge(self, tenant_id: str, cost_units: int, now: float, key: str | None = None) -> None:
        """Charge a dispatched step. Pass the step's ``key`` so the tenancy half knows the step
        left its queue (it tracks who is backlogged); without it the step is matched by cost."""
        ...

    def headroom_check(
        self, device_id: str, priority_class: str, usage: Mapping[str, PoolUsage]
    ) -> HeadroomDecision: ...

    def reclaims(self, now: float, produced_output: Set[str]) -> list[ReclaimOrder]: ...

    def explain(self, request_id: str, now: float, positions: QueuePositions | None = None) -> str:
        """Why the request waits, runs or was refused. ``positions`` (``queue_positions`` at
        ``now``) spares ordering the queue again for each of many explanations."""
        ...

    def queue_positions(self, now: float) -> QueuePositions: ...

    def next_wakeup(self, now: float) -> float | None: ...

    def snapshot(self) -> object: ...
