"""Immutable views of the core for the API, the console and the twin.

``build_snapshot`` copies what it shows into frozen dataclasses and tuples; nothing in a
snapshot aliases the core's mutable state. Each queued step carries a sentence saying why it
waits, followed by the tenancy half's own explanation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from control.core.context import CoreState
from control.core.state import QueuedStep, ReplicaRecord, RunRecord
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


@dataclass(frozen=True)
class PreloadStats:
    issued: int
    hits: int
    misses: int
    hit_rate_milli: int | None  # hits / (hits + misses) in thousandths; None before any outcome


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
    st: CoreState, step: QueuedStep, rec: ReplicaRecord | None, ahead: int, pos: QueuePositions
) -> str:
    now = st.now
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
        cap = st.batching.max_batch_size(rec.model)
        own = (
            f"batch forming on {rec.replica_id}: {len(rec.queue)} of {cap} items; it dispatches "
            f"when full or when the oldest item's max delay is up"
        )
    return f"{own} | tenancy: {st.tenancy.explain(step.work.request_id, now, pos)}"


def _step_view(
    st: CoreState, step: QueuedStep, rec: ReplicaRecord | None, ahead: int, pos: QueuePositions
) -> QueuedStepView:
    w = step.work
    return QueuedStepView(
        step.key, w.request_id, step.node.node_id, w.tenant_id, w.priority_class,
        rec.replica_id if rec else None, step.arrival, _why(st, step, rec, ahead, pos),
    )  # fmt: skip


def _pending_view(
    st: CoreState, step: QueuedStep, ahead: int, pos: QueuePositions
) -> QueuedStepView:
    model = step.model_key or ""
    reps = st.cluster.by_model.get(model, {})
    busy = sum(1 for r in reps.values() if r.free_slots() == 0)
    own = (
        f"waiting for a free replica of {model} ({busy} of {len(reps)} busy); "
        f"{ahead} step(s) ahead in the fair-share order"
    )
    why = f"{own} | tenancy: {st.tenancy.explain(step.work.request_id, st.now, pos)}"
    w = step.work
    return QueuedStepView(
        step.key, w.request_id, step.node.node_id, w.tenant_id, w.priority_class, None,
        step.arrival, why,
    )  # fmt: skip


def _replica_view(r: ReplicaRecord) -> ReplicaView:
    return ReplicaView(
        r.replica_id, r.model.key, tuple(d.device_id for d in r.devices), r.pool, str(r.state),
        len(r.queue), r.queue_us, r.speculative, r.used, tuple(r.running), r.running_seqs,
    )  # fmt: skip


def _rollout_view(st: CoreState) -> RolloutView | None:
    ro = st.rollout
    if ro is None:
        return None
    return RolloutView(
        ro.plan_id, ro.state, ro.rollback, ro.started_at, tuple(sorted(ro.pending)),
        tuple(sorted(ro.draining)), tuple(f"{m}@{','.join(d)}" for m, d in ro.blocked),
        ro.loaded, ro.evicted, ro.moved, ro.reason,
    )  # fmt: skip


def build_snapshot(st: CoreState) -> CoreSnapshot:
    """Copy the core's state into immutable views (O(state log state): the fair-share order
    is computed once for every explanation; call it for display, not per step)."""
    cl = st.cluster
    pos = st.tenancy.queue_positions(st.now)
    queues = {
        rid: tuple(_step_view(st, s, rec, i, pos) for i, s in enumerate(rec.queue.values()))
        for rid, rec in sorted(cl.replicas.items())
        if rec.queue
    }
    unplaced = tuple(
        _step_view(st, s, None, 0, pos) for k in sorted(st.unplaced) for s in st.unplaced[k]
    )
    pending = {
        model: tuple(
            _pending_view(st, s, i, pos) for i, s in enumerate(q.ordered(st.tenancy, st.now))
        )
        for model, q in sorted(st.pending.items())
        if len(q)
    }
    devices = tuple(
        DeviceView(
            d.spec.device_id,
            d.spec.node_id,
            d.spec.accelerator,
            d.spec.pool,
            d.up,
            d.spec.memory_mib,
            d.used_mib,
            tuple(sorted(cl.replicas[r].model.key for r in d.replicas)),
        )  # fmt: skip
        for _, d in sorted(cl.devices.items())
    )
    batches = tuple(
        BatchView(
            b.batch_id, b.replica_id, b.model_key, tuple(b.items), b.dispatched_at, b.predicted_us
        )
        for b in st.batches.values()
    )
    preload = _preload_stats(st)
    return CoreSnapshot(
        now=st.now,
        runs=tuple(_run_view(r) for r in st.runs.values()),
        recently_finished=tuple(_run_view(r) for r in st.finished),
        queues=MappingProxyType(queues),
        unplaced=unplaced,
        devices=devices,
        replicas=tuple(_replica_view(r) for _, r in sorted(cl.replicas.items())),
        batches=batches,
        counters=MappingProxyType(dict(sorted(st.counters.items()))),
        preload=preload,
        tenancy=st.tenancy.snapshot(),
        rollout=_rollout_view(st),
        splits=MappingProxyType(dict(st.splits)),
        cold_starts=st.counters["loads.cold_starts"],
        cold_starts_avoided=preload.hits,
        pending=MappingProxyType(pending),
    )


@dataclass(frozen=True)
class CoreGauges:
    """The few figures the live metrics sample every second, in O(replicas + devices): no
    per-step views and no explanations (a full snapshot costs O(queued log queued) and is for
    display; sampled every second it stalled the driver under a backlog)."""

    #: steps waiting per model: queued on its replicas or for a replica ("unplaced": no
    #: replica can be placed yet)
    queue_depth: Mapping[str, int]
    runs_in_flight: int
    preload: PreloadStats
    device_ids: tuple[str, ...]


def _preload_stats(st: CoreState) -> PreloadStats:
    hits, misses = st.preload["hits"], st.preload["misses"]
    rate = hits * 1000 // (hits + misses) if hits + misses else None
    return PreloadStats(st.preload["issued"], hits, misses, rate)


def build_gauges(st: CoreState) -> CoreGauges:
    """The sampled figures of :class:`CoreGauges` (reads the state, changes nothing)."""
    depth: dict[str, int] = {}
    for rec in st.cluster.replicas.values():
        depth[rec.model.key] = depth.get(rec.model.key, 0) + len(rec.queue)
    for model, q in st.pending.items():
        depth[model] = depth.get(model, 0) + len(q)
    depth["unplaced"] = sum(len(steps) for steps in st.unplaced.values())
    return CoreGauges(
        MappingProxyType(depth), len(st.runs), _preload_stats(st), tuple(sorted(st.cluster.devices))
    )
