"""The composite planner: the stages in a sensible order on one workspace.

Default order: the cold pool is set aside first; tensor-parallel groups go next, while whole
interconnect domains are free; then the single-device models, largest first, grouped with
their workflow neighbours (co-location); best fit catches any model the earlier stages could
not place; finally extra replicas from demand are spread across devices and nodes. The order is
configurable by stage name (a stage is looked up in ``STAGES``, never in an elif chain).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from control.core.placement.base import PlacementStage
from control.core.placement.best_fit import BestFitConfig, BestFitPlacement
from control.core.placement.cold_pool import ColdPoolConfig, ColdPoolPlacement
from control.core.placement.colocate import ColocateConfig, ColocatePlacement
from control.core.placement.demand import Demand
from control.core.placement.inputs import ClusterSnapshot
from control.core.placement.placing import run_stages
from control.core.placement.plan import PlacementPlan, PlanError
from control.core.placement.replicas import ReplicaConfig, replica_targets
from control.core.placement.spread import SpreadConfig, SpreadPlacement
from control.core.placement.tensor_parallel import TensorParallelConfig, TensorParallelPlacement

#: Stage name -> (stage, name of its config field in PlannerConfig).
STAGES: dict[str, tuple[PlacementStage, str]] = {
    "cold_pool": (ColdPoolPlacement(), "cold_pool"),
    "tensor_parallel": (TensorParallelPlacement(), "tensor_parallel"),
    "colocate": (ColocatePlacement(), "colocate"),
    "best_fit": (BestFitPlacement(), "best_fit"),
    "spread": (SpreadPlacement(), "spread"),
}

DEFAULT_ORDER: tuple[str, ...] = ("cold_pool", "tensor_parallel", "colocate", "best_fit", "spread")


@dataclass(frozen=True)
class PlannerConfig:
    replicas: ReplicaConfig = field(
        default_factory=ReplicaConfig, metadata={"help": "how demand turns into replica counts"}
    )
    cold_pool: ColdPoolConfig = field(
        default_factory=ColdPoolConfig, metadata={"help": "devices kept for cold loads"}
    )
    tensor_parallel: TensorParallelConfig = field(
        default_factory=TensorParallelConfig, metadata={"help": "placing tensor-parallel groups"}
    )
    colocate: ColocateConfig = field(
        default_factory=ColocateConfig, metadata={"help": "grouping workflow neighbours"}
    )
    best_fit: BestFitConfig = field(
        default_factory=BestFitConfig, metadata={"help": "the catch-all bin-packing stage"}
    )
    spread: SpreadConfig = field(
        default_factory=SpreadConfig,
        metadata={"help": "placing extra replicas (its own replicas field is not used here)"},
    )
    stages: tuple[str, ...] = field(
        default=DEFAULT_ORDER,
        metadata={"help": f"stage names in the order they run; known: {sorted(STAGES)}"},
    )

    def __post_init__(self) -> None:
        unknown = [s for s in self.stages if s not in STAGES]
        if unknown:
            raise PlanError(
                f"PlannerConfig.stages={list(self.stages)!r}: unknown {unknown}; known {sorted(STAGES)}"
            )
        if "cold_pool" in self.stages and self.stages[0] != "cold_pool":
            raise PlanError(f"PlannerConfig.stages={list(self.stages)!r}: cold_pool must run first")


class Planner:
    name = "planner"
    config_type = PlannerConfig

    def plan(
        self, snapshot: ClusterSnapshot, demand: Demand, config: Any | None = None
    ) -> PlacementPlan:
        """The composite plan; replica targets come from ``config.replicas``."""
        cfg = PlannerConfig() if config is None else config
        if not isinstance(cfg, PlannerConfig):
            raise PlanError(f"planner config={type(cfg).__name__}: needs a PlannerConfig")
        stages = [(STAGES[s][0], getattr(cfg, STAGES[s][1])) for s in cfg.stages]
        targets = replica_targets(snapshot, demand, cfg.replicas)
        return run_stages(snapshot, demand, targets, stages, self.name)
