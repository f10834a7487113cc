"""Work stealing phase: idle replicas take queued work when the priced condition holds.

Thieves are replicas that are ready, free and have an empty queue. A thief looks at the most
delayed replica of its own model and moves steps from the back of that queue (the ones that
would wait longest) one at a time while ``price_steal`` says the move pays, up to one batch.
Idle cold-pool devices may also load a model whose replicas are badly backlogged, when the load
time plus lost cache is below the queue delay saved (the same priced rule).
"""

from __future__ import annotations

from control.core.actions import MoveStep
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.headroom_fit import fits
from control.core.latency import LatencyModel
from control.core.loads import load_us, start_load
from control.core.parts import ActionLog, Ids, Queues
from control.core.queueing import dequeue, enqueue
from control.core.routing.stealing import price_steal
from control.core.routing.transfer import inputs_us
from control.core.state import QueuedStep, ReplicaRecord
from control.core.types import ReplicaState


def _lost_cache_us(
    latency: LatencyModel,
    step: QueuedStep,
    victim: ReplicaRecord,
    thief: ReplicaRecord,
    block_tokens: int,
) -> int:
    """Prefill time the step would save on the victim's cache but not on the thief's."""
    if not step.prefix_blocks:
        return 0
    lost = step.hit_blocks - thief.prefix.match(step.prefix_blocks)
    if lost <= 0:
        return 0
    lat, key, dt = latency, victim.model.key, victim.device.accelerator
    full = lat.forward_us(key, dt, 1, step.input_tokens)
    return max(
        0, full - lat.forward_us(key, dt, 1, max(0, step.input_tokens - lost * block_tokens))
    )


def _transfer_delta(
    pol: Policies, step: QueuedStep, victim: ReplicaRecord, thief: ReplicaRecord
) -> int:
    costs, srcs, sizes = pol.config.transfer, step.input_devices, step.input_bytes
    to_thief = inputs_us(costs, srcs, sizes, thief.device)
    to_victim = inputs_us(costs, srcs, sizes, victim.device)
    return max(0, to_thief - to_victim)


def steal_into(
    pol: Policies, cluster: Cluster, queues: Queues, log: ActionLog, thief: ReplicaRecord,
    victim: ReplicaRecord, load: int, now: float,
) -> int:  # fmt: skip
    """Move steps from the back of ``victim``'s queue to ``thief`` while each move pays.
    ``load`` is the load time still ahead of the thief (0 when loaded). Returns moves made."""
    moved = 0
    cap = pol.batching.max_batch_size(thief.model)
    # the load is part of the price, so the thief's wait here excludes it
    thief_wait = thief.queue_us + int(max(0.0, thief.busy_until - now) * 1e6)
    for step in reversed(list(victim.queue.values())):
        if moved >= cap:
            break
        if not fits(pol, cluster, thief, step.work.priority_class):
            continue  # the thief's reservation holds its slots back from this class
        victim_wait = victim.wait_us(now) - step.est_us
        decision = price_steal(
            victim_wait, thief_wait, load,
            _lost_cache_us(pol.latency, step, victim, thief, pol.config.prefix_block_tokens),
            _transfer_delta(pol, step, victim, thief), pol.config.stealing,
        )  # fmt: skip
        if not decision.steal:
            break
        dequeue(pol, cluster, queues, step, False, now)
        enqueue(pol, cluster, queues, step, thief, now)
        thief_wait += step.est_us
        moved += 1
        why = (
            f"{thief.replica_id} idle takes {step.key} from {victim.replica_id}: {decision.reason}"
        )
        log.emit(MoveStep(step.key, victim.replica_id, thief.replica_id, why))
    return moved


def _victim(cluster: Cluster, model_key: str, exclude: str, now: float) -> ReplicaRecord | None:
    reps = [
        r
        for r in cluster.by_model.get(model_key, {}).values()
        if r.queue
        and r.replica_id != exclude
        and r.state in (ReplicaState.READY, ReplicaState.LOADING)
    ]
    return max(reps, key=lambda r: (r.wait_us(now), r.replica_id), default=None)


def steal_phase(
    pol: Policies, cluster: Cluster, queues: Queues, ids: Ids, log: ActionLog,
    idle_candidates: list[str], now: float,
) -> None:  # fmt: skip
    """Run stealing for replicas that may have become idle this step (sorted ids)."""
    if not pol.config.stealing.enabled:
        return
    for rid in idle_candidates:
        thief = cluster.replicas.get(rid)
        if thief is None or not thief.idle or not thief.routable:
            continue
        victim = _victim(cluster, thief.model.key, rid, now)
        if victim is not None:
            steal_into(pol, cluster, queues, log, thief, victim, 0, now)
    if pol.config.stealing.allow_loads:
        _steal_with_load(pol, cluster, queues, ids, log, now)


def _steal_with_load(
    pol: Policies, cluster: Cluster, queues: Queues, ids: Ids, log: ActionLog, now: float
) -> None:
    """An idle cold device with room may load the most backlogged model to take its work."""
    cold = cluster.cold_devices()
    if not cold or not cluster.backlogged:
        return
    idle_cold = [d.spec for d in cold if d.up and not cluster.device_busy(d.spec.device_id)]
    if not idle_cold:
        return
    worst = max(
        (cluster.replicas[r] for r in cluster.backlogged),
        key=lambda r: (r.wait_us(now), r.replica_id),
    )
    model = worst.model
    for dev in sorted(idle_cold, key=lambda d: d.device_id):
        if cluster.devices[dev.device_id].free_mib < model.memory_mib or model.tp_degree > 1:
            continue
        cost = load_us(pol.latency, model, dev)
        last = next(reversed(worst.queue.values()))
        gain = worst.wait_us(now) - last.est_us
        if gain - cost <= pol.config.stealing.min_gain_us:
            return
        why = f"steal: {worst.replica_id} backlog {gain} us exceeds loading on {dev.device_id} ({cost} us)"
        thief = start_load(pol, cluster, ids, log, model, why, now, device=dev)
        if thief is not None:
            steal_into(pol, cluster, queues, log, thief, worst, cost, now)
        return
