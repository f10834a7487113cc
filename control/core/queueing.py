"""Global scheduling: put each ready step in one replica's local queue (or run a tool step).

A model step goes to the replica with the lowest predicted completion (routing policy). When no
replica of the model exists, or every replica's wait is longer than loading a new one on the
cold pool, a cold load is emitted and the step queues on the loading replica instead of failing.
"""

from __future__ import annotations

from control.core.context import CoreState
from control.core.latency import service_us
from control.core.lifecycle import pick_variant
from control.core.loads import load_us, start_load
from control.core.routing.base import RoutingContext, StepDemand
from control.core.state import QueuedStep, ReplicaRecord


def enqueue(st: CoreState, step: QueuedStep, rec: ReplicaRecord) -> None:
    """Append to a replica's queue; tells tenancy (on_enqueue); marks the replica dirty."""
    b = rec.model.max_batch_size
    dt = rec.device.accelerator
    step.est_us = max(
        1,
        service_us(st.latency, rec.model.key, dt, b, step.input_tokens, step.max_output_tokens)
        // b,
    )
    step.replica_id = rec.replica_id
    step.arrival = st.now
    rec.queue[step.key] = step
    rec.queue_us += step.est_us
    st.cluster.backlogged.add(rec.replica_id)
    st.dirty.add(rec.replica_id)
    st.tenancy.on_enqueue(step.work, st.now)


def dequeue(st: CoreState, step: QueuedStep, dispatched: bool) -> None:
    """Remove from its replica queue; ``on_dequeue`` unless it leaves to be dispatched."""
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
    ctx = st.routing_ctx
    if ctx is None or ctx.now != st.now or ctx.sessions is not st.sessions:
        ctx = st.routing_ctx = RoutingContext(st.now, st.latency, st.config.transfer, st.sessions)
    demand = _demand(st, step)
    choice = st.routing.choose(demand, candidates, ctx)
    target: ReplicaRecord | None = None
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


def _maybe_scale_out(
    st: CoreState, step: QueuedStep, best: ReplicaRecord, wait_us: int
) -> ReplicaRecord | None:
    """Load a new cold-pool replica when even the best replica's wait exceeds the load time
    there (the load cost is then the cheaper delay). Returns the new replica or None."""
    model = best.model
    if wait_us <= load_us(st, model, best.device):
        return None
    cold = [
        d.spec
        for d in st.cluster.devices.values()
        if d.up and d.spec.pool == "cold" and d.free_mib >= model.memory_mib
    ]
    if not cold or model.tp_degree > 1:
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
