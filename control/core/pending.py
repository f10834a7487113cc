"""A model's pending queue: ready steps not yet bound to a replica (late binding).

Steps wait here, per tenant, sorted by the tenancy half's ``queue_key``; ``take`` asks the
tenancy half (``select``) for the next items in fair-share order, giving it only each tenant's
leading ``limit`` items, so taking k steps costs O(tenants x k) and never orders the whole queue.
The queue keeps the predicted service time of everything in it (``us``) so that routing can
price the backlog without scanning it.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Generic, Protocol, TypeVar

from control.core.tenancy.base import QueuedWork, TenancyPolicy


class PendingStep(Protocol):
    """What a pending queue reads of a step: ``control.core.state.QueuedStep`` in the core."""

    key: str
    work: QueuedWork
    est_us: int


S = TypeVar("S", bound=PendingStep)


class PendingQueue(Generic[S]):
    """Unbound steps of one model. Entries are (queue key, seq, step); seq breaks ties so a
    step is never compared."""

    __slots__ = ("model_key", "by_tenant", "entries", "us", "_seq")

    def __init__(self, model_key: str) -> None:
        self.model_key = model_key
        self.by_tenant: dict[str, list[tuple[tuple, int, S]]] = {}
        self.entries: dict[str, tuple[tuple, int, S]] = {}
        self.us = 0  # predicted service time (us, one item's share of a full batch) of all steps
        self._seq = 0

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def push(self, step: S, tenancy: TenancyPolicy) -> None:
        """Add a step (its ``est_us`` already set). Raises ValueError for a step already here."""
        if step.key in self.entries:
            raise ValueError(f"step {step.key!r} is already pending for {self.model_key}")
        self._seq += 1
        entry = (tenancy.queue_key(step.work), self._seq, step)
        own = self.by_tenant.get(step.work.tenant_id)
        if own is None:
            self.by_tenant[step.work.tenant_id] = [entry]
        elif own[-1] < entry:  # the common case: newer work sorts last
            own.append(entry)
        else:
            insort(own, entry)
        self.entries[step.key] = entry
        self.us += step.est_us

    def rekey(self, tenancy: TenancyPolicy) -> None:
        """Sort every tenant's steps again by ``tenancy``'s ``queue_key``: after the fair-share
        policy was replaced, the keys the steps were filed under are the old policy's."""
        for own in self.by_tenant.values():
            own[:] = sorted((tenancy.queue_key(step.work), seq, step) for _, seq, step in own)
            for entry in own:
                self.entries[entry[2].key] = entry

    def remove(self, step: S) -> bool:
        """Drop one step (cancelled run, re-routed); False when it is not here."""
        entry = self.entries.pop(step.key, None)
        if entry is None:
            return False
        tenant = step.work.tenant_id
        own = self.by_tenant[tenant]
        del own[bisect_left(own, entry)]
        if not own:
            del self.by_tenant[tenant]
        self.us -= step.est_us
        return True

    def take(
        self, limit: int, tenancy: TenancyPolicy, now: float,
        classes: frozenset[str] | None = None,
    ) -> list[S]:  # fmt: skip
        """Remove and return up to ``limit`` steps in the tenancy half's service order; with
        ``classes``, only steps of those priority classes (what a reserved replica may take)."""
        if limit <= 0 or not self.entries:
            return []
        if classes is None:
            heads = {t: [e[2].work for e in own[:limit]] for t, own in self.by_tenant.items()}
        else:
            heads = self._heads_of(limit, classes)
            if not heads:
                return []
        chosen = tenancy.select(heads, limit, now)
        entries = self.entries
        steps = [entries[w.key][2] for w in chosen]
        mine: dict[str, list[S]] = {}
        for s in steps:
            own_taken = mine.get(s.work.tenant_id)
            if own_taken is None:
                mine[s.work.tenant_id] = [s]
            else:
                own_taken.append(s)
        for tenant, taken in mine.items():
            own = self.by_tenant[tenant]
            count = len(taken)
            if {e[2].key for e in own[:count]} == {s.key for s in taken}:
                del own[:count]  # a policy serves a tenant's items in queue_key order
            else:
                keys = {s.key for s in taken}
                own[:] = [e for e in own if e[2].key not in keys]
            if not own:
                del self.by_tenant[tenant]
        for s in steps:
            del entries[s.key]
            self.us -= s.est_us
        return steps

    def _heads_of(self, limit: int, classes: frozenset[str]) -> dict[str, list[QueuedWork]]:
        """Each tenant's leading ``limit`` steps of the priority ``classes`` (tenants with
        none left out)."""
        heads: dict[str, list[QueuedWork]] = {}
        for tenant, own in self.by_tenant.items():
            picked: list[QueuedWork] = []
            for e in own:
                work = e[2].work
                if work.priority_class in classes:
                    picked.append(work)
                    if len(picked) >= limit:
                        break
            if picked:
                heads[tenant] = picked
        return heads

    def ordered(self, tenancy: TenancyPolicy, now: float) -> list[S]:
        """Every step in service order, without removing any (for snapshots: O(n log n))."""
        heads = {t: [e[2].work for e in own] for t, own in self.by_tenant.items()}
        return [self.entries[w.key][2] for w in tenancy.select(heads, len(self.entries), now)]
