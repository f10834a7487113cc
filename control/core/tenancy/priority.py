"""Order of a tenant's own work: priority class first, then deadline, then arrival.

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

    Raises ValueError (from ``priority_rank``) naming an unknown priority class.
    """
    deadline = item.deadline if item.deadline is not None else math.inf
    return (priority_rank(item.priority_class), deadline, item.arrival, item.key)


def fifo_key(item: QueuedWork) -> tuple[float, str]:
    """Plain arrival order with the step key as a deterministic tie-break."""
    return (item.arrival, item.key)
