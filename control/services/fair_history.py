"""Fair share over time: the gateway samples the live core's tenancy snapshot every second or
so into a bounded ring buffer, so that an operator can see each tenant's received versus
entitled share, queue depth, borrowing and preemptions over the last minutes.

Plumbing only: every figure is read from the core's snapshot (the tenancy half's counters and
weights, the waiting steps, the runs) and from the runtime's preemption counter; nothing here
decides anything. A sample's ``received`` share is the tenant's part of the weighted service
charged since the previous sample; its ``entitled`` share is its weight over the weights of the
tenants that were active in that interval (served, waiting or running), as the fair-share policy
divides service among backlogged tenants.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from control.clock import wall_time

log = logging.getLogger(__name__)


class FairShareHistory:
    """The last ``capacity`` samples, oldest first; a sample is a JSON-ready dict
    ``{"at": epoch s, "core_now": s, "tenants": [row, ...]}`` (rows: see :func:`tenant_rows`)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity!r}: must be >= 1")
        self._samples: deque[dict[str, Any]] = deque(maxlen=capacity)

    def add(self, sample: dict[str, Any]) -> None:
        self._samples.append(sample)

    def since(self, at: float) -> list[dict[str, Any]]:
        """The samples taken at or after epoch second ``at``, oldest first."""
        return [s for s in self._samples if s["at"] >= at]

    def __len__(self) -> int:
        return len(self._samples)


def _waiting_by_tenant(snap: Any) -> dict[str, int]:
    """Steps waiting per tenant: in replica queues, pending (unbound) and unplaced."""
    steps = [s for q in snap.queues.values() for s in q] + list(snap.unplaced)
    steps += [s for q in getattr(snap, "pending", {}).values() for s in q]
    counts: dict[str, int] = {}
    for step in steps:
        counts[step.tenant_id] = counts.get(step.tenant_id, 0) + 1
    return counts


def tenant_rows(
    snap: Any, before: Mapping[str, int], preempted: Mapping[str, int]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One row per tenant of ``snap`` (a ``CoreSnapshot``) and the weighted service totals to
    pass as ``before`` next time. ``before``: each tenant's weighted service (counter x weight,
    milli units) at the previous sample; ``preempted``: steps preempted so far per tenant."""
    tenancy = snap.tenancy
    waiting = _waiting_by_tenant(snap)
    service = {t.tenant_id: (t.counter_milli or 0) * t.weight for t in tenancy.tenants}
    served = {t: max(0, v - before.get(t, v)) for t, v in service.items()}
    active = [t for t in tenancy.tenants
              if served[t.tenant_id] or waiting.get(t.tenant_id) or t.in_flight_runs
              or t.waiting_runs]  # fmt: skip
    total_served = sum(served.values())
    total_weight = sum(t.weight for t in active)
    rows = []
    for t in tenancy.tenants:
        is_active = t in active
        rows.append({
            "tenant": t.tenant_id, "weight": t.weight,
            "received": served[t.tenant_id] / total_served if total_served else 0.0,
            "entitled": t.weight / total_weight if is_active and total_weight else 0.0,
            "served_milli": served[t.tenant_id], "queued_steps": waiting.get(t.tenant_id, 0),
            "waiting_runs": t.waiting_runs, "in_flight_runs": t.in_flight_runs,
            "borrowed_runs": t.borrowed_runs, "preempted_total": preempted.get(t.tenant_id, 0),
        })  # fmt: skip
    return rows, service


def preempted_by_tenant(metrics: Any) -> dict[str, int]:
    """Steps preempted so far per tenant, from the runtime's ``legato_preemptions`` counter
    (empty when the runtime keeps none)."""
    counter = getattr(metrics, "preemptions", None)
    if counter is None:
        return {}
    out: dict[str, int] = {}
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                tenant = sample.labels.get("tenant", "")
                out[tenant] = out.get(tenant, 0) + int(sample.value)
    return out


class FairShareSampler:
    """Samples ``snapshot()`` every ``every_s`` seconds into ``history`` on the running loop.

    ``snapshot`` raises while the runtime is not running (that tick is skipped); ``metrics``
    is the runtime's (for preemptions). :meth:`ensure_started` is idempotent: the gateway's
    lifespan starts it with the app, and routes that read the history start it when a test
    runs the live path without the app's lifespan."""

    def __init__(self, snapshot: Callable[[], Any], metrics: Callable[[], Any],
                 history: FairShareHistory, every_s: float) -> None:  # fmt: skip
        if every_s <= 0:
            raise ValueError(f"every_s={every_s!r}: must be > 0")
        self.history, self.every_s = history, every_s
        self._snapshot, self._metrics = snapshot, metrics
        self._before: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    def ensure_started(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def sample_now(self) -> None:
        """Take one sample (skipped, with a debug line, while no runtime runs)."""
        try:
            snap = self._snapshot()
        except Exception as exc:  # the runtime is not running (yet, or any more)
            log.debug("fair-share sample skipped: %s", exc)
            return
        rows, self._before = tenant_rows(snap, self._before, preempted_by_tenant(self._metrics()))
        self.history.add({"at": wall_time(), "core_now": snap.now, "tenants": rows})

    async def _loop(self) -> None:
        while True:
            try:
                self.sample_now()
            except Exception:  # one bad sample must not end the history for good
                log.exception("fair-share sample failed; the next tick tries again")
            await asyncio.sleep(self.every_s)
