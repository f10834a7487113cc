"""Immutable views of the core for the API, the console and the twin.

``build_snapshot`` copies what it shows into frozen dataclasses and tuples; nothing in a
snapshot aliases the core's mutable state. Each queued step carries a sentence saying why it
waits, followed by the tenancy half's own explanation. It reads every part and changes none.
The figures sampled every second are ``gauges``' (no explanations built).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from control.core.canary_stats import CanaryView
from control.core.cluster import Cluster
from control.core.context import CoreState, Policies
from control.core.gauges import PreloadStats, preload_stats
from control.core.parts import Queues, Rollout
from control.core.state import DeviceRecord, InflightBatch, QueuedStep, ReplicaRecord, RunRecord
from control.core.tenancy.base import QueuePositions
from control.core.values import keeps_dict


@dataclass(frozen=True)
class RunView:
    request_id: str
    tenant_id: str
    workflow: str
    status: str
    started_at: float
    nodes: Mapping[str, str]  # node id -> state
    live_steps: tuple[str, ...]


@dataclass(frozen=True)
class QueuedStepView:
    key: str
    request_id: str
    node_id: str
    tenant_id: str
    priority_class: str
    replica_id: str | None
    queued_since: float
    why: str


@dataclass(frozen=True)
class ReplicaView:
    replica_id: str
    model_key: str
    device_ids: tuple[str, ...]
    pool: str
    state: str
    queue_len: int
    queue_us: int
    speculative: bool
    used: bool
    running_batches: tuple[str, ...]  # in dispatch order; several: continuous or sent ahead
    running_seqs: int
    breaker: str = "closed"  # the executor's circuit breaker as the core routes by it
    adapters: tuple[str, ...] = ()  # LoRA adapters held, least recently used first (mirror)


@dataclass(frozen=True)
class DeviceView:
    device_id: str
    node_id: str
    accelerator: str
    pool: str
    up: bool
    memory_mib: int
    used_mib: int
    models: tuple[str, ...]


@dataclass(frozen=True)
class BatchView:
    batch_id: str
    replica_id: str | None
    model_key: str | None
    keys: tuple[str, ...]
    dispatched_at: float
    predicted_us: int


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class RolloutView:
    """Progress of the active (or last) rollout."""

    plan_id: str
    state: str  # loading | draining | completed | aborted | failed
    rollback: bool
    started_at: float
    loads_pending: tuple[str, ...]
    draining: tuple[str, ...]
    blocked: tuple[str, ...]  # "model@devices" loads waiting for memory
    loaded: int
    evicted: int
    moved: int
    reason: str


@dataclass(frozen=True)
class CoreSnapshot:
    now: float
    runs: tuple[RunView, ...]
    recently_finished: tuple[RunView, ...]
    queues: Mapping[str, tuple[QueuedStepView, ...]]  # replica id -> queue in arrival order
    unplaced: tuple[QueuedStepView, ...]
    devices: tuple[DeviceView, ...]
    replicas: tuple[ReplicaView, ...]
    batches: tuple[BatchView, ...]
    counters: Mapping[str, int]
    preload: PreloadStats
    tenancy: Any
    rollout: RolloutView | None = None
    splits: Mapping[str, tuple[tuple[str, int], ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    cold_starts: int = 0
    cold_starts_avoided: int = 0  # speculative preloads that were used before any request waited
    # model key -> steps not yet bound to a replica (late binding), in fair-share service order
    pending: Mapping[str, tuple[QueuedStepView, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # baseline model key -> its canary (running or last ended), see ``control.core.canary``
    canaries: Mapping[str, CanaryView] = field(default_factory=lambda: MappingProxyType({}))


def _run_view(run: RunRecord) -> RunView:
    dr = run.dag_run
    return RunView(
        run.request.request_id,
        run.request.tenant_id,
        run.request.workflow,
        run.status,
        run.started_at,
        MappingProxyType({n: str(s) for n, s in dr.state.items()}),
        tuple(dr.live),
    )


def _why(
    pol: Policies, step: QueuedStep, rec: ReplicaRecord | None, ahead: int, pos: QueuePositions,
    now: float,
) -> str:  # fmt: skip
    if rec is None:
        own = f"no cold-pool device has room to load {step.model_key} ({step.key} waits for memory)"
    elif rec.loading:
        left = max(0.0, rec.ready_at - now) * 1000
        own = f"waiting for {rec.model.key} to load on {rec.device.device_id} (~{left:.0f} ms left)"
    elif rec.running and rec.free_slots() == 0:
        left = max(0.0, rec.busy_until - now) * 1000
        batches = ", ".join(rec.running)
        own = (
            f"{rec.replica_id} is running batch {batches} (~{left:.0f} ms until it can start "
            f"more); {ahead} step(s) ahead in its queue"
        )
    elif rec.running:
        own = (
            f"joining the running decode loop of {rec.replica_id} ({rec.running_seqs} "
            f"sequences running, {rec.free_slots()} free) at the next step"
        )
    else:
        cap = pol.batching.max_batch_size(rec.model)
        own = (
            f"batch forming on {rec.replica_id}: {len(rec.queue)} of {cap} items; it dispatches "
            f"when full or when the oldest item's max delay is up"
        )
    return f"{own} | tenancy: {pol.tenancy.explain(step.work.request_id, now, pos)}"


def _step_view(
    pol: Policies, step: QueuedStep, rec: ReplicaRecord | None, ahead: int, pos: QueuePositions,
    now: float,
) -> QueuedStepView:  # fmt: skip
    w = step.work
    return QueuedStepView(
        step.key, w.request_id, step.node.node_id, w.tenant_id, w.priority_class,
        rec.replica_id if rec else None, step.arrival, _why(pol, step, rec, ahead, pos, now),
    )  # fmt: skip


def _pending_view(
    pol: Policies, cluster: Cluster, step: QueuedStep, ahead: int, pos: QueuePositions,
    now: float,
) -> QueuedStepView:  # fmt: skip
    model = step.model_key or ""
    reps = cluster.by_model.get(model, {})
    busy = sum(1 for r in reps.values() if r.free_slots() == 0)
    own = (
        f"waiting for a free replica of {model} ({busy} of {len(reps)} busy); "
        f"{ahead} step(s) ahead in the fair-share order"
    )
    why = f"{own} | tenancy: {pol.tenancy.explain(step.work.request_id, now, pos)}"
    w = step.work
    return QueuedStepView(
        step.key, w.request_id, step.node.node_id, w.tenant_id, w.priority_class, None,
        step.arrival, why,
    )  # fmt: skip


def _replica_view(r: ReplicaRecord) -> ReplicaView:
    return ReplicaView(
        r.replica_id, r.model.key, tuple(d.device_id for d in r.devices), r.pool, str(r.state),
        len(r.queue), r.queue_us, r.speculative, r.used, tuple(r.running), r.running_seqs,
        r.breaker, r.adapters.held(),
    )  # fmt: skip


def _device_view(cluster: Cluster, d: DeviceRecord) -> DeviceView:
    models = tuple(sorted(cluster.replicas[r].model.key for r in d.replicas))
    spec = d.spec
    return DeviceView(
        spec.device_id, spec.node_id, spec.accelerator, spec.pool, d.up, spec.memory_mib,
        d.used_mib, models,
    )  # fmt: skip


def _batch_view(b: InflightBatch) -> BatchView:
    return BatchView(
        b.batch_id, b.replica_id, b.model_key, tuple(b.items), b.dispatched_at, b.predicted_us
    )


def _rollout_view(ro: Rollout | None) -> RolloutView | None:
    if ro is None:
        return None
    return RolloutView(
        ro.plan_id, ro.state, ro.rollback, ro.started_at, tuple(sorted(ro.pending)),
        tuple(sorted(ro.draining)), tuple(f"{m}@{','.join(d)}" for m, d in ro.blocked),
        ro.loaded, ro.evicted, ro.moved, ro.reason,
    )  # fmt: skip


def _waiting(
    pol: Policies, cluster: Cluster, queues: Queues, now: float
) -> tuple[dict[str, tuple[QueuedStepView, ...]], tuple[QueuedStepView, ...],
           dict[str, tuple[QueuedStepView, ...]]]:  # fmt: skip
    """(replica queues, unplaced steps, pending queues), each step with why it waits; the
    fair-share order is computed once for every explanation."""
    pos = pol.tenancy.queue_positions(now)
    local = {
        rid: tuple(_step_view(pol, s, rec, i, pos, now) for i, s in enumerate(rec.queue.values()))
        for rid, rec in sorted(cluster.replicas.items())
        if rec.queue
    }
    unplaced = tuple(
        _step_view(pol, s, None, 0, pos, now)
        for k in sorted(queues.unplaced)
        for s in queues.unplaced[k]
    )
    pending = {
        model: tuple(
            _pending_view(pol, cluster, s, i, pos, now)
            for i, s in enumerate(q.ordered(pol.tenancy, now))
        )
        for model, q in sorted(queues.pending.items())
        if len(q)
    }
    return local, unplaced, pending


def build_snapshot(st: CoreState) -> CoreSnapshot:
    """Copy the core's state into immutable views (O(state log state); call it for display,
    not per step). Reads every part, changes none."""
    pol, cl, runs, counters = st.pol, st.cluster, st.runs, st.log.counters
    local, unplaced, pending = _waiting(pol, cl, st.queues, st.now)
    devices = tuple(_device_view(cl, d) for _, d in sorted(cl.devices.items()))
    batches = tuple(_batch_view(b) for b in cl.batches.values())
    preload = preload_stats(cl)
    return CoreSnapshot(
        now=st.now,
        runs=tuple(_run_view(r) for r in runs.active.values()),
        recently_finished=tuple(_run_view(r) for r in runs.finished),
        queues=MappingProxyType(local),
        unplaced=unplaced,
        devices=devices,
        replicas=tuple(_replica_view(r) for _, r in sorted(cl.replicas.items())),
        batches=batches,
        counters=MappingProxyType(dict(sorted(counters.items()))),
        preload=preload,
        tenancy=pol.tenancy.snapshot(),
        rollout=_rollout_view(st.rollouts.current),
        splits=MappingProxyType(dict(st.catalog.splits)),
        cold_starts=counters["loads.cold_starts"],
        cold_starts_avoided=preload.hits,
        pending=MappingProxyType(pending),
        canaries=MappingProxyType({k: c.view() for k, c in sorted(st.catalog.canaries.items())}),
    )
