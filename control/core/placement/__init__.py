"""Placement: which model replicas run on which devices, from demand and topology.

Entry points: :func:`plan_with` (a registered policy by name), :func:`diff` / :func:`apply_diff`
between plans, :func:`violations` to check a plan (e.g. one edited by hand).
"""

from control.core.placement.demand import Demand, ModelDemand, demand_from_workflows, mean_service_s
from control.core.placement.diff import Eviction, Load, Move, PlanDiff, PoolChange, apply_diff, diff
from control.core.placement.inputs import ClusterSnapshot, DeviceEntry, ModelEntry
from control.core.placement.plan import (
    BindingConstraint,
    Placement,
    PlacementPlan,
    PlanError,
    Unplaced,
)
from control.core.placement.registry import PLACEMENT, make_placement, plan_with
from control.core.placement.validate import violations

__all__ = [
    "PLACEMENT",
    "BindingConstraint",
    "ClusterSnapshot",
    "Demand",
    "DeviceEntry",
    "Eviction",
    "Load",
    "ModelDemand",
    "ModelEntry",
    "Move",
    "Placement",
    "PlacementPlan",
    "PlanDiff",
    "PlanError",
    "PoolChange",
    "Unplaced",
    "apply_diff",
    "demand_from_workflows",
    "diff",
    "make_placement",
    "mean_service_s",
    "plan_with",
    "violations",
]
