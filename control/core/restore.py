"""Restoring a device's replicas when it comes back (a worker restarted, a device repaired).

The core is the one owner of this decision: a driver only reports the device down and up
again (``DeviceDown``, ``DeviceUp``) and loads what the core asks. When a device goes down the
core notes the replicas it held (:func:`note_lost`); on the first step that finds it up again
it loads each one back on it (:func:`restore_lost`), unless the model already has as many
replicas serving as it had before the loss (the core loaded a replacement elsewhere meanwhile,
for the work that waited): a replica is never loaded twice for one loss. Speculative preloads,
replicas not routable (draining in a rollout) and tensor-parallel groups are not restored;
demand loads them again where it needs them. Pure: no I/O, no clock.
"""

from __future__ import annotations

from control.core.actions import LoadModel
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.loads import load_us
from control.core.parts import ActionLog, Ids
from control.core.state import ReplicaRecord
from control.core.types import ModelSpec, ReplicaState


def note_lost(cluster: Cluster, device_id: str, reason: str) -> None:
    """Remember the replicas ``device_id`` holds as it goes down (call before they are
    dropped), with how many replicas of each model served then."""
    dev = cluster.devices[device_id]
    lost = cluster.lost.setdefault(device_id, [])
    for rid in sorted(dev.replicas):
        rec = cluster.replicas[rid]
        if rec.speculative or not rec.routable or len(rec.devices) != 1:
            continue
        if rec.state not in (ReplicaState.READY, ReplicaState.LOADING):
            continue
        before = len(cluster.serving(rec.model.key))
        lost.append((rec.model, rec.pool, before, reason))
    if not lost:
        cluster.lost.pop(device_id, None)


def restore_lost(pol: Policies, cluster: Cluster, ids: Ids, log: ActionLog, now: float) -> int:
    """Load back the replicas of every device that is up again (see the module); returns how
    many loads were emitted."""
    started = 0
    for device_id in sorted(cluster.lost):
        dev = cluster.devices.get(device_id)
        if dev is None or not dev.up:
            continue
        for model, pool, before, reason in cluster.lost.pop(device_id):
            serving = len(cluster.serving(model.key))
            if serving >= before or dev.free_mib < model.memory_mib:
                log.counters["fleet.restores_skipped"] += 1
                continue
            why = (f"restore {model.key} on {device_id}, back up: its replica was lost when the "
                   f"device went down ({reason}); {serving} of {before} replica(s) serve it")  # fmt: skip
            _load(pol, cluster, ids, log, model, pool, device_id, why, now)
            started += 1
    log.counters["fleet.replicas_restored"] += started
    return started


def _load(
    pol: Policies, cluster: Cluster, ids: Ids, log: ActionLog, model: ModelSpec, pool: str,
    device_id: str, reason: str, now: float,
) -> None:  # fmt: skip
    spec = cluster.devices[device_id].spec
    rid = ids.next_id(f"{model.key}@{device_id}#")
    rec = ReplicaRecord(rid, model, (spec,), pool, ReplicaState.LOADING,
                        pol.config.prefix_capacity_blocks)  # fmt: skip
    rec.ready_at = now + load_us(pol.latency, model, spec) / 1e6
    rec.load_reason = reason
    rec.last_used = now
    cluster.add_replica(rec)
    log.emit(LoadModel(rid, model.key, (device_id,), pool, False, reason))
