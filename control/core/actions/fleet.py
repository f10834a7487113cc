"""Actions that change the fleet of replicas: loads, evictions, and the stages of a rollout (a
replica drained, a new replica routable, the rollout's own transitions)."""

from __future__ import annotations

from control.core.values import value


@value
class LoadModel:
    replica_id: str
    model_key: str
    device_ids: tuple[str, ...]
    pool: str  # "cold": a cold load, on the cold pool only
    speculative: bool
    reason: str


@value
class EvictReplica:
    replica_id: str
    model_key: str
    device_ids: tuple[str, ...]
    reason: str


@value
class DrainReplica:
    """No new work goes to this replica; its queued steps move away, in-flight work finishes,
    then it is evicted (an ``EvictReplica`` follows)."""

    replica_id: str
    model_key: str
    device_ids: tuple[str, ...]
    reason: str


@value
class ReplicaRoutable:
    """A replica loaded (and warmed) for a rollout now takes new work."""

    replica_id: str
    model_key: str
    reason: str


@value
class RolloutTransition:
    """A rollout changed stage: "loading", "draining", "completed", "aborted", "failed",
    "refused" (``from_state`` is "" when it starts)."""

    plan_id: str
    from_state: str
    to_state: str
    reason: str
