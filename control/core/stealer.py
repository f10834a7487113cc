"""Work stealing phase: idle replicas take queued work when the priced condition holds.

Thieves are replicas that are ready, free and have an empty queue. A thief looks at the most
delayed replica of its own model and moves steps from the back of that queue (the ones that
would wait longest) one at a time while ``price_steal`` says the move pays, up to one batch.
Idle cold-pool devices may also load a model whose replicas are badly backlogged, when the load
time plus lost cache is below the queue delay saved (the same priced rule).
"""

from __future__ import annotations

from control.core.actions import MoveStep
from control.core.context import CoreState
from control.core.loads import load_us, start_load
from control.core.queueing import dequeue, enqueue
from control.core.routing.stealing import price_steal
from control.core.state import QueuedStep, ReplicaRecord
from control.core.types import BLOCK_TOKENS, ReplicaState


def _lost_cache_us(
    st: CoreState, step: QueuedStep, victim: ReplicaRecord, thief: ReplicaRecord
) -> int:
    """Prefill time the step would save on the victim's cache but not on the thief's."""
    if not step.prefix_blocks:
        return 0
    lost = step.hit_blocks - thief.prefix.match(step.prefix_blocks)
    if lost <= 0:
        return 0
    lat, key, dt = st.latency, victim.model.key, victim.device.accelerator
    full = lat.forward_us(key, dt, 1, step.input_tokens)
    return max(
        0, full - lat.forward_us(key, dt, 1, max(0, step.input_tokens - lost * BLOCK_TOKENS))
    )


def _transfer_delta(
    st: CoreState, step: QueuedStep, victim: ReplicaRecord, thief: ReplicaRecord
) -> int:
    costs = st.config.transfer
    to_thief = sum(costs.cost_us(d, thief.device) for d in step.input_devices)
    to_victim = sum(costs.cost_us(d, victim.device) for d in step.input_devices)
    return max(0, to_thief - to_victim)


def steal_into(st: CoreState, thief: ReplicaRecord, victim: ReplicaRecord, load: int) -> int:
    """Move steps from the back of ``victim``'s queue to ``thief`` while each move pays.
    ``load`` is the load time still ahead of the thief (0 when loaded). Returns moves made."""
    moved = 0
    cap = st.batching.max_batch_size(thief.model)
    # the load is part of the price, so the thief's wait here excludes it
    thief_wait = thief.queue_us + int(max(0.0, thief.busy_until - st.now) * 1e6)
    for step in reversed(list(victim.queue.values())):
        if moved >= cap:
            break
        victim_wait = victim.wait_us(st.now) - step.est_us
        decision = price_steal(
            victim_wait, thief_wait, load,
            _lost_cache_us(st, step, victim, thief), _transfer_delta(st, step, victim, thief),
            st.config.stealing,
        )  # fmt: skip
        if not decision.steal:
            break
        dequeue(st, step, dispatched=False)
        enqueue(st, step, thief)
        thief_wait += step.est_us
        moved += 1
        why = (
            f"{thief.replica_id} idle takes {step.key} from {victim.replica_id}: {decision.reason}"
        )
        st.emit(MoveStep(step.key, victim.replica_id, thief.replica_id, why))
    return moved


def _victim(st: CoreState, model_key: str, exclude: str) -> ReplicaRecord | None:
    reps = [
        r
        for r in st.cluster.by_model.get(model_key, {}).values()
        if r.queue
        and r.replica_id != exclude
        and r.state in (ReplicaState.READY, ReplicaState.LOADING)
    ]
    return max(reps, key=lambda r: (r.wait_us(st.now), r.replica_id), default=None)


def steal_phase(st: CoreState, idle_candidates: list[str]) -> None:
    """Run stealing for replicas that may have become idle this step (sorted ids)."""
    if not st.config.stealing.enabled:
        return
    for rid in idle_candidates:
        thief = st.cluster.replicas.get(rid)
        if thief is None or not thief.idle or not thief.routable:
            continue
        victim = _victim(st, thief.model.key, rid)
        if victim is not None:
            steal_into(st, thief, victim, 0)
    if st.config.stealing.allow_loads:
        _steal_with_load(st)


def _steal_with_load(st: CoreState) -> None:
    """An idle cold device with room may load the most backlogged model to take its work."""
    cold = st.cluster.cold_devices()
    if not cold or not st.cluster.backlogged:
        return
    idle_cold = [d.spec for d in cold if d.up and not st.cluster.device_busy(d.spec.device_id)]
    if not idle_cold:
        return
    worst = max(
        (st.cluster.replicas[r] for r in st.cluster.backlogged),
        key=lambda r: (r.wait_us(st.now), r.replica_id),
    )
    model = worst.model
    for dev in sorted(idle_cold, key=lambda d: d.device_id):
        if st.cluster.devices[dev.device_id].free_mib < model.memory_mib or model.tp_degree > 1:
            continue
        cost = load_us(st, model, dev)
        last = next(reversed(worst.queue.values()))
        gain = worst.wait_us(st.now) - last.est_us
        if gain - cost <= st.config.stealing.min_gain_us:
            return
        why = f"steal: {worst.replica_id} backlog {gain} us exceeds loading on {dev.device_id} ({cost} us)"
        thief = start_load(st, model, why, device=dev)
        if thief is not None:
            steal_into(st, thief, worst, cost)
        return
