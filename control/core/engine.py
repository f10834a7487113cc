"""``ControlCore``: the one decision point of Legato's orchestration (see ARCHITECTURE.md).

Drivers record with ``submit``/``complete``/``ingest`` and call ``step(now)`` once per instant.
``step`` runs named phases in a fixed order (``actions.PHASES``, implemented in ``phases``;
a phase with nothing to do is skipped) and returns a frozen ``StepPlan``, whose per-phase
grouping is built only when read; the same inputs and seed always give the same plan. Work is
incremental: only replicas marked dirty since the last step are considered for batching, only
new ready steps are routed, and timers sit in a heap. Ready steps bind late by default (``binding``): they wait in
their model's pending queue, in the tenancy half's fair-share order, and the routing phase ends
by handing them to replicas that can start them (``queueing.bind_pending``). The state is a
``context.CoreState`` made of parts, each owned by one concern; each phase is handed the parts
it may read or change.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable

from control.core import canary, rollout
from control.core.actions import PhaseView, StepPlan
from control.core.batching.registry import make_batching
from control.core.breakers import PROBE
from control.core.context import CoreConfig, CoreState, Policies
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
    CanaryChanged,
    CancelRun,
    DeviceDown,
    DeviceUp,
    ModelRegistered,
    OutputStarted,
    PlacementChanged,
    PoliciesChanged,
    ReplicaBreakerChanged,
    ReplicaLoaded,
    ReplicaLoadFailed,
    ReplicaUnloaded,
    RollbackRequested,
    TenancyConfigChanged,
    WorkflowRegistered,
)
from control.core.fleet import apply_device_up, apply_replica_loaded
from control.core.gauges import CoreGauges, build_gauges
from control.core.latency import LatencyModel
from control.core.phases import run_phases
from control.core.policy_change import apply_policies
from control.core.routing.registry import make_routing
from control.core.run_bounds import RUN_BOUND, bound_live
from control.core.snapshot import CoreSnapshot, build_snapshot
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
        pol = Policies(
            config,
            tenancy,
            cost,
            latency,
            make_batching(config.batching, config.batching_config),
            make_routing(config.routing, config.routing_config),
            rng or random.Random(0),
        )
        self._st = st = CoreState(pol)
        self._handlers: dict[type, Callable[[object, float], None]] = {
            ModelRegistered: self._on_model,
            WorkflowRegistered: self._on_workflow,
            DeviceUp: self._on_device_up,
            ReplicaLoaded: self._on_replica_loaded,
            OutputStarted: lambda e, now: st.runs.output_started.add(e.request_id),  # type: ignore[attr-defined]
            TenancyConfigChanged: self._on_tenancy,
            PoliciesChanged: self._on_policies,
            DeviceDown: self._defer,
            CancelRun: self._defer,  # a run ends only inside step (its actions go in a plan)
            ReplicaLoadFailed: self._defer,
            ReplicaUnloaded: self._defer,
            ReplicaBreakerChanged: self._defer,
            PlacementChanged: self._on_placement,
            RollbackRequested: lambda e, now: st.inbox.placement_events.append(e),
            CanaryChanged: self._on_canary,
        }

    # ----- recording (no decisions)
    def submit(self, req: Request, now: float) -> None:
        """Record a request; admission happens at the next ``step``. A request id seen
        within ``request_ids_kept_s`` of ``now``, or of a run still active, is a duplicate."""
        st = self._st
        inbox = st.inbox
        if req.request_id in inbox.seen_requests or req.request_id in st.runs.active:
            raise DuplicateRequestError(req.request_id)
        if req.workflow not in st.catalog.workflows:
            raise UnknownWorkflowError(req.workflow)
        inbox.seen_requests.add(req.request_id, now)
        inbox.submitted.append((req, now))

    def complete(self, result: BatchResult, now: float) -> None:
        """Record a finished batch; its steps advance at the next ``step``."""
        st = self._st
        cluster = st.cluster
        if result.batch_id in cluster.dropped_batches:
            cluster.dropped_batches.discard(result.batch_id)
            return
        if result.batch_id not in cluster.batches:
            raise UnknownBatchError(result.batch_id)
        st.inbox.completed.append((result, now))

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
        log = st.log
        log.actions = []
        run_phases(st, now)
        tagged = log.actions
        return StepPlan(now, tuple([a for _, a in tagged]), PhaseView(tagged))

    def next_wakeup(self, now: float) -> float | None:
        """Earliest time after ``now`` a step is due with no new input (batch delay, timeout,
        tenancy timer); strictly greater than ``now``, or None."""
        timers = self._st.timers.heap
        while timers and not self._timer_live(timers[0][2], timers[0][3]):
            heapq.heappop(timers)  # drop stale timers: a cache cleanup, not a decision
        mine = timers[0][0] if timers and timers[0][0] > now else None
        if mine is None and timers:
            mine = min(
                (t for t, _, k, i in timers if t > now and self._timer_live(k, i)), default=None
            )
        best = mine  # the earliest of mine, the tenancy half's and the idle check (after now)
        theirs = self._st.pol.tenancy.next_wakeup(now)
        if theirs is not None and theirs > now and (best is None or theirs < best):
            best = theirs
        for idle in (self._st.timers.idle_check_at, self._st.scaling.check_at):
            if idle is not None and idle > now and (best is None or idle < best):
                best = idle
        return best

    def _timer_live(self, kind: str, ident: str) -> bool:
        st = self._st
        if kind == "batch":
            rec = st.cluster.replicas.get(ident)
            return rec is not None and bool(rec.queue) and rec.free_slots() > 0
        if kind == "ahead":  # a lone batch nears its end: live while work waits for the replica
            rec = st.cluster.replicas.get(ident)
            if rec is None or len(rec.running) != 1:
                return False
            pending = st.queues.pending.get(rec.model.key)
            return bool(rec.queue) or (pending is not None and bool(pending.entries))
        if kind == RUN_BOUND:
            return bound_live(st.runs, ident)
        if kind == PROBE:  # live while that replica's breaker is still open
            rec = st.cluster.replicas.get(ident)
            return rec is not None and rec.breaker == "open"
        step = st.runs.steps.get(ident)
        return step is not None and step.batch_id is not None

    def snapshot(self) -> CoreSnapshot:
        """Immutable view of runs, queues, devices, replicas, batches and counters."""
        return build_snapshot(self._st)

    def gauges(self) -> CoreGauges:
        """Queue depths, runs in flight, preload figures and device ids: what metrics sample
        periodically, without building a snapshot (O(replicas + devices))."""
        return build_gauges(self._st)

    def devices_up(self) -> int:
        """How many devices are up now: the cheap health question (no snapshot built)."""
        return sum(1 for dev in self._st.cluster.devices.values() if dev.up)

    # ----- event handlers
    def _defer(self, event: object, now: float) -> None:
        self._st.inbox.deferred.append(event)

    def _on_device_up(self, event: object, now: float) -> None:
        # Up applies at once, Down at the next step: an Up that follows a Down of the same
        # device not yet applied waits behind it, so the device ends up, not down (a worker
        # that crashed and restarted between two steps).
        st, device = self._st, event.device  # type: ignore[attr-defined]
        if any(isinstance(e, DeviceDown) and e.device_id == device.device_id
               for e in st.inbox.deferred):  # fmt: skip
            st.inbox.deferred.append(event)
        else:
            apply_device_up(st.cluster, device)

    def _on_model(self, event: object, now: float) -> None:
        model = event.model  # type: ignore[attr-defined]
        catalog = self._st.catalog
        catalog.models[model.key] = model
        if model.base:
            keys = catalog.variants.setdefault(model.base, [])
            if model.key not in keys:
                keys.append(model.key)
        caps = self._st.cluster.replica_caps  # autoscaling (``autoscaler``): on while capped
        if model.max_replicas is None:
            caps.pop(model.key, None)
        else:
            caps[model.key] = model.max_replicas

    def _on_workflow(self, event: object, now: float) -> None:
        spec = event.spec  # type: ignore[attr-defined]
        catalog = self._st.catalog
        problems = validate(spec, {k: m.task for k, m in catalog.models.items()})
        if problems:
            raise InvalidWorkflowError(spec.workflow, problems)
        catalog.add_workflow(spec.workflow, CompiledDag(spec))

    def _on_replica_loaded(self, event: object, now: float) -> None:
        st = self._st  # the replica is ready as of the last step (``st.now``)
        ev: ReplicaLoaded = event  # type: ignore[assignment]
        apply_replica_loaded(st.pol, st.catalog, st.cluster, st.queues, ev, st.now)

    def _on_placement(self, event: object, now: float) -> None:
        ev: PlacementChanged = event  # type: ignore[assignment]
        st = self._st
        rollout.check_placements(st.catalog, st.cluster, ev.placements, ev.splits)  # misuse raises
        st.inbox.placement_events.append(ev)

    def _on_canary(self, event: object, now: float) -> None:
        ev: CanaryChanged = event  # type: ignore[assignment]
        canary.check(self._st.catalog, ev)  # misuse raises, naming the bad part
        self._st.inbox.placement_events.append(ev)

    def _on_policies(self, event: object, now: float) -> None:
        assert isinstance(event, PoliciesChanged)
        st = self._st
        apply_policies(st.pol, st.queues, st.cluster, st.log, event, now)

    def _on_tenancy(self, event: object, now: float) -> None:
        config = event.config  # type: ignore[attr-defined]
        pol = self._st.pol
        pol.tenancy.configure(config, now)
        pol.reserved_devices = frozenset(d for h in config.headroom for d in h.device_ids)
        pol.tenant_quality = {t.tenant_id: (t.quality, t.allow_degrade) for t in config.tenants}
