"""Global scheduling: bind each ready step to a replica queue, or park it until one is free.

With late binding (``BindingConfig.enabled``, the default) a ready model step waits in its
model's pending queue, and ``bind_pending`` hands it to a replica that can start it soon, in the
tenancy half's fair-share order (see ``binding``). A session that stays on its replica is bound
at once. Among candidates the routing policy picks the lowest predicted completion. When no
replica of the model exists, or the predicted wait is longer than loading a new one on the cold
pool, a cold load is emitted and the step queues on the loading replica instead of failing.
"""

from __future__ import annotations

from control.core.binding import park, rooms_of, unpark
from control.core.context import CoreState
from control.core.latency import service_us
from control.core.lifecycle import pick_variant
from control.core.loads import load_us, start_load
from control.core.routing.base import RoutingContext, StepDemand
from control.core.state import QueuedStep, ReplicaRecord
from control.core.types import DeviceSpec, ModelSpec


def estimate(st: CoreState, step: QueuedStep, rec: ReplicaRecord) -> None:
    """Set ``step.est_us``: its share of a full batch on ``rec``'s device type."""
    dt = rec.device.accelerator
    if step.est_dt == dt and step.model_key == rec.model.key:
        return
    b = rec.model.max_batch_size
    step.est_us = max(
        1,
        service_us(st.latency, rec.model.key, dt, b, step.input_tokens, step.max_output_tokens)
        // b,
    )
    step.est_dt = dt


def enqueue(st: CoreState, step: QueuedStep, rec: ReplicaRecord, bound: bool = False) -> None:
    """Append to a replica's queue and mark the replica dirty. A new or moved step tells
    tenancy (on_enqueue) and its wait restarts; a ``bound`` step (taken from its model's
    pending queue) is already on tenancy's books and keeps its ready time."""
    estimate(st, step, rec)
    step.replica_id = rec.replica_id
    if not bound:
        step.arrival = st.now
    rec.queue[step.key] = step
    rec.queue_us += step.est_us
    st.cluster.backlogged.add(rec.replica_id)
    st.dirty.add(rec.replica_id)
    if not bound:
        st.tenancy.on_enqueue(step.work, st.now)


def dequeue(st: CoreState, step: QueuedStep, dispatched: bool) -> None:
    """Remove from its replica queue (or its model's pending queue); ``on_dequeue`` unless it
    leaves to be dispatched."""
    if step.pending_model is not None:
        unpark(st, step, dispatched)
        return
    rec = st.cluster.replicas.get(step.replica_id or "")
    if rec is not None and rec.queue.pop(step.key, None) is not None:
        rec.queue_us -= step.est_us
        if not rec.queue:
            st.cluster.backlogged.discard(rec.replica_id)
        if not dispatched:
            st.tenancy.on_dequeue(step.key, st.now)
    step.replica_id = None


def _demand(st: CoreState, step: QueuedStep) -> StepDemand:
    return StepDemand(
        model_key=step.model_key or "",
        input_tokens=step.input_tokens,
        output_tokens=step.max_output_tokens,
        prefix_blocks=step.prefix_blocks,
        session_id=step.run.request.session_id if step.node.task == "generate" else None,
        input_devices=step.input_devices,
    )


def route(st: CoreState, step: QueuedStep) -> bool:
    """Queue a model step on the best replica, loading one if needed. Returns False when the
    step cannot be placed anywhere now (it then waits in ``unplaced`` with a reason)."""
    if st.splits:
        step.model_key = pick_variant(st, step)
    model = st.models[step.model_key or ""]
    candidates = st.cluster.serving(model.key)
    late = st.config.binding.enabled
    if late and candidates:
        session = step.run.request.session_id if step.node.task == "generate" else None
        if session is None or session not in st.sessions:
            return _park_or_scale(st, step, candidates)
    demand = _demand(st, step)
    choice = st.routing.choose(demand, candidates, _context(st))
    target: ReplicaRecord | None = None
    if choice is not None and late and not choice.affinity:
        return _park_or_scale(st, step, candidates)  # the guard moved the session: wait fairly
    if choice is not None:
        target = st.cluster.replicas[choice.score.replica_id]
        target = _maybe_scale_out(st, step, target, choice.score.queue_us) or target
        st.counters["route.affinity" if choice.affinity else "route.best"] += 1
    else:
        why = f"no replica of {model.key} is loaded or loading; step {step.key} needs it"
        target = start_load(st, model, why, fallback=True)
        st.counters["loads.cold_starts"] += 1 if target is not None else 0
    if target is None:
        st.unplaced.setdefault(model.key, []).append(step)
        st.counters["route.unplaced"] += 1
        return False
    if demand.session_id is not None:
        st.sessions[demand.session_id] = target.replica_id
    if step.prefix_blocks:
        step.hit_blocks = target.prefix.match(step.prefix_blocks)
        target.prefix.insert(step.prefix_blocks)
    enqueue(st, step, target)
    return True


def _context(st: CoreState) -> RoutingContext:
    ctx = st.routing_ctx
    if ctx is None or ctx.now != st.now or ctx.sessions is not st.sessions:
        ctx = st.routing_ctx = RoutingContext(st.now, st.latency, st.config.transfer, st.sessions)
    return ctx


def _park_or_scale(st: CoreState, step: QueuedStep, candidates: list[ReplicaRecord]) -> bool:
    """Park the step in its model's pending queue, unless the backlog ahead of it (pending
    work shared by the replicas, plus the least loaded replica's own wait) exceeds loading a
    new replica on the cold pool: then it queues on that new replica."""
    first = candidates[0]
    estimate(st, step, first)
    queue = st.pending.get(first.model.key)
    backlog = (queue.us // len(candidates)) if queue is not None else 0
    if (
        backlog
        and backlog > load_us(st, first.model, first.device)
        and _cold_room(st, first.model)  # else no scale-out: skip pricing one
    ):
        best = min(candidates, key=lambda r: (r.wait_us(st.now), r.replica_id))
        target = _maybe_scale_out(st, step, best, best.wait_us(st.now) + backlog)
        if target is not None:
            enqueue(st, step, target)
            return True
    park(st, step)
    st.counters["route.pending"] += 1
    return True


def bind_pending(st: CoreState) -> None:
    """Hand pending steps to replicas that can start them soon, in fair-share order.

    Called once per step after routing. Looks only at models with pending work and their
    replicas. A model whose replicas are all gone is routed again (a cold load)."""
    pending = st.pending
    if not pending:
        return
    keys = [k for k, q in pending.items() if q.entries]
    if len(keys) > 1:
        keys.sort()
    for model_key in keys:
        queue = pending[model_key]
        rooms = rooms_of(st, model_key)
        if rooms:
            total = sum(rooms.values())
            taken = queue.take(total, st.tenancy, st.now)
            for step in taken:
                step.pending_model = None
            if len(taken) == total and len(rooms) > 1:
                _fill(st, taken, rooms)
            else:
                for step in taken:
                    _bind(st, step, rooms)
        elif not st.cluster.any_serving(model_key):
            for step in queue.ordered(st.tenancy, st.now):
                unpark(st, step, dispatched=False)
                route(st, step)
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


def _fill(st: CoreState, steps: list[QueuedStep], rooms: dict[str, int]) -> None:
    """Every room fills up: steps whose placement matters are routed one by one; the others
    fill the remaining rooms in fair-share order, replica by replica (which of them lands on
    which replica changes no one's wait: every replica with room starts a full batch)."""
    neutral = []
    for step in steps:
        if _placement_matters(step):
            _bind(st, step, rooms)
        else:
            neutral.append(step)
    reps = st.cluster.replicas
    i = 0
    for rid, n in list(rooms.items()):
        for step in neutral[i : i + n]:
            _assign(st, step, reps[rid], rooms)
        i += n


def _bind(st: CoreState, step: QueuedStep, rooms: dict[str, int]) -> None:
    """Bind one taken step to the replica with room that completes it first."""
    reps = st.cluster.replicas
    if len(rooms) == 1:
        rid = next(iter(rooms))
    else:
        demand = _demand(st, step)
        choice = st.routing.choose(demand, [reps[r] for r in rooms], _context(st))
        assert choice is not None  # candidates are non-empty
        rid = choice.score.replica_id
    _assign(st, step, reps[rid], rooms)


def _assign(st: CoreState, step: QueuedStep, target: ReplicaRecord, rooms: dict[str, int]) -> None:
    """Bind ``step`` to ``target``'s queue and use up one of its rooms."""
    rid = target.replica_id
    rooms[rid] -= 1
    if not rooms[rid]:
        del rooms[rid]
    if step.node.task == "generate" and step.run.request.session_id is not None:
        st.sessions[step.run.request.session_id] = rid
    if step.prefix_blocks:
        step.hit_blocks = target.prefix.match(step.prefix_blocks)
        target.prefix.insert(step.prefix_blocks)
    st.counters["route.bound_late"] += 1
    enqueue(st, step, target, bound=True)


def _maybe_scale_out(
    st: CoreState, step: QueuedStep, best: ReplicaRecord, wait_us: int
) -> ReplicaRecord | None:
    """Load a new cold-pool replica when even the best replica's wait exceeds the load time
    there (the load cost is then the cheaper delay). Returns the new replica or None."""
    model = best.model
    if wait_us <= load_us(st, model, best.device):
        return None
    cold = _cold_room(st, model)
    if not cold:
        return None
    dev = min(cold, key=lambda d: (load_us(st, model, d), d.device_id))
    cost = load_us(st, model, dev)
    if wait_us <= cost:
        return None
    why = (
        f"best replica {best.replica_id} would make {step.key} wait {wait_us} us, "
        f"more than loading {model.key} on cold device {dev.device_id} ({cost} us)"
    )
    return start_load(st, model, why, device=dev)


def _cold_room(st: CoreState, model: ModelSpec) -> list[DeviceSpec]:
    """Cold-pool devices up with room for one more single-device replica of ``model`` (none
    for a tensor-parallel model: scale-out loads single-device replicas only)."""
    if model.tp_degree > 1:
        return []
    return [d.spec for d in st.cluster.cold_devices() if d.up and d.free_mib >= model.memory_mib]
