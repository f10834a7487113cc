"""The parts of a core's state, each owned by one concern.

A phase is handed the parts it may read or change (see ``phases``), so its signature says what
it touches. The fleet's part, ``Cluster`` (devices, replicas, the batches they run, the loads the
core issued), lives in ``cluster``; the configuration and policies in ``context.Policies``.

- ``Catalog``: what can be served (models, workflows, canary splits, live canaries) and the
  run-estimate memo.
- ``Inbox``: inputs recorded between steps, taken by the phases of the next one.
- ``Runs``: runs in progress and every live step attempt of them.
- ``Queues``: ready work not yet dispatched, and the marks saying which replicas to look at.
- ``Ids`` and ``Timers``: the sequence that names what the core creates, and its wake-ups.
- ``Rollouts``: the active (or last) rollout and the placements held before.
- ``Scaling``: autoscaling's drains and idle checks.
- ``ActionLog``: the actions decided in the current step, under their phase, and the counters.
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from control.core.actions import Action
from control.core.dag.compiled import CompiledDag
from control.core.latency import LatencyModel
from control.core.pending import PendingQueue
from control.core.routing.base import RoutingContext
from control.core.routing.transfer import TransferCosts
from control.core.state import QueuedStep, RunRecord
from control.core.types import BatchResult, ModelSpec, Request
from control.core.window import RecentKeys

if TYPE_CHECKING:
    from control.core.canary import Canary

#: How long (core seconds) a request id is remembered after its submission for the duplicate
#: check (an active run's id is refused for as long as it runs, see ``ControlCore.submit``):
#: longer than any resubmission of one id by a driver (a sync wait is at most 600 s). Ids are
#: kept as 64-bit digests (``RecentKeys``, ~20 bytes an id, not ~330); past the window the
#: gateway's ids are fresh uuids and a client's retry is caught by the requests table's unique
#: ``(tenant, idempotency key)`` before it reaches the core.
REQUEST_IDS_KEPT_S = 900.0

#: A canary split: model key -> (served version, integer weight) pairs.
Splits = dict[str, tuple[tuple[str, int], ...]]
#: A placement: (model key, device ids) -> (replicas, pool).
Slot = tuple[str, tuple[str, ...]]
Target = dict[Slot, tuple[int, str]]


class Catalog:
    """Models and workflows registered, the canary splits that map a model key to its served
    versions (set when a rollout completes), the live canaries by baseline model key
    (:mod:`control.core.canary`, kept after they end), and the memo of run estimates: (workflow, prompt
    tokens, output tokens) -> (est tokens, est cost), a pure cache of the workflows here."""

    def __init__(self) -> None:
        self.models: dict[str, ModelSpec] = {}
        self.workflows: dict[str, CompiledDag] = {}
        self.splits: Splits = {}
        self.canaries: dict[str, Canary] = {}
        #: base model key -> keys of its precision variants (``control.core.variant_choice``)
        self.variants: dict[str, list[str]] = {}
        self.estimates: dict[tuple[str, int, int], tuple[int, int]] = {}

    def add_workflow(self, name: str, dag: CompiledDag) -> None:
        """Register (or replace) a workflow; estimates of the replaced one are stale."""
        self.workflows[name] = dag
        self.estimates.clear()


class Inbox:
    """What the drivers recorded since the last step (``submit``, ``complete``, the fleet and
    placement events that need decisions), and the request ids submitted within the last
    ``request_ids_kept_s`` of core time (a bounded window, not every id ever seen)."""

    def __init__(self, request_ids_kept_s: float = REQUEST_IDS_KEPT_S) -> None:
        self.submitted: list[tuple[Request, float]] = []
        self.completed: list[tuple[BatchResult, float]] = []
        self.deferred: list[object] = []  # fleet events applied at the next step
        self.placement_events: list[object] = []  # PlacementChanged / RollbackRequested
        self.seen_requests = RecentKeys(request_ids_kept_s)


class Runs:
    """Runs in progress (``active``) and the last ``kept`` finished ones; every live step
    attempt by key (ready, queued or in flight: an attempt not here is stale); the runs that
    produced output (the tenancy half does not reclaim them)."""

    def __init__(self, kept: int) -> None:
        self.active: dict[str, RunRecord] = {}
        self.finished: deque[RunRecord] = deque(maxlen=kept)
        self.steps: dict[str, QueuedStep] = {}
        self.output_started: set[str] = set()

    def is_live(self, step: QueuedStep) -> bool:
        """Whether ``step`` is still its key's live attempt (not timed out, run not ended)."""
        return self.steps.get(step.key) is step


class Queues:
    """Work that waits in the core: ready steps to route in the next routing phase, tool steps
    to dispatch in the batching phase, per model the ready steps not yet bound (late binding)
    and those no device can load yet; the replicas whose batching decision may have changed
    (``dirty``) or that hold work headroom refused; the replica each session is bound to."""

    def __init__(self) -> None:
        self.ready: list[QueuedStep] = []
        self.tools: list[QueuedStep] = []
        self.pending: dict[str, PendingQueue[QueuedStep]] = {}
        self.unplaced: dict[str, list[QueuedStep]] = {}
        self.dirty: set[str] = set()
        self.headroom_blocked: set[str] = set()
        self.sessions: dict[str, str] = {}
        self._ctx: RoutingContext | None = None  # rebuilt when now or sessions change

    def pending_of(self, model_key: str) -> PendingQueue[QueuedStep]:
        """The model's pending queue, made on first use."""
        queue = self.pending.get(model_key)
        if queue is None:
            queue = PendingQueue(model_key)
            self.pending[model_key] = queue
        return queue

    def unbind_sessions(self, replica_id: str) -> None:
        """Forget the sessions bound to a replica that takes no more work. The mapping is
        replaced, not edited: a routing context made before holds the old one."""
        self.sessions = {s: r for s, r in self.sessions.items() if r != replica_id}

    def routing_context(
        self, now: float, latency: LatencyModel, transfer: TransferCosts, block_tokens: int
    ) -> RoutingContext:
        """The context routing policies score in, made once per instant and session map."""
        ctx = self._ctx
        if ctx is None or ctx.now != now or ctx.sessions is not self.sessions:
            ctx = self._ctx = RoutingContext(now, latency, transfer, self.sessions, block_tokens)
        return ctx


class Ids:
    """The one sequence behind every id the core makes (``b7``, ``model@device#12``)."""

    def __init__(self) -> None:
        self.seq = 0

    def next_id(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}"


class Timers:
    """Wake-ups the core asked for: a heap of (when, seq, kind, id), kind "batch" or "ahead"
    (a replica id), "probe" (a replica id: its breaker's probe is due, ``breakers``), "timeout"
    (a step key) or "run" (a request id: its bound, ``run_bounds``),
    and the next scale-to-zero check. A timer's seq breaks ties in arming order and comes from
    ``ids``: the ids in decision logs count timers."""

    def __init__(self, ids: Ids) -> None:
        self.ids = ids
        self.heap: list[tuple[float, int, str, str]] = []
        self.idle_check_at: float | None = None  # earliest scale-to-zero expiry

    def arm(self, when: float, kind: str, ident: str) -> None:
        """Schedule a wake-up at ``when``."""
        ids = self.ids
        ids.seq += 1
        heapq.heappush(self.heap, (when, ids.seq, kind, ident))

    def due(self, now: float) -> bool:
        return bool(self.heap) and self.heap[0][0] <= now


class Scaling:
    """Autoscaling's books (``autoscaler``): the replicas it drains (no new work; evicted once
    nothing is queued or in flight on them), when each model last scaled in, and its next
    idle check (a wake-up)."""

    def __init__(self) -> None:
        self.draining: set[str] = set()
        self.scaled_in_at: dict[str, float] = {}
        self.served: set[str] = set()  # models that had a ready replica (min_replicas applies)
        self.check_at: float | None = None


@dataclass
class Rollout:
    """One rollout in progress (or the last one, kept for the snapshot)."""

    plan_id: str
    target: Target
    splits: Splits
    previous: Target  # the fleet when it started: restored when it fails
    previous_splits: Splits
    started_at: float
    rollback: bool = False
    state: str = "loading"
    pending: set[str] = field(default_factory=set)  # new replicas loading, not routable
    blocked: list[Slot] = field(default_factory=list)  # loads waiting for memory
    draining: set[str] = field(default_factory=set)
    loaded: int = 0
    evicted: int = 0
    moved: int = 0
    reason: str = ""


class Rollouts:
    """The active (or last) rollout, and every placement held: (plan id, target, splits), the
    placement before the first rollout first (a rollback returns to the one before the last)."""

    def __init__(self) -> None:
        self.current: Rollout | None = None
        self.history: list[tuple[str, dict, dict]] = []


class ActionLog:
    """The actions decided in the current step, each under the phase that decided it, and the
    counters (actions by type, and the figures phases count) kept across steps."""

    def __init__(self) -> None:
        self.phase = "admission"
        self.actions: list[tuple[str, Action]] = []
        self.counters: Counter[str] = Counter()

    def emit(self, action: Action) -> None:
        """Record a decided action under the current phase and count it."""
        self.actions.append((self.phase, action))
        self.counters[type(action).__name__] += 1
