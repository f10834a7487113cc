"""Strict priority across tenants: an operator's bounded exception to fair share.

Fair share picks *which tenant* is served next and a priority class orders only that tenant's
own items (see ``priority``). A tenant the operator marks ``strict_priority`` (``TenantSpec``)
also orders work *across* tenants: its item overtakes another tenant's item of a lower class
(its critical step goes ahead of another tenant's standard or batch step) even when fair share
would serve that other tenant first. The rules:

* only a class ranked strictly above the overtaken item's class overtakes: a strict tenant's
  critical step never overtakes another tenant's critical step (fair share orders those), and
  a tenant without the flag is never moved ahead of anyone by this rule;
* charging is unchanged: an overtaking step counts against the tenant's fair-share virtual
  time as usual, so the others catch up once its urgent work is done;
* bound: a strict tenant overtakes only while its virtual time is less than ``lead`` (milli
  cost units per unit of weight) ahead of the least-served other tenant waiting in the same
  queue. Past that its work waits its fair turn again, so it delays the others by at most
  ``lead`` of its own weighted service plus one step: it cannot starve them;
* it needs a policy that keeps virtual time (VTC); under the ``fcfs`` and ``rate_limit``
  baselines, which have no counters, the order is left as the baseline gives it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence, Set

from control.core.tenancy.base import PRIORITY_CLASSES, QueuedWork, priority_rank
from control.core.tenancy.fairshare.base import COUNTER_SCALE


def strict_order(
    fair_order: Sequence[QueuedWork],
    strict: Set[str],
    counters: Mapping[str, int],
    weights: Mapping[str, int],
    lead_milli: int,
) -> list[QueuedWork]:
    """``fair_order`` (a fair-share policy's service order, each tenant's items by class) with
    the items of ``strict`` tenants moved ahead as the module docstring says. ``counters`` are
    the policy's virtual times (milli-units per weight); ``weights`` default to 1. Pure."""
    if not counters or not any(item.tenant_id in strict for item in fair_order):
        return list(fair_order)
    virtual = {item.tenant_id: counters.get(item.tenant_id, 0) for item in fair_order}
    remaining: dict[str, int] = {}
    lifted: dict[str, list[deque[int]]] = {}  # strict tenant -> per class rank, fair positions
    for index, item in enumerate(fair_order):
        remaining[item.tenant_id] = remaining.get(item.tenant_id, 0) + 1
        if item.tenant_id in strict:
            ranks = lifted.setdefault(item.tenant_id, [deque() for _ in PRIORITY_CLASSES])
            ranks[priority_rank(item.priority_class)].append(index)
    taken = [False] * len(fair_order)
    ordered: list[QueuedWork] = []
    head = 0
    while len(ordered) < len(fair_order):
        while taken[head]:
            head += 1
        overtaker = _overtaker(fair_order[head], lifted, taken, virtual, remaining, lead_milli)
        chosen = head if overtaker is None else overtaker
        item = fair_order[chosen]
        taken[chosen] = True
        ordered.append(item)
        remaining[item.tenant_id] -= 1
        virtual[item.tenant_id] += item.cost_units * COUNTER_SCALE // weights.get(item.tenant_id, 1)
    return ordered


def _overtaker(
    head: QueuedWork,
    lifted: Mapping[str, list[deque[int]]],
    taken: list[bool],
    virtual: Mapping[str, int],
    remaining: Mapping[str, int],
    lead_milli: int,
) -> int | None:
    """Fair position of the strict item that goes before ``head``: the best class above the
    head's, first in fair order among strict tenants within their lead; None when none."""
    head_rank = priority_rank(head.priority_class)
    best: tuple[int, int] | None = None
    for tenant_id, ranks in lifted.items():
        if tenant_id == head.tenant_id or not _within_lead(
            tenant_id, virtual, remaining, lead_milli
        ):
            continue
        for rank in range(head_rank):
            queue = ranks[rank]
            while queue and taken[queue[0]]:
                queue.popleft()
            if queue:
                best = min(best or (rank, queue[0]), (rank, queue[0]))
                break
    return None if best is None else best[1]


def _within_lead(
    tenant_id: str, virtual: Mapping[str, int], remaining: Mapping[str, int], lead_milli: int
) -> bool:
    """True while the tenant is less than ``lead_milli`` ahead of the least-served other
    tenant that still has items waiting here."""
    others = [v for t, v in virtual.items() if t != tenant_id and remaining[t] > 0]
    return bool(others) and virtual[tenant_id] - min(others) < lead_milli
