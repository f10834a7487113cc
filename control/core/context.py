"""Configuration, policies and the state of one ``ControlCore``.

``CoreState`` is made of parts, each owned by one concern (``parts``, ``cluster``); the engine
holds the whole and ``phases.run_phases`` hands each phase the parts it may touch. ``Policies``
is what every phase consults: the configuration and the policy objects.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from control.core.batching.base import BatchPolicy
from control.core.batching.size_delay import SizeDelayConfig
from control.core.binding_config import BindingConfig
from control.core.canary_stats import CanaryConfig
from control.core.capacity import CapacityAdmissionConfig
from control.core.cluster import Cluster
from control.core.latency import LatencyModel
from control.core.parts import (
    REQUEST_IDS_KEPT_S,
    ActionLog,
    Catalog,
    Ids,
    Inbox,
    Queues,
    Rollouts,
    Runs,
    Scaling,
    Timers,
)
from control.core.routing.base import RoutingPolicy
from control.core.routing.predicted_completion import PredictedCompletionConfig
from control.core.routing.stealing import StealConfig
from control.core.routing.transfer import TransferCosts
from control.core.tenancy.base import TenancyPolicy
from control.core.tenancy.cost import CostModel
from control.core.types import BLOCK_TOKENS
from control.core.variant_config import VariantChoiceConfig

#: ``CoreConfig.step_order`` values (``control.core.step_order`` explains them).
STEP_ORDERS = ("arrival", "critical_path")


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
    prefix_block_tokens: int = field(
        default=BLOCK_TOKENS,
        metadata={"help": "prompt tokens per prefix block hash (what a predicted hit saves)"},
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
    request_ids_kept_s: float = field(
        default=REQUEST_IDS_KEPT_S,
        metadata={
            "help": "how long (core seconds) a submitted request id is remembered to refuse "
            "a duplicate submission (longer than any retry or idempotency wait; an active "
            "run's id is refused while it runs): a bounded window, not every id ever seen"
        },
    )
    max_device_loss_retries: int = field(
        default=3,
        metadata={
            "help": "times one step may be retried elsewhere after its device or replica was "
            "lost while it ran; these retries do not use the node's own retries, and the bound "
            "stops a step that keeps killing its worker from looping forever"
        },
    )

    capacity_admission: CapacityAdmissionConfig = field(
        default_factory=CapacityAdmissionConfig,
        metadata={
            "help": "refuse (429, Retry-After the predicted drain) a run whose predicted "
            "queue delay already exceeds the time to its deadline; lower classes first"
        },
    )

    max_recomputes: int = field(
        default=8,
        metadata={
            "help": "recomputations one run may make of step outputs lost with their worker "
            "(lineage recovery); past it the run fails naming the node, so a step that keeps "
            "killing its worker cannot loop"
        },
    )

    step_order: str = field(
        default="arrival",
        metadata={
            "help": "order of one tenant's waiting steps of one class: 'arrival' (deadline, "
            "then when ready) or 'critical_path' (latest start: deadline or run start less the "
            "predicted work still ahead in the DAG; fair share across tenants is unchanged)"
        },
    )

    canary: CanaryConfig = field(
        default_factory=CanaryConfig,
        metadata={"help": "when a canary version is rolled back automatically (margins over "
                          "the baseline's error rate and p99, samples needed)"},
    )  # fmt: skip

    variants: VariantChoiceConfig = field(
        default_factory=VariantChoiceConfig,
        metadata={"help": "which precision variant runs a step: quality floors, when a "
                          "saturated variant may be degraded to a cheaper one"},
    )  # fmt: skip

    def __post_init__(self) -> None:
        if not self.request_ids_kept_s > 0:
            raise ValueError(f"request_ids_kept_s must be > 0, got {self.request_ids_kept_s!r}")
        if self.prefix_block_tokens < 1:
            raise ValueError(f"prefix_block_tokens must be >= 1, got {self.prefix_block_tokens!r}")
        if self.step_order not in STEP_ORDERS:
            raise ValueError(
                f"step_order must be one of {', '.join(STEP_ORDERS)}, got {self.step_order!r}"
            )
        if self.max_recomputes < 0:
            raise ValueError(f"max_recomputes must be >= 0, got {self.max_recomputes!r}")
        if self.max_device_loss_retries < 0:
            raise ValueError(
                f"max_device_loss_retries must be >= 0, got {self.max_device_loss_retries!r}"
            )


class Policies:
    """The configuration and the policies every phase consults. The core changes none of it
    during a step (the tenancy half keeps its own books, told through its methods);
    ``reserved_devices`` follows the tenancy configuration (its headroom devices)."""

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
        self.critical_path = config.step_order == "critical_path"  # read once per ready step
        self.tenancy = tenancy
        self.cost = cost
        self.latency = latency
        self.batching = batching
        self.routing = routing
        self.rng = rng
        self.reserved_devices: frozenset[str] = frozenset()
        #: tenant id -> (default quality class, allows degrading): follows the tenancy config
        self.tenant_quality: dict[str, tuple[str | None, bool]] = {}


class CoreState:
    """Everything a core knows, as parts. Changed only by the core's own methods during calls;
    ``now`` is the instant of the last step."""

    def __init__(self, pol: Policies) -> None:
        self.pol = pol
        self.catalog = Catalog()
        self.inbox = Inbox(pol.config.request_ids_kept_s)
        self.runs = Runs(pol.config.finished_runs_kept)
        self.cluster = Cluster()
        self.queues = Queues()
        self.rollouts = Rollouts()
        self.scaling = Scaling()
        self.ids = Ids()
        self.timers = Timers(self.ids)
        self.log = ActionLog()
        self.now = 0.0
