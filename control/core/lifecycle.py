"""Replica lifecycle outside rollouts: scale-to-zero of idle models and canary version picks.

Scale-to-zero: when ``CoreConfig.scale_to_zero_idle_s`` is set, every replica of a model that
had no work for that long is evicted (never during a rollout, never with work queued or in
flight); the next request of the model cold-starts it through the normal cold-load path. A model with
autoscaling settings (``control.core.autoscaler``) follows its own ``idle_s`` instead.

Canary: a traffic split maps the model key a workflow names to served versions with integer
weights; a run's version is a stable hash of its request id, so every node and retry of a run
uses one version, and the share of runs per version follows the weights. A live canary
(:mod:`control.core.canary`) is picked the same way (:func:`pick_canary`), before any split.
"""

from __future__ import annotations

import zlib

from control.core.canary_stats import RUNNING, hash_point
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.loads import evict
from control.core.parts import ActionLog, Catalog, Queues, Rollouts, Timers
from control.core.state import QueuedStep
from control.core.types import ReplicaState
from control.core.variant_route import choose_for_step


def scale_to_zero(
    pol: Policies, cluster: Cluster, queues: Queues, rollouts: Rollouts, timers: Timers,
    log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Evict the replicas of models idle for the configured time; re-arm the next check
    (``timers.idle_check_at``). Nothing is evicted while a rollout loads or drains."""
    idle_s = pol.config.scale_to_zero_idle_s
    if idle_s is None or (timers.idle_check_at is not None and now < timers.idle_check_at):
        return
    ro = rollouts.current
    if ro is not None and ro.state in ("loading", "draining"):
        return
    check_at: float | None = None
    for model_key in sorted(cluster.by_model):
        reps = list(cluster.by_model[model_key].values())
        if (
            model_key in cluster.replica_caps  # autoscaled: its own idle_s decides
            or not reps
            or len(queues.pending.get(model_key, ()))
            or any(r.running or r.queue or r.state != ReplicaState.READY for r in reps)
        ):
            continue
        last = max(r.last_used for r in reps)
        if now >= last + idle_s:
            for r in sorted(reps, key=lambda r: r.replica_id):
                evict(cluster, log, r, f"scale to zero: {model_key} had no work for "
                      f"{now - last:.1f} s (minimum idle {idle_s:g} s)")  # fmt: skip
            log.counters["scale_to_zero.evicted_models"] += 1
        else:
            due = last + idle_s
            check_at = due if check_at is None else min(check_at, due)
    timers.idle_check_at = check_at


def served_key(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, step: QueuedStep,
    now: float,
) -> str | None:  # fmt: skip
    """The model key a step is served by: a canary's choice (``pick_canary``), then a
    rollout's weighted split (``pick_variant``), then, for a base model with precision
    variants, the variant its request's quality class chooses (``variant_route``)."""
    if catalog.canaries:
        step.model_key = pick_canary(catalog, cluster, step) or step.model_key
    base = step.node.model or ""
    if base in catalog.variants and base not in catalog.splits and base not in catalog.canaries:
        return choose_for_step(pol, catalog, cluster, queues, step, now)  # chosen afresh
    return pick_variant(catalog, step) if catalog.splits else step.model_key


def pick_variant(catalog: Catalog, step: QueuedStep) -> str:
    """The served model key for a step: its own key, or a canary version by weight."""
    key = step.model_key or ""
    split = catalog.splits.get(key)
    if not split:
        return key
    total = sum(w for _, w in split)
    point = zlib.crc32(step.run.request.request_id.encode()) % total
    for variant, weight in split:
        if point < weight:
            return variant
        point -= weight
    return split[-1][0]


def pick_canary(catalog: Catalog, cluster: Cluster, step: QueuedStep) -> str | None:
    """The model key for a step whose node names a model with a canary: the canary for the
    runs its fraction covers (stable per request id), else the baseline. The baseline also
    serves a run that failed on the canary once (``off_canary``) and every run while no
    replica of the canary is loaded and routable (loading, its breaker open): the canary
    takes traffic only when it can serve it. None: the node's model has no canary."""
    base = step.node.model or ""
    c = catalog.canaries.get(base)
    if c is None:
        return None
    if c.state != RUNNING or step.run.off_canary:
        return base
    if hash_point(step.run.request.request_id) >= c.fraction_ppm:
        return base
    ready = any(r.routable and r.state == ReplicaState.READY
                for r in cluster.by_model.get(c.canary_key, {}).values())  # fmt: skip
    return c.canary_key if ready else base
