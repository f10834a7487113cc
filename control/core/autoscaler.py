"""Per-model autoscaling: replicas follow the predicted queue delay and idle time.

A model autoscales while its ``ModelSpec.max_replicas`` is set (``cluster.replica_caps`` holds
the caps of those models; no load, not even routing's own scale-out, adds a replica past it).
Run in the ``placement`` phase, after rollouts, for each such model in key order:

1. replicas above ``max_replicas`` (the setting was lowered) drain, idle or loading ones first;
2. fewer than ``min_replicas`` (ready or loading): one replica loads, once the model has had a
   ready replica in this core (a live start-up's own replicas are still loading, unknown to
   the core, when its first steps run: they are not loaded twice);
3. scale out: the predicted queue delay of a new step (``capacity.model_delay_s``, the whole
   backlog over the routable replicas) above ``scale_out_delay_s`` adds one replica, up to
   ``max_replicas``, on a device with room that holds none of the model (the cold pool where
   there is one, so hot replicas are never paused by a load); never while one of its replicas
   is still loading (that replica is the answer to the backlog already);
4. scale in: with nothing waiting for the model, a replica that has had no work for
   ``idle_s`` drains, one per ``idle_s`` per model, down to ``min_replicas`` (zero: the next
   request cold-starts the model through the normal cold-load path).

A drain never aborts work: the replica takes no new work (``DrainReplica``), its queued steps
move to the model's other routable replicas (they stay when there are none and run there),
work in flight finishes, then it is evicted (``EvictReplica``). Nothing scales while a rollout
loads or drains. Counters: ``autoscale.scale_out``, ``autoscale.scale_in``,
``autoscale.drained``, ``autoscale.no_room``.
"""

from __future__ import annotations

from control.core.actions import DrainReplica, MoveStep
from control.core.capacity import model_delay_s
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.loads import evict, start_load
from control.core.parts import ActionLog, Catalog, Ids, Queues, Rollouts, Scaling
from control.core.queueing import dequeue, route
from control.core.state import ReplicaRecord
from control.core.tenancy.base import PRIORITY_CLASSES
from control.core.types import ModelSpec, ReplicaState

_EVERYONE = PRIORITY_CLASSES[-1]  # the least urgent class waits behind the whole backlog


def autoscale(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, rollouts: Rollouts,
    scaling: Scaling, ids: Ids, log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Advance drains, then scale every autoscaled model (see the module doc); sets
    ``scaling.check_at`` to the next idle expiry (None: nothing to wake up for)."""
    scaling.check_at = None
    ro = rollouts.current
    if ro is None or ro.state not in ("loading", "draining"):
        # else the rollout's loads and drains end in steps of their own: checked then
        _decide(pol, catalog, cluster, queues, scaling, ids, log, now)
    advance_drains(pol, catalog, cluster, queues, scaling, ids, log, now)


def _decide(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, scaling: Scaling,
    ids: Ids, log: ActionLog, now: float,
) -> None:  # fmt: skip
    for key in sorted(cluster.replica_caps):
        model = catalog.models.get(key)
        if model is None or model.max_replicas is None:
            continue
        due = _scale_model(pol, cluster, queues, scaling, ids, log, model, now)
        if due is not None and (scaling.check_at is None or due < scaling.check_at):
            scaling.check_at = due


def _serving(cluster: Cluster, key: str) -> list[ReplicaRecord]:
    """The model's replicas that count: ready or loading, not draining (a breaker-open one
    counts: it comes back)."""
    live = (ReplicaState.READY, ReplicaState.LOADING)
    reps = cluster.by_model.get(key, {}).values()
    return [r for r in reps if not r.draining and r.state in live]


def _scale_model(
    pol: Policies, cluster: Cluster, queues: Queues, scaling: Scaling, ids: Ids,
    log: ActionLog, model: ModelSpec, now: float,
) -> float | None:  # fmt: skip
    """One model's decision; returns when its next idle check is due (None: none)."""
    key, cap = model.key, model.max_replicas or 0
    serving = _serving(cluster, key)
    if len(serving) > cap:
        surplus = sorted(serving, key=lambda r: (not r.loading, not r.idle, r.replica_id))
        for rec in surplus[: len(serving) - cap]:
            why = f"{key} has {len(serving)} replicas, above its max_replicas {cap}"
            drain(queues, scaling, log, rec, why)
        return None
    loading = any(r.loading for r in serving)
    if any(r.state == ReplicaState.READY for r in serving):
        scaling.served.add(key)
    if len(serving) < model.min_replicas and key in scaling.served:
        if not loading:
            why = f"{key} has {len(serving)} replicas, below its min_replicas {model.min_replicas}"
            _scale_out(pol, cluster, ids, log, model, why, now)
        return None
    target = model.scale_out_delay_s
    if target is not None and serving and len(serving) < cap and not loading:
        delay = model_delay_s(cluster, queues, key, _EVERYONE, now)
        if delay is not None and delay > target:
            why = (
                f"{key}: predicted queue delay {delay:.3f} s exceeds its target {target:g} s; "
                f"replica {len(serving) + 1} of at most {cap}"
            )
            _scale_out(pol, cluster, ids, log, model, why, now)
            return None
    return _scale_in(queues, scaling, log, model, serving, now)


def _scale_in(
    queues: Queues, scaling: Scaling, log: ActionLog, model: ModelSpec,
    serving: list[ReplicaRecord], now: float,
) -> float | None:  # fmt: skip
    """Drain the replica idle longest once it had no work for ``idle_s`` (and the model
    scaled in no earlier than ``idle_s`` ago); returns the next check (None: none due)."""
    idle_s, key = model.idle_s, model.key
    if idle_s is None or len(serving) <= model.min_replicas:
        return None
    pending = queues.pending.get(key)
    if (pending is not None and len(pending)) or queues.unplaced.get(key):
        return None  # work waits for the model: its next step comes with that work
    idle = [r for r in serving if r.idle]
    if not idle:
        return None  # a completion brings the next step
    victim = min(idle, key=lambda r: (r.pool != "cold", r.last_used, r.replica_id))
    last = scaling.scaled_in_at.get(key)
    due = max(victim.last_used + idle_s, last + idle_s if last is not None else 0.0)
    if now < due:
        return due
    why = (
        f"{key}: {victim.replica_id} had no work for {now - victim.last_used:.1f} s "
        f"(idle_s {idle_s:g}); {len(serving) - 1} replica(s) left (min_replicas "
        f"{model.min_replicas})"
    )
    drain(queues, scaling, log, victim, why)
    scaling.scaled_in_at[key] = now
    return now + idle_s if len(serving) - 1 > model.min_replicas else None


def _scale_out(
    pol: Policies, cluster: Cluster, ids: Ids, log: ActionLog, model: ModelSpec, why: str,
    now: float,
) -> None:  # fmt: skip
    """Load one more replica on a device with room that holds none of the model: the cold
    pool's when there is one (evicting idle cold replicas if need be), else the least busy."""
    if model.tp_degree > 1:
        log.counters["autoscale.no_room"] += 1  # scale-out loads single-device replicas
        return
    holders = {d.device_id for r in cluster.by_model.get(model.key, {}).values() for d in r.devices}
    up = [d for d in cluster.devices.values() if d.up and d.spec.device_id not in holders]
    has_cold = any(d.up and d.spec.pool == "cold" for d in cluster.devices.values())
    room = [d for d in up if d.free_mib >= model.memory_mib and (d.spec.pool == "cold" or
                                                                 not has_cold)]  # fmt: skip
    rec = None
    if room:
        busy = {d.spec.device_id: sum(cluster.replicas[r].wait_us(now) for r in d.replicas)
                for d in room}  # fmt: skip
        best = min(room, key=lambda d: (busy[d.spec.device_id], -d.free_mib, d.spec.device_id))
        rec = start_load(pol, cluster, ids, log, model, why, now, device=best.spec, fallback=True)
    elif has_cold:
        rec = start_load(pol, cluster, ids, log, model, why, now)
    log.counters["autoscale.scale_out" if rec is not None else "autoscale.no_room"] += 1


def drain(queues: Queues, scaling: Scaling, log: ActionLog, rec: ReplicaRecord, why: str) -> None:
    """Stop routing to ``rec``; ``advance_drains`` moves its queue and evicts it when empty."""
    rec.draining, rec.routable = True, False
    scaling.draining.add(rec.replica_id)
    log.counters["autoscale.scale_in"] += 1
    devices = tuple(d.device_id for d in rec.devices)
    log.emit(DrainReplica(rec.replica_id, rec.model.key, devices, f"autoscale: {why}"))
    queues.unbind_sessions(rec.replica_id)


def advance_drains(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, scaling: Scaling,
    ids: Ids, log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Move draining replicas' queued steps to routable replicas of their model (kept when
    there are none: they run where they are), and evict a drained replica with nothing queued
    or in flight."""
    for rid in sorted(scaling.draining):
        rec = cluster.replicas.get(rid)
        if rec is None:  # lost with its device meanwhile
            scaling.draining.discard(rid)
            continue
        if rec.queue and cluster.any_serving(rec.model.key):
            for step in list(rec.queue.values()):
                dequeue(pol, cluster, queues, step, False, now)
                route(pol, catalog, cluster, queues, ids, log, step, now)
                if step.replica_id is not None:  # else parked: it binds late, elsewhere
                    why = f"{rid} drains (autoscale); {step.key} moves"
                    log.emit(MoveStep(step.key, rid, step.replica_id, why))
        if not rec.running and not rec.queue:
            scaling.draining.discard(rid)
            log.counters["autoscale.drained"] += 1
            evict(cluster, log, rec, f"autoscale: {rid} drained: nothing queued or in flight")
