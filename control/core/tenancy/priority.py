"""Order of a tenant's own work: priority class first, then deadline, then arrival (under
critical-path order: class, then each step's latest start; see ``control.core.step_order``).

Fair share decides *which tenant* is served next; this key decides *which of its items*. Keeping
the two apart is what makes priorities live "inside" fairness: a tenant's critical work overtakes
its own batch work, never another tenant's share. The one exception is an operator's: a tenant
marked ``strict_priority`` also overtakes other tenants' lower classes, within a bound (``strict``).
"""

from __future__ import annotations

import math

from control.core.tenancy.base import QueuedWork, priority_rank


def within_tenant_key(item: QueuedWork) -> tuple[int, float, float, str]:
    """Sort key for items of one tenant: class rank, deadline (none = last), arrival, key.

    An item with ``order_at`` (critical-path order, ``control.core.step_order``): class rank,
    items with a deadline before those without (as above), ``order_at`` (its latest start:
    deadline or run start, less the predicted work ahead of it), key.
    Raises ValueError (from ``priority_rank``) naming an unknown priority class.
    """
    rank = priority_rank(item.priority_class)
    if item.order_at is not None:
        return (rank, 0.0 if item.deadline is not None else math.inf, item.order_at, item.key)
    deadline = item.deadline if item.deadline is not None else math.inf
    return (rank, deadline, item.arrival, item.key)


def fifo_key(item: QueuedWork) -> tuple[float, str]:
    """Plain arrival order with the step key as a deterministic tie-break (``order_at`` in
    place of arrival under critical-path order)."""
    return (item.order_at if item.order_at is not None else item.arrival, item.key)
