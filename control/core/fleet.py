"""Fleet events: devices and replicas coming and going.

``apply_*`` functions change state only. Failures that need decisions (re-routing queued
steps, retrying steps in flight) are applied inside ``step`` through ``fail_replica``.
"""

from __future__ import annotations

from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.errors import UnknownDeviceError, UnknownModelError, UnknownReplicaError
from control.core.events import ReplicaLoaded
from control.core.parts import ActionLog, Catalog, Queues, Runs
from control.core.queueing import dequeue
from control.core.recovery import recompute_lost
from control.core.restore import note_lost
from control.core.runs import fail_step
from control.core.state import DeviceRecord, ReplicaRecord
from control.core.types import DeviceSpec, ReplicaState


def apply_device_up(cluster: Cluster, spec: DeviceSpec) -> None:
    dev = cluster.devices.get(spec.device_id)
    if dev is None:
        cluster.devices[spec.device_id] = DeviceRecord(spec)
    else:
        dev.spec, dev.up = spec, True
    cluster.devices_changed()


def apply_replica_loaded(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, ev: ReplicaLoaded,
    now: float,
) -> None:  # fmt: skip
    """Mark a loading replica ready, or adopt a replica loaded outside the core."""
    rec = cluster.replicas.get(ev.replica_id)
    if rec is None and ev.replica_id in cluster.evicted_loading:
        cluster.evicted_loading.discard(ev.replica_id)  # a load the core cancelled: late report
        return
    if rec is None:
        model = catalog.models.get(ev.model_key)
        if model is None:
            raise UnknownModelError(ev.model_key)
        if not ev.device_ids:
            raise UnknownReplicaError(ev.replica_id)
        for d in ev.device_ids:
            if d not in cluster.devices:
                raise UnknownDeviceError(d)
        specs = tuple(cluster.devices[d].spec for d in ev.device_ids)
        rec = ReplicaRecord(
            ev.replica_id,
            model,
            specs,
            ev.pool,
            ReplicaState.READY,
            pol.config.prefix_capacity_blocks,
        )
        cluster.add_replica(rec)
    rec.state = ReplicaState.READY
    rec.ready_at = now
    queues.dirty.add(rec.replica_id)


def fail_replica(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    replica_id: str, reason: str, now: float,
) -> None:  # fmt: skip
    """Drop a replica: its queued steps are routed again; its batches in flight are lost and each
    step is retried elsewhere without using its node's ``retries`` (see ``fail_step``)."""
    rec = cluster.replicas.get(replica_id)
    if rec is None:
        return
    if rec.speculative and not rec.used:
        cluster.preload["misses"] += 1
    for step in list(rec.queue.values()):
        dequeue(pol, cluster, queues, step, False, now)
        queues.ready.append(step)
    for batch_id in sorted(rec.running):
        batch = cluster.batches.pop(batch_id, None)
        cluster.dropped_batches.add(batch_id)
        for step in batch.items.values() if batch else ():
            if runs.is_live(step):
                fail_step(pol, runs, cluster, queues, log, step, reason, now, lost=True)
    rec.running.clear()
    rec.running_seqs = rec.loop_seqs = 0
    cluster.remove_replica(replica_id)
    rec.state = ReplicaState.FAILED
    queues.unbind_sessions(replica_id)
    log.counters["fleet.replicas_lost"] += 1


def device_down(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog, device_id: str,
    reason: str, now: float,
) -> None:  # fmt: skip
    dev = cluster.devices.get(device_id)
    if dev is None:
        raise UnknownDeviceError(device_id)
    if dev.up:
        note_lost(cluster, device_id, reason)  # restored when it is up again
    dev.up = False
    for rid in sorted(dev.replicas):
        fail_replica(
            pol, runs, cluster, queues, log, rid, f"device {device_id} down: {reason}", now
        )
    # outputs only this device held: recomputed now, not when a consumer fails on fetch
    recompute_lost(pol, runs, cluster, queues, log, device_id, reason, now)
