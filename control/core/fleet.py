"""Fleet events: devices and replicas coming and going.

``apply_*`` functions change state only. Failures that need decisions (re-routing queued
steps, retrying steps in flight) are applied inside ``step`` through ``fail_replica``.
"""

from __future__ import annotations

from control.core.context import CoreState
from control.core.errors import UnknownDeviceError, UnknownModelError, UnknownReplicaError
from control.core.events import ReplicaLoaded
from control.core.queueing import dequeue
from control.core.runs import fail_step
from control.core.state import DeviceRecord, ReplicaRecord
from control.core.types import DeviceSpec, ReplicaState


def apply_device_up(st: CoreState, spec: DeviceSpec) -> None:
    dev = st.cluster.devices.get(spec.device_id)
    if dev is None:
        st.cluster.devices[spec.device_id] = DeviceRecord(spec)
    else:
        dev.spec, dev.up = spec, True
    st.cluster.devices_changed()


def apply_replica_loaded(st: CoreState, ev: ReplicaLoaded) -> None:
    """Mark a loading replica ready, or adopt a replica loaded outside the core."""
    rec = st.cluster.replicas.get(ev.replica_id)
    if rec is None and ev.replica_id in st.evicted_loading:
        st.evicted_loading.discard(ev.replica_id)  # a load the core cancelled: late report
        return
    if rec is None:
        model = st.models.get(ev.model_key)
        if model is None:
            raise UnknownModelError(ev.model_key)
        if not ev.device_ids:
            raise UnknownReplicaError(ev.replica_id)
        for d in ev.device_ids:
            if d not in st.cluster.devices:
                raise UnknownDeviceError(d)
        specs = tuple(st.cluster.devices[d].spec for d in ev.device_ids)
        rec = ReplicaRecord(
            ev.replica_id,
            model,
            specs,
            ev.pool,
            ReplicaState.READY,
            st.config.prefix_capacity_blocks,
        )
        st.cluster.add_replica(rec)
    rec.state = ReplicaState.READY
    rec.ready_at = st.now
    st.dirty.add(rec.replica_id)


def fail_replica(st: CoreState, replica_id: str, reason: str) -> None:
    """Drop a replica: its queued steps are routed again; its batches in flight are lost and each
    step is retried elsewhere without using its node's ``retries`` (see ``fail_step``)."""
    rec = st.cluster.replicas.get(replica_id)
    if rec is None:
        return
    if rec.speculative and not rec.used:
        st.preload["misses"] += 1
    for step in list(rec.queue.values()):
        dequeue(st, step, dispatched=False)
        st.ready.append(step)
    for batch_id in sorted(rec.running):
        batch = st.batches.pop(batch_id, None)
        st.dropped_batches.add(batch_id)
        for step in batch.items.values() if batch else ():
            if st.steps.get(step.key) is step:
                fail_step(st, step, reason, lost=True)
    rec.running.clear()
    rec.running_seqs = rec.loop_seqs = 0
    st.cluster.remove_replica(replica_id)
    rec.state = ReplicaState.FAILED
    st.sessions = {s: r for s, r in st.sessions.items() if r != replica_id}
    st.counters["fleet.replicas_lost"] += 1


def device_down(st: CoreState, device_id: str, reason: str) -> None:
    dev = st.cluster.devices.get(device_id)
    if dev is None:
        raise UnknownDeviceError(device_id)
    dev.up = False
    for rid in sorted(dev.replicas):
        fail_replica(st, rid, f"device {device_id} down: {reason}")
