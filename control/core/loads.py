"""Model loads: cold-pool placement of cold loads, evictions to make room, speculative preload.

Cold loads (a model with no replica, a load priced as worth it by routing or stealing, a
preload) only ever target devices of the cold pool, so a hot replica is never paused by a load.
"""

from __future__ import annotations

from control.core.actions import EvictReplica, LoadModel
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.latency import LatencyModel
from control.core.parts import ActionLog, Catalog, Ids
from control.core.state import ReplicaRecord
from control.core.types import DeviceSpec, ModelSpec, ReplicaState


def load_us(latency: LatencyModel, model: ModelSpec, device: DeviceSpec) -> int:
    """Predicted load time of ``model`` on ``device`` (measured, else the spec's figure)."""
    measured = latency.load_us(model.key, device.accelerator)
    return measured if measured is not None else int(model.load_time_s * 1e6)


def _evictable(cluster: Cluster, device_id: str) -> list[ReplicaRecord]:
    """Idle replicas on a cold device, least recently used first."""
    recs = [cluster.replicas[r] for r in cluster.devices[device_id].replicas]
    idle = [r for r in recs if r.idle and r.pool == "cold"]
    return sorted(idle, key=lambda r: (r.last_used, r.replica_id))


def _single_target(
    cluster: Cluster, model: ModelSpec
) -> tuple[DeviceSpec, list[ReplicaRecord]] | None:
    """Best-fit cold device for a 1-device replica, idle devices first; evicts LRU idle
    replicas when no device has room."""
    cold = [d for d in cluster.devices.values() if d.up and d.spec.pool == "cold"]
    fits = [d for d in cold if d.free_mib >= model.memory_mib]
    if fits:
        best = min(
            fits,
            key=lambda d: (cluster.device_busy(d.spec.device_id), d.free_mib, d.spec.device_id),
        )
        return best.spec, []
    options = []
    for d in sorted(cold, key=lambda d: d.spec.device_id):
        need = model.memory_mib - d.free_mib
        victims: list[ReplicaRecord] = []
        for r in _evictable(cluster, d.spec.device_id):
            if need <= 0:
                break
            victims.append(r)
            need -= r.model.memory_mib
        if need <= 0 and d.spec.memory_mib >= model.memory_mib:
            options.append((len(victims), d.spec.device_id, d.spec, victims))
    if not options:
        return None
    _, _, spec, victims = min(options, key=lambda o: (o[0], o[1]))
    return spec, victims


def _group_target(cluster: Cluster, model: ModelSpec) -> tuple[DeviceSpec, ...] | None:
    """``tp_degree`` cold devices of one interconnect group, each with room (no evictions)."""
    groups: dict[str, list[DeviceSpec]] = {}
    for d in sorted(cluster.devices.values(), key=lambda d: d.spec.device_id):
        if d.up and d.spec.pool == "cold" and d.free_mib >= model.memory_mib:
            groups.setdefault(d.spec.interconnect_group or d.spec.node_id, []).append(d.spec)
    for name in sorted(groups):
        if len(groups[name]) >= model.tp_degree:
            return tuple(groups[name][: model.tp_degree])
    return None


def _least_busy(cluster: Cluster, model: ModelSpec, now: float) -> tuple[DeviceSpec, str] | None:
    """With no cold pool at all (e.g. a 2-slot CPU machine): the up device with room whose
    replicas have the least predicted work, and a sentence saying so."""
    if model.tp_degree > 1:
        return None
    options = []
    for d in cluster.devices.values():
        if d.up and d.free_mib >= model.memory_mib:
            busy = sum(cluster.replicas[r].wait_us(now) for r in d.replicas)
            options.append((busy, -d.free_mib, d.spec.device_id, d.spec))
    if not options:
        return None
    busy, _, dev_id, spec = min(options)
    return (
        spec,
        f"no cold-pool device exists; chose least-busy device {dev_id} ({busy} us of work queued there)",
    )


def _where(
    cluster: Cluster, model: ModelSpec, device: DeviceSpec | None, fallback: bool, now: float
) -> tuple[tuple[DeviceSpec, ...], list[ReplicaRecord], str] | None:
    """(devices to load on, idle replicas to evict first, a note for the reason) for a cold
    load (see ``start_load``), or None when no device can hold the model."""
    no_cold = not any(d.up and d.spec.pool == "cold" for d in cluster.devices.values())
    note = ""
    if device is None and fallback and no_cold:
        chosen = _least_busy(cluster, model, now)
        if chosen is None:
            return None
        device, why = chosen
        note = f"; {why}"
    if device is not None and no_cold and fallback:
        if cluster.devices[device.device_id].free_mib < model.memory_mib:
            return None
        return (device,), [], note
    if device is not None:
        if device.pool != "cold" or cluster.devices[device.device_id].free_mib < model.memory_mib:
            return None
        return (device,), [], note
    if model.tp_degree > 1:
        group = _group_target(cluster, model)
        return None if group is None else (group, [], note)
    target = _single_target(cluster, model)
    return None if target is None else ((target[0],), target[1], note)


def start_load(
    pol: Policies, cluster: Cluster, ids: Ids, log: ActionLog, model: ModelSpec, reason: str,
    now: float, speculative: bool = False, device: DeviceSpec | None = None,
    fallback: bool = False,
) -> ReplicaRecord | None:  # fmt: skip
    """Emit a cold load (with any evictions it needs) and register the LOADING replica.

    ``device`` pins the target (it must be a cold-pool device with room). With ``fallback`` and
    no up cold-pool device at all, the least-busy device with room takes the load (the reason
    says so). Returns None, emitting nothing, when no device can hold the model or the model
    already has its autoscaling ``max_replicas`` serving (``cluster.replica_caps``).
    """
    cap = cluster.replica_caps.get(model.key)
    if cap is not None and len(cluster.serving(model.key)) >= cap:
        return None
    where = _where(cluster, model, device, fallback, now)
    if where is None:
        return None
    devices, victims, note = where
    reason += note
    for v in victims:
        evict(
            cluster, log, v, f"make room for a cold load of {model.key} on {devices[0].device_id}"
        )
    rid = ids.next_id(f"{model.key}@{devices[0].device_id}#")
    pool = devices[0].pool
    rec = ReplicaRecord(
        rid, model, devices, pool, ReplicaState.LOADING, pol.config.prefix_capacity_blocks
    )
    rec.ready_at = now + load_us(pol.latency, model, devices[0]) / 1e6
    rec.speculative = speculative
    rec.load_reason = reason
    rec.last_used = now
    cluster.add_replica(rec)
    if speculative:
        cluster.preload["issued"] += 1
    log.emit(
        LoadModel(rid, model.key, tuple(d.device_id for d in devices), pool, speculative, reason)
    )
    return rec


def evict(cluster: Cluster, log: ActionLog, rec: ReplicaRecord, reason: str) -> None:
    """Unload an idle replica now (its memory is free for the next load in this plan)."""
    if rec.speculative and not rec.used:
        cluster.preload["misses"] += 1
    cluster.remove_replica(rec.replica_id)
    if rec.state == ReplicaState.LOADING:
        cluster.evicted_loading.add(rec.replica_id)  # its ReplicaLoaded may still arrive
    rec.state = ReplicaState.UNLOADED
    log.emit(
        EvictReplica(rec.replica_id, rec.model.key, tuple(d.device_id for d in rec.devices), reason)
    )


def mark_used(cluster: Cluster, rec: ReplicaRecord, now: float) -> None:
    """A replica got work: a speculative preload counts as a hit the first time."""
    rec.last_used = now
    if rec.speculative and not rec.used:
        cluster.preload["hits"] += 1
    rec.used = True


def preload_for_run(
    pol: Policies, catalog: Catalog, cluster: Cluster, ids: Ids, log: ActionLog,
    model_keys: tuple[str, ...], run_id: str, now_ready: frozenset[str], now: float,
) -> None:  # fmt: skip
    """Speculative preloading: models later nodes of a starting run need, with no replica."""
    if not pol.config.speculative_preload:
        return
    for key in model_keys:
        if key in now_ready or cluster.by_model.get(key):
            continue
        reason = f"run {run_id} will need {key} at a later node and no replica holds it"
        start_load(pol, cluster, ids, log, catalog.models[key], reason, now, speculative=True)
