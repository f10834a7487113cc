"""Global scheduling: bind each ready step to a replica queue, or park it until one is free.

With late binding (``BindingConfig.enabled``, the default) a ready model step waits in its
model's pending queue, and ``bind_pending`` hands it to a replica that can start it soon, in the
tenancy half's fair-share order (see ``binding``). A session that stays on its replica is bound
at once. Among candidates the routing policy picks the lowest predicted completion. When no
replica of the model exists, or the predicted wait is longer than loading a new one on the cold
pool, a cold load is emitted and the step queues on the loading replica instead of failing.
"""

from __future__ import annotations

from control.core.binding import held, park, rooms_of, unpark
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.headroom_fit import bind_kept, fitting, kept_rooms
from control.core.latency import LatencyModel, service_us
from control.core.lifecycle import served_key
from control.core.loads import load_us, start_load
from control.core.parts import ActionLog, Catalog, Ids, Queues
from control.core.routing.late_explain import explain_bind
from control.core.state import QueuedStep, ReplicaRecord
from control.core.step_demand import demand_of
from control.core.types import BLOCK_TOKENS, DeviceSpec, ModelSpec


def estimate(
    latency: LatencyModel, step: QueuedStep, rec: ReplicaRecord, block_tokens: int = BLOCK_TOKENS
) -> None:
    """Set ``step.est_us``: its share of a full batch on ``rec``'s device type (its prompt
    less the prefix blocks predicted to hit there: the replica prefills only the rest)."""
    dt = rec.device.accelerator
    if step.est_dt == dt and step.model_key == rec.model.key:
        return
    b, tokens = rec.model.max_batch_size, step.prefill_tokens(block_tokens)
    step.est_us = max(
        1, service_us(latency, rec.model.key, dt, b, tokens, step.max_output_tokens) // b
    )
    step.est_dt = dt


def enqueue(
    pol: Policies, cluster: Cluster, queues: Queues, step: QueuedStep, rec: ReplicaRecord,
    now: float, bound: bool = False,
) -> None:  # fmt: skip
    """Append to a replica's queue and mark the replica dirty. A new or moved step tells
    tenancy (on_enqueue) and its wait restarts; a ``bound`` step (taken from its model's
    pending queue) is already on tenancy's books and keeps its ready time."""
    estimate(pol.latency, step, rec, pol.config.prefix_block_tokens)
    step.replica_id = rec.replica_id
    if not bound:
        step.arrival = now
    rec.queue[step.key] = step
    rec.queue_us += step.est_us
    cluster.backlogged.add(rec.replica_id)
    queues.dirty.add(rec.replica_id)
    if not bound:
        pol.tenancy.on_enqueue(step.work, now)


def dequeue(
    pol: Policies, cluster: Cluster, queues: Queues, step: QueuedStep, dispatched: bool,
    now: float,
) -> None:  # fmt: skip
    """Remove from its replica queue (or its model's pending queue); ``on_dequeue`` unless it
    leaves to be dispatched."""
    if step.pending_model is not None:
        unpark(pol, queues, step, dispatched, now)
        return
    rec = cluster.replicas.get(step.replica_id or "")
    if rec is not None and rec.queue.pop(step.key, None) is not None:
        rec.queue_us -= step.est_us
        if not rec.queue:
            cluster.backlogged.discard(rec.replica_id)
        if not dispatched:
            pol.tenancy.on_dequeue(step.key, now)
    step.replica_id = None


def route(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, ids: Ids,
    log: ActionLog, step: QueuedStep, now: float,
) -> bool:  # fmt: skip
    """Queue a model step on the best replica, loading one if needed. Returns False when the
    step cannot be placed anywhere now (it then waits in ``unplaced`` with a reason)."""
    step.model_key = served_key(pol, catalog, cluster, queues, step, now)
    model = catalog.models[step.model_key or ""]
    candidates = cluster.serving(model.key)
    late = pol.config.binding.enabled
    if late and candidates:
        session = step.run.request.session_id if step.node.task == "generate" else None
        if (session is None or session not in queues.sessions) and not held(step, candidates):
            return _park_or_scale(pol, cluster, queues, ids, log, step, candidates, now)
    demand = demand_of(step)
    ctx = queues.routing_context(
        now, pol.latency, pol.config.transfer, pol.config.prefix_block_tokens
    )
    candidates = fitting(pol, cluster, candidates, step.work.priority_class)
    choice = pol.routing.choose(demand, candidates, ctx)
    target: ReplicaRecord | None = None
    if choice is not None and late and not choice.affinity and not choice.score.hit_blocks:
        # the guard moved the session, or the prefix's holder is too busy: wait fairly
        return _park_or_scale(pol, cluster, queues, ids, log, step, candidates, now)
    counters = log.counters
    if choice is not None:
        target = cluster.replicas[choice.score.replica_id]
        step.route = choice
        wait = choice.score.queue_us
        target = _maybe_scale_out(pol, cluster, ids, log, step, target, wait, now) or target
        counters["route.affinity" if choice.affinity else "route.best"] += 1
    else:
        why = f"no replica of {model.key} is loaded or loading; step {step.key} needs it"
        target = start_load(pol, cluster, ids, log, model, why, now, fallback=True)
        counters["loads.cold_starts"] += 1 if target is not None else 0
    if target is None:
        queues.unplaced.setdefault(model.key, []).append(step)
        counters["route.unplaced"] += 1
        return False
    if demand.session_id is not None:
        queues.sessions[demand.session_id] = target.replica_id
    if step.prefix_blocks:
        step.hit_blocks = target.prefix.match(step.prefix_blocks)
        target.prefix.insert(step.prefix_blocks)
    enqueue(pol, cluster, queues, step, target, now)
    return True


def _park_or_scale(
    pol: Policies, cluster: Cluster, queues: Queues, ids: Ids, log: ActionLog, step: QueuedStep,
    candidates: list[ReplicaRecord], now: float,
) -> bool:  # fmt: skip
    """Park the step in its model's pending queue, unless the backlog ahead of it (pending
    work shared by the replicas, plus the least loaded replica's own wait) exceeds loading a
    new replica on the cold pool: then it queues on that new replica."""
    first = candidates[0]
    estimate(pol.latency, step, first, pol.config.prefix_block_tokens)
    queue = queues.pending.get(first.model.key)
    backlog = (queue.us // len(candidates)) if queue is not None else 0
    if (
        backlog
        and backlog > load_us(pol.latency, first.model, first.device)
        and _cold_room(cluster, first.model)  # else no scale-out: skip pricing one
    ):
        best = min(candidates, key=lambda r: (r.wait_us(now), r.replica_id))
        wait = best.wait_us(now) + backlog
        target = _maybe_scale_out(pol, cluster, ids, log, step, best, wait, now)
        if target is not None:
            enqueue(pol, cluster, queues, step, target, now)
            return True
    park(pol, queues, step, now)
    log.counters["route.pending"] += 1
    return True


def bind_pending(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, ids: Ids,
    log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Hand pending steps to replicas that can start them soon, in fair-share order.

    Called once per step after routing. Looks only at models with pending work and their
    replicas. A model whose replicas are all gone is routed again (a cold load)."""
    pending = queues.pending
    if not pending:
        return
    keys = [k for k, q in pending.items() if q.entries]
    if len(keys) > 1:
        keys.sort()
    for model_key in keys:
        queue = pending[model_key]
        rooms = rooms_of(pol, cluster, model_key, now)
        fit = kept_rooms(pol, cluster, rooms) if rooms and pol.reserved_devices else None
        if fit is not None:  # a reservation holds rooms back: one step at a time
            bind = lambda s, r: _bind(pol, cluster, queues, log, s, r, now)  # noqa: E731
            bind_kept(pol, cluster, queue, rooms, fit, bind, now)
        elif rooms:
            total = sum(rooms.values())
            taken = queue.take(total, pol.tenancy, now)
            for step in taken:
                step.pending_model = None
            if len(taken) == total and len(rooms) > 1:
                _fill(pol, cluster, queues, log, taken, rooms, now)
            else:
                for step in taken:
                    _bind(pol, cluster, queues, log, step, rooms, now)
        elif not cluster.any_serving(model_key):
            for step in queue.ordered(pol.tenancy, now):
                unpark(pol, queues, step, False, now)
                route(pol, catalog, cluster, queues, ids, log, step, now)
    for key in [k for k, q in pending.items() if not q.entries]:
        del pending[key]


def _placement_matters(step: QueuedStep) -> bool:
    """True when replicas differ for this step beyond their wait: a prefix the caches may
    hold, a session, or inputs that live on a device."""
    return bool(
        step.prefix_blocks
        or step.input_devices
        or (step.node.task == "generate" and step.run.request.session_id is not None)
    )


def _fill(
    pol: Policies, cluster: Cluster, queues: Queues, log: ActionLog, steps: list[QueuedStep],
    rooms: dict[str, int], now: float,
) -> None:  # fmt: skip
    """Every room fills up: steps whose placement matters are routed one by one; the others
    fill the remaining rooms in fair-share order, replica by replica (which of them lands on
    which replica changes no one's wait: every replica with room starts a full batch)."""
    neutral = []
    for step in steps:
        if _placement_matters(step):
            _bind(pol, cluster, queues, log, step, rooms, now)
        else:
            neutral.append(step)
    reps = cluster.replicas
    i = 0
    for rid, n in list(rooms.items()):
        for step in neutral[i : i + n]:
            _assign(pol, cluster, queues, log, step, reps[rid], rooms, now)
        i += n


def _bind(
    pol: Policies, cluster: Cluster, queues: Queues, log: ActionLog, step: QueuedStep,
    rooms: dict[str, int], now: float,
) -> None:  # fmt: skip
    """Bind one taken step to the replica with room that completes it first."""
    reps = cluster.replicas
    if len(rooms) == 1:
        rid = next(iter(rooms))
    else:
        ctx = queues.routing_context(
            now, pol.latency, pol.config.transfer, pol.config.prefix_block_tokens
        )
        choice = pol.routing.choose(demand_of(step), [reps[r] for r in rooms], ctx)
        assert choice is not None  # candidates are non-empty
        rid = choice.score.replica_id
        step.route = choice
    _assign(pol, cluster, queues, log, step, reps[rid], rooms, now)


def _assign(
    pol: Policies, cluster: Cluster, queues: Queues, log: ActionLog, step: QueuedStep,
    target: ReplicaRecord, rooms: dict[str, int], now: float,
) -> None:  # fmt: skip
    """Bind ``step`` to ``target``'s queue and use up one of its rooms."""
    rid = target.replica_id
    rooms[rid] -= 1
    if not rooms[rid]:
        del rooms[rid]
    if step.node.task == "generate" and step.run.request.session_id is not None:
        queues.sessions[step.run.request.session_id] = rid
    if step.prefix_blocks:
        step.hit_blocks = target.prefix.match(step.prefix_blocks)
        target.prefix.insert(step.prefix_blocks)
    log.counters["route.bound_late"] += 1
    if pol.config.binding.explain and step.route is None:  # unscored: say why, for the timeline
        explain_bind(pol, cluster, queues, step, target, now)
    enqueue(pol, cluster, queues, step, target, now, bound=True)


def _maybe_scale_out(
    pol: Policies, cluster: Cluster, ids: Ids, log: ActionLog, step: QueuedStep,
    best: ReplicaRecord, wait_us: int, now: float,
) -> ReplicaRecord | None:  # fmt: skip
    """Load a new cold-pool replica when even the best replica's wait exceeds the load time
    there (the load cost is then the cheaper delay). Returns the new replica or None."""
    model, latency = best.model, pol.latency
    if wait_us <= load_us(latency, model, best.device):
        return None
    cold = _cold_room(cluster, model)
    if not cold:
        return None
    dev = min(cold, key=lambda d: (load_us(latency, model, d), d.device_id))
    cost = load_us(latency, model, dev)
    if wait_us <= cost:
        return None
    why = (
        f"best replica {best.replica_id} would make {step.key} wait {wait_us} us, "
        f"more than loading {model.key} on cold device {dev.device_id} ({cost} us)"
    )
    return start_load(pol, cluster, ids, log, model, why, now, device=dev)


def _cold_room(cluster: Cluster, model: ModelSpec) -> list[DeviceSpec]:
    """Cold-pool devices up with room for one more single-device replica of ``model`` (none
    for a tensor-parallel model: scale-out loads single-device replicas only)."""
    if model.tp_degree > 1:
        return []
    return [d.spec for d in cluster.cold_devices() if d.up and d.free_mib >= model.memory_mib]
