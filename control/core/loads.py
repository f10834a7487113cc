"""Model loads: cold-pool placement of cold loads, evictions to make room, speculative preload.

Cold loads (a model with no replica, a load priced as worth it by routing or stealing, a
preload) only ever target devices of the cold pool, so a hot replica is never paused by a load.
"""

from __future__ import annotations

from control.core.actions import EvictReplica, LoadModel
from control.core.context import CoreState
from control.core.state import ReplicaRecord
from control.core.types import DeviceSpec, ModelSpec, ReplicaState


def load_us(st: CoreState, model: ModelSpec, device: DeviceSpec) -> int:
    """Predicted load time of ``model`` on ``device`` (measured, else the spec's figure)."""
    measured = st.latency.load_us(model.key, device.accelerator)
    return measured if measured is not None else int(model.load_time_s * 1e6)


def _evictable(st: CoreState, device_id: str) -> list[ReplicaRecord]:
    """Idle replicas on a cold device, least recently used first."""
    recs = [st.cluster.replicas[r] for r in st.cluster.devices[device_id].replicas]
    idle = [r for r in recs if r.idle and r.pool == "cold"]
    return sorted(idle, key=lambda r: (r.last_used, r.replica_id))


def _single_target(
    st: CoreState, model: ModelSpec
) -> tuple[DeviceSpec, list[ReplicaRecord]] | None:
    """Best-fit cold device for a 1-device replica, idle devices first; evicts LRU idle
    replicas when no device has room."""
    cold = [d for d in st.cluster.devices.values() if d.up and d.spec.pool == "cold"]
    fits = [d for d in cold if d.free_mib >= model.memory_mib]
    if fits:
        best = min(
            fits,
            key=lambda d: (st.cluster.device_busy(d.spec.device_id), d.free_mib, d.spec.device_id),
        )
        return best.spec, []
    options = []
    for d in sorted(cold, key=lambda d: d.spec.device_id):
        need = model.memory_mib - d.free_mib
        victims: list[ReplicaRecord] = []
        for r in _evictable(st, d.spec.device_id):
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


def _group_target(st: CoreState, model: ModelSpec) -> tuple[DeviceSpec, ...] | None:
    """``tp_degree`` cold devices of one interconnect group, each with room (no evictions)."""
    groups: dict[str, list[DeviceSpec]] = {}
    for d in sorted(st.cluster.devices.values(), key=lambda d: d.spec.device_id):
        if d.up and d.spec.pool == "cold" and d.free_mib >= model.memory_mib:
            groups.setdefault(d.spec.interconnect_group or d.spec.node_id, []).append(d.spec)
    for name in sorted(groups):
        if len(groups[name]) >= model.tp_degree:
            return tuple(groups[name][: model.tp_degree])
    return None


def _least_busy(st: CoreState, model: ModelSpec) -> tuple[DeviceSpec, str] | None:
    """With no cold pool at all (e.g. a 2-slot CPU machine): the up device with room whose
    replicas have the least predicted work, and a sentence saying so."""
    if model.tp_degree > 1:
        return None
    now = st.now
    options = []
    for d in st.cluster.devices.values():
        if d.up and d.free_mib >= model.memory_mib:
            busy = sum(st.cluster.replicas[r].wait_us(now) for r in d.replicas)
            options.append((busy, -d.free_mib, d.spec.device_id, d.spec))
    if not options:
        return None
    busy, _, dev_id, spec = min(options)
    return (
        spec,
        f"no cold-pool device exists; chose least-busy device {dev_id} ({busy} us of work queued there)",
    )


def start_load(
    st: CoreState, model: ModelSpec, reason: str, speculative: bool = False,
    device: DeviceSpec | None = None, fallback: bool = False,
) -> ReplicaRecord | None:  # fmt: skip
    """Emit a cold load (with any evictions it needs) and register the LOADING replica.

    ``device`` pins the target (it must be a cold-pool device with room). With ``fallback`` and
    no up cold-pool device at all, the least-busy device with room takes the load (the reason
    says so). Returns None, emitting nothing, when no device can hold the model.
    """
    victims: list[ReplicaRecord] = []
    no_cold = not any(d.up and d.spec.pool == "cold" for d in st.cluster.devices.values())
    if device is None and fallback and no_cold:
        chosen = _least_busy(st, model)
        if chosen is None:
            return None
        device, why = chosen
        reason = f"{reason}; {why}"
    if device is not None and no_cold and fallback:
        if st.cluster.devices[device.device_id].free_mib < model.memory_mib:
            return None
        devices: tuple[DeviceSpec, ...] = (device,)
    elif device is not None:
        if (
            device.pool != "cold"
            or st.cluster.devices[device.device_id].free_mib < model.memory_mib
        ):
            return None
        devices = (device,)
    elif model.tp_degree > 1:
        group = _group_target(st, model)
        if group is None:
            return None
        devices = group
    else:
        target = _single_target(st, model)
        if target is None:
            return None
        devices, victims = (target[0],), target[1]
    for v in victims:
        evict(st, v, f"make room for a cold load of {model.key} on {devices[0].device_id}")
    rid = st.next_id(f"{model.key}@{devices[0].device_id}#")
    pool = devices[0].pool
    rec = ReplicaRecord(
        rid, model, devices, pool, ReplicaState.LOADING, st.config.prefix_capacity_blocks
    )
    rec.ready_at = st.now + load_us(st, model, devices[0]) / 1e6
    rec.speculative = speculative
    rec.load_reason = reason
    rec.last_used = st.now
    st.cluster.add_replica(rec)
    if speculative:
        st.preload["issued"] += 1
    st.emit(
        LoadModel(rid, model.key, tuple(d.device_id for d in devices), pool, speculative, reason)
    )
    return rec


def evict(st: CoreState, rec: ReplicaRecord, reason: str) -> None:
    """Unload an idle replica now (its memory is free for the next load in this plan)."""
    if rec.speculative and not rec.used:
        st.preload["misses"] += 1
    st.cluster.remove_replica(rec.replica_id)
    if rec.state == ReplicaState.LOADING:
        st.evicted_loading.add(rec.replica_id)  # its ReplicaLoaded may still arrive
    rec.state = ReplicaState.UNLOADED
    st.emit(
        EvictReplica(rec.replica_id, rec.model.key, tuple(d.device_id for d in rec.devices), reason)
    )


def mark_used(st: CoreState, rec: ReplicaRecord) -> None:
    """A replica got work: a speculative preload counts as a hit the first time."""
    rec.last_used = st.now
    if rec.speculative and not rec.used:
        st.preload["hits"] += 1
    rec.used = True


def preload_for_run(
    st: CoreState, model_keys: tuple[str, ...], run_id: str, now_ready: frozenset[str]
) -> None:
    """Speculative preloading: models later nodes of a starting run need, with no replica."""
    if not st.config.speculative_preload:
        return
    for key in model_keys:
        if key in now_ready or st.cluster.by_model.get(key):
            continue
        reason = f"run {run_id} will need {key} at a later node and no replica holds it"
        start_load(st, st.models[key], reason, speculative=True)
