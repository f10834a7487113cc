"""Placement convergence: roll the fleet to a desired placement without dropping work.

``PlacementChanged`` names a target (model, device group) -> (replicas, pool); the
``placement`` phase of every step moves the fleet towards it, each transition an action with a
reason a driver can audit:

1. missing replicas are loaded on their target devices (``LoadModel``); they take no work while
   loading, so no hot replica is paused and nothing is routed to a cold replica;
2. a new replica that reports loaded (and warm) becomes routable (``ReplicaRoutable``);
3. once every issued load is routable, surplus replicas are drained (``DrainReplica``): no new
   work, their queued steps move to other replicas of the model (``MoveStep``), work in flight
   finishes; a drained replica with nothing left is evicted (``EvictReplica``);
4. a load that did not fit waits until evictions free its memory;
5. ``RolloutTransition(... "completed")`` when every slot holds its count; canary splits apply.

A failed load aborts the rollout and converges back to the placement held when it started (a
rollback, done the same way); ``RollbackRequested`` does that for the last completed rollout.
A target that names an unknown model or device, or a tensor-parallel group no interconnect
domain can hold (:mod:`control.core.tp_groups`), is refused as it arrives: nothing starts.
"""

from __future__ import annotations

from control.core.actions import (
    DrainReplica,
    LoadModel,
    MoveStep,
    ReplicaRoutable,
    RolloutTransition,
)
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.errors import UnknownDeviceError, UnknownModelError, UnplaceableGroupError
from control.core.loads import evict, load_us
from control.core.parts import (
    ActionLog,
    Catalog,
    Ids,
    Queues,
    Rollout,
    Rollouts,
    Slot,
    Splits,
    Target,
)
from control.core.queueing import dequeue, route
from control.core.state import ReplicaRecord
from control.core.tp_groups import group_refusal
from control.core.types import ReplicaState

_ACTIVE = ("loading", "draining")


def current_target(cluster: Cluster) -> Target:
    """The fleet as a placement: routable or loading replicas per slot (drains excluded)."""
    out: Target = {}
    for rec in cluster.replicas.values():
        if rec.draining or rec.state not in (ReplicaState.READY, ReplicaState.LOADING):
            continue
        slot = cluster.slot_of(rec)
        count, _ = out.get(slot, (0, rec.pool))
        out[slot] = (count + 1, rec.pool)
    return out


def check_placements(catalog: Catalog, cluster: Cluster, placements: tuple, splits: tuple) -> None:
    """Raise naming the first unknown model or device of a ``PlacementChanged``, or its first
    tensor-parallel group that cannot be held (:func:`~control.core.tp_groups.group_refusal`)."""
    for model_key, device_ids, _, _ in placements:
        if model_key not in catalog.models:
            raise UnknownModelError(model_key)
        for d in device_ids:
            if d not in cluster.devices:
                raise UnknownDeviceError(d)
    for _, variants in splits:
        for key, _ in variants:
            if key not in catalog.models:
                raise UnknownModelError(key)
    refused = group_refusal(catalog.models, cluster.devices, placements)
    if refused is not None:
        raise UnplaceableGroupError(*refused)


def begin(
    catalog: Catalog, cluster: Cluster, rollouts: Rollouts, log: ActionLog, plan_id: str,
    target: Target, splits: Splits, reason: str, now: float, rollback: bool = False,
) -> None:  # fmt: skip
    """Start converging to ``target``; a rollout still running is superseded (its loads in
    progress are kept and judged against the new target)."""
    cur = rollouts.current
    old = cur if cur is not None and cur.state in _ACTIVE else None
    previous = current_target(cluster)
    ro = Rollout(plan_id, target, splits, previous, dict(catalog.splits), now, rollback)
    if not rollouts.history:
        rollouts.history.append(("initial", dict(ro.previous), dict(catalog.splits)))
    if old is not None:
        ro.pending, ro.draining = set(old.pending), set(old.draining)
        ro.previous, ro.previous_splits = old.previous, old.previous_splits
        _transition(log, old, "aborted", f"superseded by plan {plan_id}")
    rollouts.current = ro
    kind = "rollback" if rollback else "rollout"
    log.emit(RolloutTransition(plan_id, "", "loading", f"{kind} of plan {plan_id}: {reason}"))
    log.counters[f"{kind}s.started"] += 1


def _transition(log: ActionLog, ro: Rollout, to: str, reason: str) -> None:
    log.emit(RolloutTransition(ro.plan_id, ro.state, to, reason))
    ro.state, ro.reason = to, reason


def _fits(catalog: Catalog, cluster: Cluster, model_key: str, device_ids: tuple[str, ...]) -> bool:
    need = catalog.models[model_key].memory_mib
    devs = cluster.devices
    return all(devs[d].up and devs[d].free_mib >= need for d in device_ids)


def _load(
    pol: Policies, catalog: Catalog, cluster: Cluster, ids: Ids, log: ActionLog, ro: Rollout,
    slot: Slot, pool: str, now: float,
) -> None:  # fmt: skip
    model_key, device_ids = slot
    model = catalog.models[model_key]
    specs = tuple(cluster.devices[d].spec for d in device_ids)
    rid = ids.next_id(f"{model_key}@{device_ids[0]}#")
    rec = ReplicaRecord(
        rid, model, specs, pool, ReplicaState.LOADING, pol.config.prefix_capacity_blocks
    )
    rec.ready_at = now + load_us(pol.latency, model, specs[0]) / 1e6
    rec.routable, rec.plan_id, rec.last_used = False, ro.plan_id, now
    rec.load_reason = f"plan {ro.plan_id} wants {model_key} on {', '.join(device_ids)}"
    cluster.add_replica(rec)
    ro.pending.add(rid)
    why = f"{rec.load_reason}; it takes no work until loaded and warm"
    log.emit(LoadModel(rid, model_key, device_ids, pool, False, why))


def _slots(cluster: Cluster, ro: Rollout) -> dict[Slot, list[ReplicaRecord]]:
    have: dict[Slot, list[ReplicaRecord]] = {s: [] for s in ro.target}
    for rec in cluster.replicas.values():
        if rec.state in (ReplicaState.READY, ReplicaState.LOADING):
            have.setdefault(cluster.slot_of(rec), []).append(rec)
    return have


def _keep_order(rec: ReplicaRecord) -> tuple:
    """Replicas kept first: routable ones (old before new), then loading ones."""
    return (rec.draining, not rec.routable, rec.plan_id is not None, rec.replica_id)


def _reconcile(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, ids: Ids,
    log: ActionLog, ro: Rollout, now: float,
) -> None:  # fmt: skip
    """Issue loads for missing replicas, undrain replicas the target wants back, pick surplus."""
    ro.blocked = []
    surplus: list[ReplicaRecord] = []
    for slot, recs in sorted(_slots(cluster, ro).items()):
        want, pool = ro.target.get(slot, (0, "hot"))
        recs.sort(key=_keep_order)
        kept, extra = recs[:want], recs[want:]
        for rec in kept:
            if rec.draining:
                rec.draining, rec.routable = False, rec.breaker != "open"
                ro.draining.discard(rec.replica_id)
                why = f"plan {ro.plan_id} keeps {rec.replica_id}: it takes work again"
                log.emit(ReplicaRoutable(rec.replica_id, rec.model.key, why))
        for _ in range(want - len(kept)):
            if _fits(catalog, cluster, *slot):
                _load(pol, catalog, cluster, ids, log, ro, slot, pool, now)
            else:
                ro.blocked.append(slot)
        surplus.extend(extra)
    for rec in surplus:
        if rec.replica_id in ro.pending or (not rec.routable and not rec.draining):
            ro.pending.discard(rec.replica_id)  # a new replica the target no longer wants
            why = f"plan {ro.plan_id} no longer wants {rec.replica_id} (never routed)"
            evict(cluster, log, rec, why)
            ro.evicted += 1
        elif not rec.draining and not ro.pending:
            _drain(queues, log, ro, rec)


def _drain(queues: Queues, log: ActionLog, ro: Rollout, rec: ReplicaRecord) -> None:
    if ro.state == "loading":
        _transition(log, ro, "draining", "every new replica is routable; surplus ones drain")
    rec.draining, rec.routable = True, False
    ro.draining.add(rec.replica_id)
    why = f"plan {ro.plan_id} moves {rec.model.key} off {rec.replica_id}: no new work"
    log.emit(DrainReplica(rec.replica_id, rec.model.key, tuple(d.device_id for d in rec.devices),
                          why))  # fmt: skip
    queues.unbind_sessions(rec.replica_id)


def _move_queue(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, ids: Ids,
    log: ActionLog, ro: Rollout, rec: ReplicaRecord, now: float,
) -> None:  # fmt: skip
    """Queued steps go to other routable replicas of the model (kept when there are none)."""
    if not rec.queue or not cluster.serving(rec.model.key):
        return
    for step in list(rec.queue.values()):
        dequeue(pol, cluster, queues, step, False, now)
        route(pol, catalog, cluster, queues, ids, log, step, now)
        if step.replica_id is not None:
            why = f"{rec.replica_id} drains for plan {ro.plan_id}; {step.key} moves"
            log.emit(MoveStep(step.key, rec.replica_id, step.replica_id, why))
            ro.moved += 1


def advance(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, rollouts: Rollouts,
    ids: Ids, log: ActionLog, now: float,
) -> None:  # fmt: skip
    """The ``placement`` phase: move an active rollout one step further (see module doc)."""
    ro = rollouts.current
    if ro is None or ro.state not in _ACTIVE:
        return
    lost = sorted(r for r in ro.pending if r not in cluster.replicas)
    ro.pending.difference_update(lost)
    if lost:
        _abort(pol, catalog, cluster, queues, rollouts, ids, log, ro, f"load of {lost[0]} failed",
               now)  # fmt: skip
        return
    for rid in sorted(ro.pending):
        rec = cluster.replicas[rid]
        if rec.state == ReplicaState.READY:
            ro.pending.discard(rid)
            rec.routable = True
            ro.loaded += 1
            queues.dirty.add(rid)
            why = f"{rid} loaded and warm for plan {ro.plan_id}: routable"
            log.emit(ReplicaRoutable(rid, rec.model.key, why))
    _reconcile(pol, catalog, cluster, queues, ids, log, ro, now)
    for rid in sorted(ro.draining):
        drec = cluster.replicas.get(rid)
        if drec is None:
            ro.draining.discard(rid)
            continue
        _move_queue(pol, catalog, cluster, queues, ids, log, ro, drec, now)
        if not drec.running and not drec.queue:
            ro.draining.discard(rid)
            why = f"{rid} drained for plan {ro.plan_id}: nothing queued or in flight"
            evict(cluster, log, drec, why)
            ro.evicted += 1
    _settle(pol, catalog, cluster, queues, rollouts, ids, log, ro, now)


def _settle(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, rollouts: Rollouts,
    ids: Ids, log: ActionLog, ro: Rollout, now: float,
) -> None:  # fmt: skip
    if ro.pending or ro.draining:
        return
    if ro.blocked:
        model, devs = ro.blocked[0]
        why = f"{model} does not fit on {', '.join(devs)} even after the drains"
        _abort(pol, catalog, cluster, queues, rollouts, ids, log, ro, why, now)
        return
    catalog.splits = dict(ro.splits)
    rollouts.history.append((ro.plan_id, dict(ro.target), dict(ro.splits)))
    _transition(log, ro, "completed", f"every slot of plan {ro.plan_id} holds its replicas "
                f"({ro.loaded} loaded, {ro.evicted} evicted, {ro.moved} moved)")  # fmt: skip


def _abort(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, rollouts: Rollouts,
    ids: Ids, log: ActionLog, ro: Rollout, why: str, now: float,
) -> None:  # fmt: skip
    """Stop the rollout; converge back to where it started (a failed rollback just stops)."""
    log.counters["rollouts.aborted"] += 1
    if ro.rollback:
        _transition(log, ro, "failed", f"rollback failed ({why}); fleet left as it is")
        return
    _transition(log, ro, "aborted", f"{why}: restoring the placement held before")
    ro.state = "aborted"
    nxt = Rollout(f"{ro.plan_id}:rollback", ro.previous, ro.previous_splits, ro.previous,
                  ro.previous_splits, now, True)  # fmt: skip
    nxt.pending, nxt.draining = ro.pending, ro.draining
    rollouts.current = nxt
    log.emit(RolloutTransition(nxt.plan_id, "", "loading", f"rollback after: {why}"))
    log.counters["rollbacks.started"] += 1
    advance(pol, catalog, cluster, queues, rollouts, ids, log, now)


def request_rollback(
    catalog: Catalog, cluster: Cluster, rollouts: Rollouts, log: ActionLog, reason: str,
    now: float,
) -> None:  # fmt: skip
    """Converge to the placement before the last completed rollout (refused when none)."""
    hist = rollouts.history
    if len(hist) < 2:
        log.emit(
            RolloutTransition("", "", "refused", f"no earlier plan to roll back to ({reason})")
        )
        return
    _, target, splits = hist[-2]
    plan_id = f"{hist[-1][0]}:rollback"
    begin(catalog, cluster, rollouts, log, plan_id, dict(target), dict(splits), reason, now,
          rollback=True)  # fmt: skip
