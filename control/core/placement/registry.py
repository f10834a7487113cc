"""Placement policies by name. Add a policy by adding an entry, never an elif."""

from __future__ import annotations

from typing import Any

from control.core.placement.base import PlacementPolicy
from control.core.placement.best_fit import BestFitPlacement
from control.core.placement.cold_pool import ColdPoolPlacement
from control.core.placement.colocate import ColocatePlacement
from control.core.placement.demand import Demand
from control.core.placement.inputs import ClusterSnapshot
from control.core.placement.naive import NaivePlacement
from control.core.placement.plan import PlacementPlan, PlanError
from control.core.placement.planner import Planner
from control.core.placement.spread import SpreadPlacement
from control.core.placement.tensor_parallel import TensorParallelPlacement

PLACEMENT: dict[str, PlacementPolicy] = {
    p.name: p
    for p in (
        Planner(),
        NaivePlacement(),
        BestFitPlacement(),
        ColocatePlacement(),
        TensorParallelPlacement(),
        SpreadPlacement(),
        ColdPoolPlacement(),
    )
}


def make_placement(name: str) -> PlacementPolicy:
    """The named policy; raises PlanError naming an unknown one."""
    try:
        return PLACEMENT[name]
    except KeyError:
        raise PlanError(f"placement policy={name!r}: unknown; known {sorted(PLACEMENT)}") from None


def plan_with(
    name: str, snapshot: ClusterSnapshot, demand: Demand, config: Any | None = None
) -> PlacementPlan:
    """Plan with the named policy; ``config`` must be its ``config_type`` (None: defaults)."""
    policy = make_placement(name)
    if config is not None and not isinstance(config, policy.config_type):
        raise PlanError(
            f"placement {name!r} config={type(config).__name__}: needs a {policy.config_type.__name__}"
        )
    return policy.plan(snapshot, demand, config)
