"""The runs a quota ledger has admitted: what each holds, and which borrowed ones are reclaimed.

``QuotaLedger`` (``control.core.tenancy.quota``) keeps the amounts (usage per tenant and
resource) and the cohort arithmetic; ``Holds`` keeps the admitted runs themselves: the tenant
and resources of each, whether it was admitted on borrowed quota, and which borrowed runs were
named for reclaim (their usage stops counting until they are released).
"""

from __future__ import annotations

from collections.abc import Set

from control.core.values import record


@record
class Hold:
    """One admitted run: its tenant, whether on borrowed quota, when, and the resources it
    is charged on."""

    tenant_id: str
    borrowed: bool
    admitted_at: float
    resources: tuple[str, ...] = ()


class Holds:
    """Admitted runs by request id. ``by_id`` and ``reclaiming`` are read by the ledger's
    usage sums; they change only through the methods."""

    def __init__(self) -> None:
        self.by_id: dict[str, Hold] = {}
        #: borrowed runs named for reclaim, until released
        self.reclaiming: set[str] = set()
        # ids of holds admitted on borrowed quota: ``reclaim_candidates`` runs every core step
        # and must not scan every admitted run when (as usually) nothing is borrowed
        self._borrowed_ids: set[str] = set()

    def add(self, request_id: str, hold: Hold) -> None:
        self.by_id[request_id] = hold
        if hold.borrowed:
            self._borrowed_ids.add(request_id)

    def pop(self, request_id: str) -> Hold | None:
        """Forget a run (it ended); None if it was not held."""
        hold = self.by_id.pop(request_id, None)
        if hold is None:
            return None
        self.reclaiming.discard(request_id)
        self._borrowed_ids.discard(request_id)
        return hold

    def name_for_reclaim(self, request_id: str) -> None:
        """``request_id`` (a borrowed run) is to be preempted: its usage stops counting, and
        it is no candidate again."""
        self.reclaiming.add(request_id)

    def reclaim_candidates(self, produced_output: Set[str]) -> list[str]:
        """Borrowed runs not yet named for reclaim and without output, newest first (least
        work is lost)."""
        if not self._borrowed_ids:
            return []
        by_id = self.by_id
        candidates = sorted(
            (by_id[rid].admitted_at, rid)
            for rid in self._borrowed_ids
            if rid not in self.reclaiming and rid not in produced_output
        )
        return [rid for _, rid in reversed(candidates)]
