"""Placement policies by name (a :class:`~control.core.registry.PolicyRegistry`).

A placement policy is stateless and takes its config per plan (``policy.plan(snapshot,
demand, config)``), so each entry's factory returns the one policy object."""

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
from control.core.registry import PolicyEntry, PolicyRegistry


def _entry(policy: PlacementPolicy, help_text: str) -> PolicyEntry:
    return PolicyEntry(policy.name, policy.config_type, lambda _config: policy, help_text)


PLACEMENT: PolicyRegistry[PlacementPolicy] = PolicyRegistry(
    "placement policy",
    (
        _entry(Planner(), "replicas from demand, tensor-parallel groups, co-location, cold pool"),
        _entry(NaivePlacement(), "each model on its own device, round-robin (baseline)"),
        _entry(BestFitPlacement(), "memory bin-packing: the device with least room that fits"),
        _entry(ColocatePlacement(), "workflow neighbours together, heaviest traffic first"),
        _entry(
            TensorParallelPlacement(),
            "tensor-parallel groups first, within one interconnect domain",
        ),
        _entry(SpreadPlacement(), "replicas from demand, spread over nodes for availability"),
        _entry(ColdPoolPlacement(), "devices kept out of hot placements for cold loads"),
    ),
    unknown_error=PlanError,
    config_error=PlanError,
)


def make_placement(name: str) -> PlacementPolicy:
    """The named policy; raises PlanError naming an unknown one."""
    return PLACEMENT.build(name)


def plan_with(
    name: str, snapshot: ClusterSnapshot, demand: Demand, config: Any | None = None
) -> PlacementPlan:
    """Plan with the named policy; ``config`` must be its ``config_type`` (None: defaults).
    Raises PlanError naming an unknown policy or a config of another type."""
    policy = make_placement(name)
    if config is not None:
        PLACEMENT.config_for(name, config)
    return policy.plan(snapshot, demand, config)
