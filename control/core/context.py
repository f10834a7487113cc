"""Configuration and shared mutable state of one ``ControlCore``.

The engine's phase helpers (loads, queueing, batching, stealing, runs) all work on one
``CoreState``; actions they decide are appended with ``emit`` under the current phase.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from control.core.actions import Action
from control.core.batching.base import BatchPolicy
from control.core.batching.size_delay import SizeDelayConfig
from control.core.binding_config import BindingConfig
from control.core.dag.run import CompiledDag
from control.core.latency import LatencyModel
from control.core.pending import PendingQueue
from control.core.routing.base import RoutingContext, RoutingPolicy
from control.core.routing.predicted_completion import PredictedCompletionConfig
from control.core.routing.stealing import StealConfig
from control.core.routing.transfer import TransferCosts
from control.core.state import Cluster, InflightBatch, QueuedStep, RunRecord
from control.core.tenancy.base import TenancyPolicy
from control.core.tenancy.cost import CostModel
from control.core.types import BatchResult, ModelSpec, Request

if TYPE_CHECKING:
    from control.core.rollout import Rollout


@dataclass(frozen=True)
class CoreConfig:
    batching: str = field(default="size_delay", metadata={"help": "batching strategy name"})
    batching_config: Any = field(default_factory=SizeDelayConfig)
    routing: str = field(default="predicted_completion", metadata={"help": "routing strategy"})
    routing_config: Any = field(default_factory=PredictedCompletionConfig)
    stealing: StealConfig = field(default_factory=StealConfig)
    transfer: TransferCosts = field(default_factory=TransferCosts)
    prefix_capacity_blocks: int = field(
        default=4096, metadata={"help": "prefix-cache blocks each replica's index remembers"}
    )
    speculative_preload: bool = field(
        default=True, metadata={"help": "preload models a starting run's later nodes need"}
    )
    scale_to_zero_idle_s: float | None = field(
        default=None,
        metadata={
            "help": "evict every replica of a model that had no work for this long (seconds); "
            "the next request cold-starts it. None keeps replicas loaded"
        },
    )
    finished_runs_kept: int = field(
        default=256, metadata={"help": "recently finished runs kept for the snapshot"}
    )
    binding: BindingConfig = field(
        default_factory=BindingConfig,
        metadata={"help": "late binding: when ready steps are bound to a replica queue"},
    )
    max_device_loss_retries: int = field(
        default=3,
        metadata={
            "help": "times one step may be retried elsewhere after its device or replica was "
            "lost while it ran; these retries do not use the node's own retries, and the bound "
            "stops a step that keeps killing its worker from looping forever"
        },
    )

    def __post_init__(self) -> None:
        if self.max_device_loss_retries < 0:
            raise ValueError(
                f"max_device_loss_retries must be >= 0, got {self.max_device_loss_retries!r}"
            )


class CoreState:
    """Everything a core knows. Mutated only by the core's own methods during calls."""

    def __init__(
        self,
        config: CoreConfig,
        tenancy: TenancyPolicy,
        cost: CostModel,
        latency: LatencyModel,
        batching: BatchPolicy,
        routing: RoutingPolicy,
        rng: random.Random,
    ) -> None:
        self.config = config
        # the binding knobs in seconds, as the phases compare them with ``now`` (config is
        # immutable: computed once, the same float expressions as before)
        self.take_ahead_s = config.binding.take_ahead_us / 1e6
        self.dispatch_ahead_s = config.binding.dispatch_ahead_us / 1e6
        self.tenancy = tenancy
        self.cost = cost
        self.latency = latency
        self.batching = batching
        self.routing = routing
        self.rng = rng
        self.models: dict[str, ModelSpec] = {}
        self.workflows: dict[str, CompiledDag] = {}
        self.cluster = Cluster()
        self.runs: dict[str, RunRecord] = {}
        self.finished: deque[RunRecord] = deque(maxlen=config.finished_runs_kept)
        self.seen_requests: set[str] = set()
        self.steps: dict[str, QueuedStep] = {}  # live attempts: ready, queued or in flight
        self.batches: dict[str, InflightBatch] = {}
        self.dropped_batches: set[str] = set()  # batches failed by the core (late results ignored)
        self.deferred: list[object] = []  # fleet events applied at the next step
        self.sessions: dict[str, str] = {}
        self.submitted: list[tuple[Request, float]] = []
        self.completed: list[tuple[BatchResult, float]] = []
        self.output_started: set[str] = set()
        self.ready: list[QueuedStep] = []  # steps to route in the next routing phase
        self.tools: list[QueuedStep] = []  # tool steps to dispatch in the batching phase
        self.pending: dict[str, PendingQueue[QueuedStep]] = {}  # model -> ready steps not yet bound
        self.unplaced: dict[str, list[QueuedStep]] = {}  # model -> steps no device can load
        self.dirty: set[str] = set()  # replicas whose batching decision may have changed
        self.headroom_blocked: set[str] = set()  # replicas holding work headroom refused
        self.timers: list[tuple[float, int, str, str]] = []  # (when, seq, kind, id)
        self.reserved_devices: frozenset[str] = frozenset()
        self.counters: Counter[str] = Counter()
        self.seq = 0
        self.now = 0.0
        self.phase = "admission"
        self.actions: list[tuple[str, Action]] = []
        self.preload: Counter[str] = Counter()  # issued, hits, misses
        self.routing_ctx: RoutingContext | None = None  # rebuilt when now or sessions change
        # (workflow, prompt tokens, output tokens) -> (est tokens, est cost): a pure cache
        self.estimates: dict[tuple[str, int, int], tuple[int, int]] = {}
        self.rollout: Rollout | None = None  # the active or last rollout
        self.placement_events: list[object] = []  # PlacementChanged / RollbackRequested
        self.placement_history: list[tuple[str, dict, dict]] = []  # (plan id, target, splits)
        self.splits: dict[str, tuple[tuple[str, int], ...]] = {}  # canary traffic splits
        self.idle_check_at: float | None = None  # earliest scale-to-zero expiry
        self.evicted_loading: set[str] = set()  # loads cancelled by the core (late reports)

    def emit(self, action: Action) -> None:
        """Record a decided action under the current phase and count it."""
        self.actions.append((self.phase, action))
        self.counters[type(action).__name__] += 1

    def next_id(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}"

    def arm(self, when: float, kind: str, ident: str) -> None:
        """Schedule a wake-up: ``kind`` "batch" or "ahead" (replica id) or "timeout" (step key)."""
        self.seq += 1
        heapq.heappush(self.timers, (when, self.seq, kind, ident))
