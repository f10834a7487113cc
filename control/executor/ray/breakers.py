"""The replicas' circuit breakers on the Ray executor: the local executor's
:class:`~control.executor.host.breaker.Breakers` (one per replica, ``BreakerChanged`` on each
change of state), asked the way the Ray flow asks them: at ``submit`` (:meth:`refusal`) and
when a batch ended (:meth:`ended`)."""

from __future__ import annotations

from control.executor.host.breaker import Breakers
from control.executor.protocol import ItemResult


class ReplicaBreakers(Breakers):
    def refusal(self, replica_id: str, now: float) -> str | None:
        """Why a batch for ``replica_id`` is refused now (its breaker is open, or half-open
        with its probe in flight), or None: it may go (when half-open, as the probe)."""
        allowed, why = self.allow(replica_id, now)
        return None if allowed else why

    def ended(self, replica_id: str, results: list[ItemResult], now: float) -> None:
        """A batch of ``replica_id`` ended with ``results``: only failures about the replica
        count against it (:func:`~control.executor.host.breaker.batch_outcome`); a batch whose
        items were all cancelled says nothing, but a probe is over."""
        ran = [r for r in results if r.cause != "cancelled"]
        if ran:
            self.record_results(replica_id, ran, now)
        else:
            self.of(replica_id).settle()
