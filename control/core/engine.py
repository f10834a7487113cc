"""``ControlCore``: the one decision point of Legato's orchestration (see ARCHITECTURE.md).

Drivers record with ``submit``/``complete``/``ingest`` and call ``step(now)`` once per instant.
``step`` runs named phases in a fixed order (``actions.PHASES``) and returns a frozen
``StepPlan``; the same inputs and seed always give the same plan. Work is incremental: only
replicas marked dirty since the last step are considered for batching, only new ready steps are
routed, and timers sit in a heap. Ready steps bind late by default (``binding``): they wait in
their model's pending queue, in the tenancy half's fair-share order, and the routing phase ends
by handing them to replicas that can start them (``queueing.bind_pending``).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from types import MappingProxyType

from control.core import rollout, runs
from control.core.actions import PHASES, StepPlan
from control.core.batcher import dispatch_tool, form_batch
from control.core.batching.registry import make_batching
from control.core.context import CoreConfig, CoreState
from control.core.dag.run import CompiledDag
from control.core.dag.validate import validate
from control.core.errors import (
    DuplicateRequestError,
    InvalidWorkflowError,
    TimeWentBackwardsError,
    UnknownBatchError,
    UnknownEventError,
    UnknownWorkflowError,
)
from control.core.events import (
    DeviceDown,
    DeviceUp,
    ModelRegistered,
    OutputStarted,
    PlacementChanged,
    ReplicaLoaded,
    ReplicaLoadFailed,
    ReplicaUnloaded,
    RollbackRequested,
    TenancyConfigChanged,
    WorkflowRegistered,
)
from control.core.fleet import apply_device_up, apply_replica_loaded, device_down, fail_replica
from control.core.latency import LatencyModel
from control.core.lifecycle import scale_to_zero
from control.core.queueing import bind_pending, route
from control.core.routing.registry import make_routing
from control.core.snapshot import CoreSnapshot, build_snapshot
from control.core.stealer import steal_phase
from control.core.tenancy.base import TenancyPolicy
from control.core.tenancy.cost import CostModel
from control.core.types import BatchResult, DeviceSpec, ModelSpec, Request


class ControlCore:
    """Pure decision core: no I/O, no clock, randomness only from ``rng``."""

    def __init__(
        self,
        tenancy: TenancyPolicy,
        cost: CostModel,
        latency: LatencyModel,
        config: CoreConfig | None = None,
        rng: random.Random | None = None,
    ) -> None:
        config = config or CoreConfig()
        self._st = CoreState(
            config,
            tenancy,
            cost,
            latency,
            make_batching(config.batching, config.batching_config),
            make_routing(config.routing, config.routing_config),
            rng or random.Random(0),
        )
        self._handlers: dict[type, Callable[[object, float], None]] = {
            ModelRegistered: self._on_model,
            WorkflowRegistered: self._on_workflow,
            DeviceUp: lambda e, now: apply_device_up(self._st, e.device),  # type: ignore[attr-defined]
            ReplicaLoaded: lambda e, now: apply_replica_loaded(self._st, e),  # type: ignore[arg-type]
            OutputStarted: lambda e, now: self._st.output_started.add(e.request_id),  # type: ignore[attr-defined]
            TenancyConfigChanged: self._on_tenancy,
            DeviceDown: self._defer,
            ReplicaLoadFailed: self._defer,
            ReplicaUnloaded: self._defer,
            PlacementChanged: self._on_placement,
            RollbackRequested: lambda e, now: self._st.placement_events.append(e),
        }

    # ----- recording (no decisions)
    def submit(self, req: Request, now: float) -> None:
        """Record a request; admission happens at the next ``step``."""
        st = self._st
        if req.request_id in st.seen_requests:
            raise DuplicateRequestError(req.request_id)
        if req.workflow not in st.workflows:
            raise UnknownWorkflowError(req.workflow)
        st.seen_requests.add(req.request_id)
        st.submitted.append((req, now))

    def complete(self, result: BatchResult, now: float) -> None:
        """Record a finished batch; its steps advance at the next ``step``."""
        st = self._st
        if result.batch_id in st.dropped_batches:
            st.dropped_batches.discard(result.batch_id)
            return
        if result.batch_id not in st.batches:
            raise UnknownBatchError(result.batch_id)
        st.completed.append((result, now))

    def ingest(self, event: object, now: float) -> None:
        """Record a fleet/config event. Registrations and state changes apply at once; events
        that need decisions (device down, failed or unloaded replica) apply at the next step."""
        handler = self._handlers.get(type(event))
        if handler is None:
            raise UnknownEventError(event)
        handler(event, now)

    def register(
        self, models: Iterable[ModelSpec] = (), devices: Iterable[DeviceSpec] = ()
    ) -> None:
        """Convenience for builders: ModelRegistered/DeviceUp for many at once (time-free)."""
        for m in models:
            self.ingest(ModelRegistered(m), self._st.now)
        for d in devices:
            self.ingest(DeviceUp(d), self._st.now)

    # ----- the decision point
    def step(self, now: float) -> StepPlan:
        """Make every decision due at ``now``; returns the actions, grouped by phase."""
        st = self._st
        if now < st.now:
            raise TimeWentBackwardsError(now, st.now)
        st.now = now
        st.actions = []
        self._phase("admission", self._admission)
        self._phase("completions", self._completions)
        self._phase("timeouts", self._timers)
        self._phase("reclaims", self._reclaims)
        self._phase("placement", self._placement)
        self._phase("routing", self._routing)
        self._phase("loads", self._retry_unplaced)
        idle = sorted(
            r for r in st.dirty if r in st.cluster.replicas and st.cluster.replicas[r].idle
        )
        self._phase("stealing", lambda: steal_phase(st, idle))
        self._phase("batching", self._batching)
        by_phase: dict[str, list] = {p: [] for p in PHASES}
        for ph, a in st.actions:  # one pass: a busy step has thousands of actions
            acts = by_phase.get(ph)
            if acts is not None:
                acts.append(a)
        grouped = {p: tuple(acts) for p, acts in by_phase.items()}
        return StepPlan(now, tuple([a for _, a in st.actions]), MappingProxyType(grouped))

    def next_wakeup(self, now: float) -> float | None:
        """Earliest time after ``now`` a step is due with no new input (batch delay, timeout,
        tenancy timer); strictly greater than ``now``, or None."""
        timers = self._st.timers
        while timers and not self._timer_live(timers[0][2], timers[0][3]):
            heapq.heappop(timers)  # drop stale timers: a cache cleanup, not a decision
        mine = timers[0][0] if timers and timers[0][0] > now else None
        if mine is None and timers:
            mine = min(
                (t for t, _, k, i in timers if t > now and self._timer_live(k, i)), default=None
            )
        theirs = self._st.tenancy.next_wakeup(now)
        if theirs is not None and theirs <= now:
            theirs = None
        idle = self._st.idle_check_at
        if idle is not None and idle <= now:
            idle = None
        options = [t for t in (mine, theirs, idle) if t is not None]
        return min(options) if options else None

    def _timer_live(self, kind: str, ident: str) -> bool:
        st = self._st
        if kind == "batch":
            rec = st.cluster.replicas.get(ident)
            return rec is not None and bool(rec.queue) and rec.inflight is None
        step = st.steps.get(ident)
        return step is not None and step.batch_id is not None

    def snapshot(self) -> CoreSnapshot:
        """Immutable view of runs, queues, devices, replicas, batches and counters."""
        return build_snapshot(self._st)

    # ----- phases
    def _phase(self, name: str, fn: Callable[[], None]) -> None:
        self._st.phase = name
        fn()

    def _admission(self) -> None:
        st = self._st
        submitted, st.submitted = st.submitted, []
        for req, _at in submitted:
            runs.admit(st, req, st.now)

    def _completions(self) -> None:
        st = self._st
        deferred, st.deferred = st.deferred, []
        for ev in deferred:
            if isinstance(ev, DeviceDown):
                device_down(st, ev.device_id, ev.reason)
            elif isinstance(ev, ReplicaLoadFailed):
                fail_replica(st, ev.replica_id, f"load failed: {ev.error}")
            else:
                fail_replica(st, ev.replica_id, "replica unloaded")  # type: ignore[attr-defined]
        done, st.completed = st.completed, []
        for result, _at in done:
            self._batch_done(result)

    def _batch_done(self, result: BatchResult) -> None:
        st = self._st
        batch = st.batches.pop(result.batch_id, None)
        if batch is None:
            return
        rec = st.cluster.replicas.get(batch.replica_id or "")
        if rec is not None:
            rec.inflight = None
            rec.busy_until = st.now
            st.dirty.add(rec.replica_id)
            st.batching.observe(rec.model, len(batch.items), result.device_us)
        reported = {r.key: r for r in result.items}
        for key, step in batch.items.items():
            if st.steps.get(key) is not step:
                continue  # stale attempt (timed out, run ended)
            res = reported.get(key)
            dev = rec.device.device_id if rec else None
            runs.on_item_done(st, step, res, dev, batch.replica_id)

    def _timers(self) -> None:
        st = self._st
        while st.timers and st.timers[0][0] <= st.now:
            _, _, kind, ident = heapq.heappop(st.timers)
            if kind == "batch":
                st.dirty.add(ident)
                continue
            step = st.steps.get(ident)
            if step is not None and step.batch_id is not None:
                st.counters["steps.timed_out"] += 1
                runs.fail_step(st, step, f"timed out after {step.node.timeout_s} s")

    def _reclaims(self) -> None:
        st = self._st
        for order in st.tenancy.reclaims(st.now, frozenset(st.output_started)):
            runs.preempt(st, order.request_id, order.reason)

    def _placement(self) -> None:
        st = self._st
        events, st.placement_events = st.placement_events, []
        for ev in events:
            if isinstance(ev, PlacementChanged):
                target = {(m, tuple(d)): (n, pool) for m, d, n, pool in ev.placements}
                rollout.begin(st, ev.plan_id, target, dict(ev.splits), ev.reason)
            else:
                rollout.request_rollback(st, ev.reason)  # type: ignore[attr-defined]
        rollout.advance(st)
        scale_to_zero(st)

    def _routing(self) -> None:
        st = self._st
        ready, st.ready = st.ready, []
        for step in ready:
            if st.steps.get(step.key) is not step:
                continue
            if step.node.is_tool:
                st.tools.append(step)
            else:
                route(st, step)
        bind_pending(st)

    def _retry_unplaced(self) -> None:
        st = self._st
        waiting, st.unplaced = st.unplaced, {}
        for model_key in sorted(waiting):
            for step in waiting[model_key]:
                if st.steps.get(step.key) is step:
                    route(st, step)

    def _batching(self) -> None:
        st = self._st
        tools, st.tools = st.tools, []
        for step in tools:
            dispatch_tool(st, step)
        dirty = sorted(st.dirty | st.headroom_blocked)
        st.dirty.clear()
        st.headroom_blocked.clear()
        for rid in dirty:
            rec = st.cluster.replicas.get(rid)
            if rec is not None:
                form_batch(st, rec)
        if st.config.binding.bind_ahead_us:
            bind_pending(st)  # replicas that just started a short batch take their next one

    # ----- event handlers
    def _defer(self, event: object, now: float) -> None:
        self._st.deferred.append(event)

    def _on_model(self, event: object, now: float) -> None:
        model = event.model  # type: ignore[attr-defined]
        self._st.models[model.key] = model

    def _on_workflow(self, event: object, now: float) -> None:
        spec = event.spec  # type: ignore[attr-defined]
        problems = validate(spec, {k: m.task for k, m in self._st.models.items()})
        if problems:
            raise InvalidWorkflowError(spec.workflow, problems)
        self._st.workflows[spec.workflow] = CompiledDag(spec)
        self._st.estimates.clear()  # estimates of the replaced workflow are stale

    def _on_placement(self, event: object, now: float) -> None:
        ev: PlacementChanged = event  # type: ignore[assignment]
        rollout.check_placements(self._st, ev.placements, ev.splits)  # misuse raises here
        self._st.placement_events.append(ev)

    def _on_tenancy(self, event: object, now: float) -> None:
        config = event.config  # type: ignore[attr-defined]
        self._st.tenancy.configure(config, now)
        self._st.reserved_devices = frozenset(d for h in config.headroom for d in h.device_ids)
