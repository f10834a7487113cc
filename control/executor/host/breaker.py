"""Circuit breaker per replica: stop sending work after repeated failures, probe before reopening.

Pure state machine (time is passed in as ``now`` seconds). The executor asks ``allow(now)``
before dispatching a batch to the replica and reports each batch's outcome with
``record(ok, now)``, or ``settle()`` for a batch that says nothing about the replica.

Only failures about the replica count (``REPLICA_FAULTS``: the model raised, the batch hung).
A batch whose failed items are all about something else (a bad input of one tenant, an input
lost with another worker) is not a failure: another tenant's bad text must never open the
breaker that serves everyone. :func:`batch_outcome` sorts a batch's results that way.

closed --(failure_threshold consecutive failures)--> open --(cooldown_s elapsed)--> half_open
half_open --(probe succeeds)--> closed;  half_open --(probe fails)--> open (cooldown restarts)
In half_open exactly one batch (the probe) is let through until its outcome is recorded.

:class:`Breakers` keeps one per replica for the host side of an executor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from control.executor.protocol import REPLICA_FAULTS, BreakerChanged, ItemResult


@dataclass(frozen=True)
class BreakerConfig:
    failure_threshold: int = 3  # consecutive failed batches that open the breaker
    cooldown_s: float = 5.0  # how long an open breaker refuses work before one probe

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, got {self.failure_threshold}")
        if self.cooldown_s <= 0:
            raise ValueError(f"cooldown_s must be > 0, got {self.cooldown_s}")


class CircuitBreaker:
    def __init__(self, config: BreakerConfig = BreakerConfig()) -> None:
        self.config = config
        self.state = "closed"
        self.failures = 0
        self.opened_at = 0.0
        self.probe_in_flight = False

    def allow(self, now: float) -> tuple[bool, str]:
        """Whether a batch may go now, and why. May move open -> half_open (takes the probe)."""
        if self.state == "closed":
            return True, "closed"
        if self.state == "open":
            if now - self.opened_at < self.config.cooldown_s:
                wait = self.config.cooldown_s - (now - self.opened_at)
                return False, f"circuit open after {self.failures} failures; probe in {wait:.1f}s"
            self.state = "half_open"
        if self.probe_in_flight:
            return False, "circuit half-open: waiting for the probe batch"
        self.probe_in_flight = True
        return True, "circuit half-open: this batch is the probe"

    def record(self, ok: bool, now: float) -> str | None:
        """Record a batch outcome; returns the new state when it changed, else None."""
        before = self.state
        self.probe_in_flight = False
        if ok:
            self.failures = 0
            self.state = "closed"
        else:
            self.failures += 1
            if self.state == "half_open" or self.failures >= self.config.failure_threshold:
                self.state = "open"
                self.opened_at = now
        return self.state if self.state != before else None

    def settle(self) -> None:
        """A batch ended that says nothing about the replica (every failure in it was about
        something else, and nothing ran ok): counts neither way, but a probe is over."""
        self.probe_in_flight = False


def batch_outcome(results: list[ItemResult]) -> bool | None:
    """What a batch's results say about its replica: False when one failed for a replica
    fault, True when one succeeded, None when neither (only bad inputs, lost inputs)."""
    if any(r.cause in REPLICA_FAULTS for r in results):
        return False
    if any(r.ok for r in results):
        return True
    return None


class Breakers:
    """One :class:`CircuitBreaker` per replica, made on first use; a change of state is
    reported as a :class:`BreakerChanged` event through ``emit``."""

    def __init__(self, config: BreakerConfig, emit: Callable[[BreakerChanged], None]) -> None:
        self.config = config
        self._emit = emit
        self._by_replica: dict[str, CircuitBreaker] = {}

    def of(self, replica_id: str) -> CircuitBreaker:
        breaker = self._by_replica.get(replica_id)
        if breaker is None:
            breaker = self._by_replica[replica_id] = CircuitBreaker(self.config)
        return breaker

    def allow(self, replica_id: str, now: float) -> tuple[bool, str]:
        """Whether a batch for ``replica_id`` may go now, and why (see CircuitBreaker.allow)."""
        return self.of(replica_id).allow(now)

    def record(self, replica_id: str, ok: bool, now: float) -> None:
        """A batch of ``replica_id`` ended (ok: none of its items failed for a replica fault)."""
        changed = self.of(replica_id).record(ok, now)
        if changed is not None:
            reason = "probe succeeded" if changed == "closed" else "repeated batch failures"
            probe_in = self.config.cooldown_s if changed == "open" else 0.0
            self._emit(BreakerChanged(replica_id, changed, reason, probe_in))

    def record_results(self, replica_id: str, results: list[ItemResult], now: float) -> None:
        """A batch of ``replica_id`` ended with ``results`` (see :func:`batch_outcome`)."""
        outcome = batch_outcome(results)
        if outcome is None:
            self.of(replica_id).settle()
        else:
            self.record(replica_id, outcome, now)
