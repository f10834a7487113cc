"""Helpers shared by the stages: place one replica with its reason, run stages into a plan, and
the adapter that lets a stage act as a stand-alone policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from control.core.placement.base import PlacementStage
from control.core.placement.choose import pick
from control.core.placement.demand import Demand
from control.core.placement.diagnose import diagnose
from control.core.placement.inputs import ClusterSnapshot, precision_for
from control.core.placement.plan import PlacementPlan, PlanError
from control.core.placement.replicas import ReplicaTarget, one_each
from control.core.placement.workspace import Group, Workspace


def describe(ws: Workspace, key: str, group: Group) -> str:
    """Where a replica went and what is left there, e.g. "d3 (fp16), 4000 MiB leaves 12000"."""
    mem = ws.mem(key)
    prec = precision_for(ws.models[key], ws.devices[group[0]])
    if len(group) == 1:
        where = f"device {group[0]}"
    else:
        where = f"TP group {'+'.join(group)} in interconnect domain {ws.devices[group[0]].domain}"
    left = min(ws.free[d] for d in group) - mem
    return f"{where} ({prec}), {mem} MiB per device leaves {left} MiB free"


def place_one(
    ws: Workspace, key: str, pool: str, lead: str, *, spread: bool = False, affinity: bool = True,
    record_failure: bool = True,
) -> Group | None:  # fmt: skip
    """Place one replica of ``key`` in ``pool`` with reason "<lead>: <where>; <target reason>".

    Returns the group, or None (recording why, unless ``record_failure`` is False)."""
    group = pick(ws, key, pool, spread=spread, affinity=affinity)
    if group is None:
        if record_failure:
            diagnose(ws, key, pool)
        return None
    target = ws.targets.get(key)
    why = f"{lead}: {describe(ws, key, group)}"
    if target is not None:
        why += f"; replica {ws.count[key] + 1} of {target.count} ({target.reason})"
    ws.add(key, group, pool, why)
    return group


def by_memory(ws: Workspace, keys: Sequence[str] | None = None) -> list[str]:
    """Model keys, largest footprint (memory x tp degree) first, then by key."""
    keys = list(ws.models) if keys is None else list(keys)
    return sorted(keys, key=lambda k: (-ws.mem(k) * ws.models[k].spec.tp_degree, k))


def run_stages(
    snapshot: ClusterSnapshot,
    demand: Demand,
    targets: dict[str, ReplicaTarget],
    stages: Sequence[tuple[PlacementStage, Any]],
    policy: str,
) -> PlacementPlan:
    """Run ``stages`` in order on one fresh workspace and return the finished plan."""
    ws = Workspace(snapshot, demand, targets)
    for stage, config in stages:
        if not isinstance(config, stage.config_type):
            raise PlanError(
                f"{stage.name} config={type(config).__name__}: needs a {stage.config_type.__name__}"
            )
        stage.place(ws, config)
    return ws.finish(policy)


class StagePolicy:
    """Mixin: a stage used alone. It runs first, then best fit places what it left (one replica
    per model unless the stage says otherwise through ``targets``)."""

    name: ClassVar[str]
    config_type: ClassVar[type]

    def targets(
        self, snapshot: ClusterSnapshot, demand: Demand, config: Any
    ) -> dict[str, ReplicaTarget]:
        return one_each(snapshot)

    def plan(
        self, snapshot: ClusterSnapshot, demand: Demand, config: Any | None = None
    ) -> PlacementPlan:
        from control.core.placement.best_fit import BestFitConfig, BestFitPlacement

        cfg = self.config_type() if config is None else config
        stages: list[tuple[PlacementStage, Any]] = [(self, cfg)]  # type: ignore[list-item]
        if self.name != BestFitPlacement.name:
            stages.append((BestFitPlacement(), BestFitConfig()))
        return run_stages(snapshot, demand, self.targets(snapshot, demand, cfg), stages, self.name)
