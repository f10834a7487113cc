"""Late binding: ready steps wait per model, in fair-share order, until a replica can start them.

Binding a step to one replica's queue when it becomes ready makes it wait behind whatever that
replica already holds, whoever owns it: a light tenant's request queues behind a heavy tenant's
backlog and fair share can only reorder inside each local queue. With late binding (the default)
a ready step goes to its model's ``PendingQueue``; a replica takes work from there only when it
can start it soon (ready and free, or finishing within ``bind_ahead_us``), and only up to
``max_local_batches`` batches of bound work. The tenancy half's ``select`` decides which steps go
next, so the fair-share order holds across the whole model, not per replica.

Still bound at once: a session that stays on its replica (affinity under the balance guard), a
step whose prompt prefix a replica's cache probably holds when that replica is where it is
predicted to complete first (its queue against the prefill it saves; predicted better off
elsewhere, it waits fairly like any step), a step that triggers a cold load (it waits on the
loading replica), and every step when ``enabled`` is False. Among the replicas with room, each taken step goes where the routing
policy predicts the earliest completion (prefix-cache savings and input transfer included).
"""

from __future__ import annotations

from control.core.binding_config import BindingConfig  # noqa: F401  (re-exported)
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.parts import Queues
from control.core.state import QueuedStep, ReplicaRecord
from control.core.types import ReplicaState


def held(step: QueuedStep, candidates: list[ReplicaRecord]) -> bool:
    """Whether a candidate's cache probably holds the step's leading prefix block (then the
    step is routed at once: see the module's docstring)."""
    first = step.prefix_blocks[:1]
    return bool(first) and any(c.prefix.match(first) for c in candidates)


def park(pol: Policies, queues: Queues, step: QueuedStep, now: float) -> None:
    """Put a ready step in its model's pending queue; tells tenancy (``on_enqueue``)."""
    step.replica_id = None
    step.route = None  # a routing decision made before it was parked no longer holds
    step.pending_model = step.model_key
    step.arrival = now
    queues.pending_of(step.model_key or "").push(step, pol.tenancy)
    pol.tenancy.on_enqueue(step.work, now)


def unpark(pol: Policies, queues: Queues, step: QueuedStep, dispatched: bool, now: float) -> None:
    """Take a step out of its pending queue (cancelled or re-routed: ``on_dequeue``)."""
    queue = queues.pending.get(step.pending_model or "")
    step.pending_model = None
    if queue is not None and queue.remove(step) and not dispatched:
        pol.tenancy.on_dequeue(step.key, now)


def room(pol: Policies, rec: ReplicaRecord, now: float) -> int:
    """How many pending steps ``rec`` may take now (0 unless it can start them soon)."""
    if not rec.routable or (rec.running and rec.breaker != "closed"):
        return 0  # no new work, or its breaker's probe runs (``breakers``)
    ahead = pol.take_ahead_s
    if rec.state == ReplicaState.READY:
        if rec.running and rec.busy_until - ahead > now:
            return 0
    elif rec.state != ReplicaState.LOADING or rec.ready_at - now > ahead:
        return 0
    cap = pol.batching.max_batch_size(rec.model) * pol.config.binding.max_local_batches
    return max(0, cap - len(rec.queue))


def rooms_of(pol: Policies, cluster: Cluster, model_key: str, now: float) -> dict[str, int]:
    """replica id -> ``room`` for every replica of the model with room, in ``by_model`` order.

    The same figures as calling ``room`` per replica; written out once because the core asks
    for them on every step while a model has pending work."""
    reps = cluster.by_model.get(model_key)
    if not reps:
        return {}
    ahead = pol.take_ahead_s
    ready, loading = ReplicaState.READY, ReplicaState.LOADING
    batching, per = pol.batching, pol.config.binding.max_local_batches
    rooms: dict[str, int] = {}
    for rec in reps.values():
        # the most common replica by far is a busy ready one: it is ruled out first
        if rec.running and rec.busy_until - ahead > now and rec.state == ready:
            continue
        if not rec.routable or (rec.running and rec.breaker != "closed"):
            continue
        state = rec.state
        if state != ready and (state != loading or rec.ready_at - now > ahead):
            continue
        n = batching.max_batch_size(rec.model) * per - len(rec.queue)
        if n > 0:
            rooms[rec.replica_id] = n
    return rooms
