"""Sentences that say why a request waits, runs or was refused.

The console shows these next to a queued request, e.g. "queued: position 4 of 12 in fair-share
order; tenant beta is 1,840 units ahead of the least served tenant alpha; tokens_per_min 5,200
used of 6,000 nominal, 0 borrowed".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from control.core.tenancy.base import QueuePositions
from control.core.tenancy.fairshare.base import COUNTER_SCALE

if TYPE_CHECKING:
    from control.core.tenancy.manager import TenancyManager


def _counter_clause(mgr: TenancyManager, tenant_id: str) -> str | None:
    counters = mgr.fair.counters()
    if tenant_id not in counters:
        return None
    least = mgr.least_served()
    if least is None or least == tenant_id:
        return f"tenant {tenant_id} is the least served tenant (weight {mgr.weight(tenant_id)})"
    ahead = (counters[tenant_id] - counters[least]) // COUNTER_SCALE
    return (
        f"tenant {tenant_id} (weight {mgr.weight(tenant_id)}) is {ahead:,} weighted units "
        f"ahead of the least served tenant {least} (weight {mgr.weight(least)})"
    )


def _quota_clauses(mgr: TenancyManager, tenant_id: str, now: float) -> list[str]:
    return [
        f"{u.resource} {u.used:,} used of {u.nominal:,} nominal, {u.borrowed:,} borrowed"
        for u in mgr.ledger.uses(tenant_id, now)
    ]


def queue_positions(mgr: TenancyManager, now: float) -> QueuePositions:
    """The service order (fair share, strict priority) of every queued item, as positions by
    request."""
    ordered = mgr.order(list(mgr.queued.values()), now)
    first: dict[str, int] = {}
    for index, item in enumerate(ordered):
        first.setdefault(item.request_id, index)
    return QueuePositions(first, len(ordered))


def _position_clause(mgr: TenancyManager, request_id: str, positions: QueuePositions) -> str | None:
    index = positions.first_index.get(request_id)
    if index is None:
        return None
    return f"position {index + 1} of {positions.total} in {mgr.fair.name} order"


def explain_run(
    mgr: TenancyManager, request_id: str, now: float, positions: QueuePositions | None = None
) -> str:
    """Why ``request_id`` is where it is. Reads the manager; changes nothing but window expiry.
    ``positions`` (from :func:`queue_positions` at ``now``) saves ordering the queue again."""
    refusal = mgr.rejection(request_id)
    run = mgr.runs.get(request_id)
    if run is None:
        if refusal is not None:
            return f"rejected: {refusal.reason}; retry after {refusal.retry_after_s:g} s"
        return f"request {request_id} is not admitted or has finished"
    if positions is None:
        positions = queue_positions(mgr, now)
    position = _position_clause(mgr, request_id, positions)
    if position is None:
        state = "running" if run.started else "admitted, no step queued yet"
        if run.borrowed:
            state += " on borrowed quota (preemptible until its first output)"
        return f"{state}; " + "; ".join(_quota_clauses(mgr, run.tenant_id, now) or ["no quota"])
    parts = [f"queued: {position}"]
    counter = _counter_clause(mgr, run.tenant_id)
    if counter:
        parts.append(counter)
    parts.extend(_quota_clauses(mgr, run.tenant_id, now))
    parts.extend(mgr.headroom.held_back(run.priority_class))
    if run.borrowed:
        parts.append("admitted on borrowed quota, preemptible until its first output")
    return "; ".join(parts)
