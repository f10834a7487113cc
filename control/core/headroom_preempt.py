"""Preemptible headroom that is given back: a class a reservation holds slots for takes them
back from lower-class work that borrowed them and has not started.

A borrowable reservation lends its slots to other classes, preemptibly (``HeadroomGuard``).
Before pending work is bound (the routing phase), for every model with pending steps and no
idle replica on a reserved device (binding keeps such a replica for the classes held there:
``headroom_fit``), each pending class the guard lets in over a reserved pool full of
preemptible work (a class the reservation holds slots for) takes back, on the model's replicas
on reserved devices, as many borrowed slots as it has pending steps, the newest work first:

* a step bound to the replica's queue (not dispatched) goes back to its model's pending queue,
  under its own key: the executor never saw it;
* a batch sent ahead to a static replica behind the one it runs (dispatched, not started) is
  dropped, and its steps are requeued as fresh attempts (``dag.reissue``, not counted against
  the node's retries): the driver cancels the old ones, and a result that still comes (the
  batch started before the cancel arrived) is discarded and billed once.

The slots taken back are given to the pending steps of the class at once (bound to that
replica, in fair-share order). A started step is never taken back, and nothing is failed. Work is "borrowed" when the guard,
asked for its class over the pool with one slot left, would let it in only preemptibly.

Pure: reads the cluster and asks the tenancy half's guard; each take-back is a
``StepPreempted`` action with its reason.
"""

from __future__ import annotations

from control.core.actions import StepPreempted
from control.core.binding import park
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.dag.reissue import reissue
from control.core.headroom_fit import held_for, occupancy
from control.core.parts import ActionLog, Queues, Runs
from control.core.pending import PendingQueue
from control.core.queueing import dequeue, enqueue
from control.core.runs import add_step
from control.core.state import QueuedStep, ReplicaRecord
from control.core.tenancy.base import PoolUsage, priority_rank


def _usage(pol: Policies, cluster: Cluster, device_id: str, used: int, pre: int) -> dict:
    """The reserved pools as they are, ``device_id`` holding ``used`` of its slots (``pre``
    of them preemptible)."""
    usage = {d: PoolUsage(d, cap, min(cap, n)) for d, (cap, n) in occupancy(pol, cluster).items()}
    cap = usage[device_id].capacity_slots
    usage[device_id] = PoolUsage(device_id, cap, min(cap, used), pre)
    return usage


def _borrows(pol: Policies, cluster: Cluster, device_id: str, priority_class: str) -> bool:
    """Would a step of ``priority_class`` take the last slot of ``device_id`` only preemptibly?"""
    cap = occupancy(pol, cluster)[device_id][0]
    usage = _usage(pol, cluster, device_id, cap - 1, 0)
    return pol.tenancy.headroom_check(device_id, priority_class, usage).preemptible


def _unstarted_batches(rec: ReplicaRecord) -> list[str]:
    """Batches sent ahead to a static replica behind the one it runs, newest first."""
    if rec.model.continuous_batching or len(rec.running) < 2:
        return []
    by_end = sorted(rec.running, key=lambda b: (rec.running[b], b))
    return list(reversed(by_end[1:]))


def reclaim_headroom(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog, now: float
) -> None:
    """Take borrowed, unstarted work back for pending steps of the classes reservations hold
    slots for (see the module). Changes replica queues, pending queues, batches in flight."""
    if not pol.reserved_devices or not queues.pending:
        return
    for model_key in sorted(queues.pending):
        queue = queues.pending[model_key]
        if not queue.entries:
            continue
        reps = [
            r for r in cluster.by_model.get(model_key, {}).values()
            if r.device.device_id in pol.reserved_devices and r.routable
        ]  # fmt: skip
        if not reps or any(not r.running and not r.queue for r in reps):
            continue  # an idle reserved replica: binding keeps it for the held classes
        need: dict[str, int] = {}
        for _k, _s, step in queue.entries.values():
            cls = step.work.priority_class
            need[cls] = need.get(cls, 0) + 1
        for cls in sorted(need, key=priority_rank):
            for rec in reps:
                if need[cls] > 0 and held_for(pol, cluster, rec.device.device_id, cls):
                    taken = _take_back(pol, runs, cluster, queues, log, rec, cls, need[cls], now)
                    _give(pol, cluster, queues, queue, rec, cls, taken, now)
                    need[cls] -= taken


def _give(
    pol: Policies, cluster: Cluster, queues: Queues, queue: PendingQueue[QueuedStep],
    rec: ReplicaRecord,
    cls: str, slots: int, now: float,
) -> None:  # fmt: skip
    """Bind ``slots`` pending steps of ``cls`` (in fair-share order) to ``rec``, whose slots
    were taken back for them: left to binding, they could be bound elsewhere, behind the
    lower-class work there, and the requeued steps take the slots again."""
    if slots <= 0:
        return
    for step in queue.take(slots, pol.tenancy, now, frozenset([cls])):
        step.pending_model = None
        enqueue(pol, cluster, queues, step, rec, now, bound=True)


def _victim(pol: Policies, cluster: Cluster, rec: ReplicaRecord, step: QueuedStep,
            cls: str) -> bool:  # fmt: skip
    other = step.work.priority_class
    return priority_rank(other) > priority_rank(cls) and _borrows(
        pol, cluster, rec.device.device_id, other
    )


def _take_back(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    rec: ReplicaRecord, cls: str, need: int, now: float,
) -> int:  # fmt: skip
    """Take back up to ``need`` borrowed slots of ``rec`` for ``cls``; returns how many."""
    why = (f"{cls} work needs the headroom of {rec.device.device_id} it borrowed: requeued "
           "before it started")  # fmt: skip
    taken = 0
    queued = sorted(rec.queue.values(), key=lambda s: (s.arrival, s.key), reverse=True)
    for step in queued:
        if taken >= need:
            return taken
        if _victim(pol, cluster, rec, step, cls):
            dequeue(pol, cluster, queues, step, False, now)
            park(pol, queues, step, now)
            _emit(log, step, step.key, rec, False, why)
            taken += 1
    for batch_id in _unstarted_batches(rec):
        batch = cluster.batches.get(batch_id)
        if taken >= need or batch is None:
            break
        steps = list(batch.items.values())
        if not all(_victim(pol, cluster, rec, s, cls) for s in steps):
            continue
        del cluster.batches[batch_id]
        cluster.dropped_batches.add(batch_id)  # its late result (cancelled or not) is ignored
        rec.stop_running(batch_id, len(steps), now)
        for step in steps:
            _requeue_dispatched(pol, runs, cluster, queues, log, rec, step, why, now)
        taken += len(steps)
    return taken


def _requeue_dispatched(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    rec: ReplicaRecord, step: QueuedStep, why: str, now: float,
) -> None:  # fmt: skip
    """A step of a dropped batch: its next attempt, under a fresh key, goes back to routing."""
    if not runs.is_live(step):
        return
    runs.steps.pop(step.key, None)
    nxt = reissue(step.run.dag_run, step.key, False, why)
    if nxt is None:
        return
    _emit(log, step, nxt.key, rec, True, why)
    add_step(pol, runs, cluster, queues, step.run, nxt, now)


def _emit(log: ActionLog, step: QueuedStep, new_key: str, rec: ReplicaRecord,
          dispatched: bool, why: str) -> None:  # fmt: skip
    log.counters["headroom.preempted_steps"] += 1
    w = step.work
    log.emit(StepPreempted(w.request_id, step.key, new_key, step.ref.node_id, w.tenant_id,
                           w.priority_class, rec.replica_id, dispatched, why))  # fmt: skip
