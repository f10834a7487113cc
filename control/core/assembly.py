"""Assemble a ready ``ControlCore`` from a fleet description.

Both drivers (live and twin) and the tests build their core here, so that they run the same
policies with the same wiring: the tenancy half is a ``TenancyManager`` with the configured
fair-share policy, models, workflows and devices are registered through ``ingest`` exactly as a
driver would at start-up, and randomness comes only from the seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from control.core.context import CoreConfig
from control.core.dag.spec import DagSpec
from control.core.engine import ControlCore
from control.core.events import DeviceUp, ModelRegistered, TenancyConfigChanged, WorkflowRegistered
from control.core.latency import LatencyModel
from control.core.tenancy.base import TenancyConfig
from control.core.tenancy.config import TenancyManagerConfig
from control.core.tenancy.cost import CostModel
from control.core.tenancy.manager import TenancyManager
from control.core.types import DeviceSpec, ModelSpec


@dataclass(frozen=True)
class CoreBlueprint:
    """Everything a core needs at start-up. ``seed`` fixes every random choice."""

    devices: tuple[DeviceSpec, ...]
    models: tuple[ModelSpec, ...]
    workflows: tuple[DagSpec, ...]
    tenancy: TenancyConfig = field(default_factory=TenancyConfig)
    cost: CostModel = field(default_factory=CostModel)
    core_config: CoreConfig = field(default_factory=CoreConfig)
    tenancy_config: TenancyManagerConfig = field(default_factory=TenancyManagerConfig)
    seed: int = 0


def build_core(blueprint: CoreBlueprint, latency: LatencyModel, now: float = 0.0) -> ControlCore:
    """A core with the blueprint's fleet registered at ``now``. Raises the core's own errors
    (e.g. InvalidWorkflowError with every problem) when the blueprint is inconsistent."""
    core = ControlCore(
        tenancy=TenancyManager(blueprint.tenancy_config),
        cost=blueprint.cost,
        latency=latency,
        config=blueprint.core_config,
        rng=random.Random(blueprint.seed),
    )
    for event in startup_events(blueprint):
        core.ingest(event, now)
    return core


def startup_events(blueprint: CoreBlueprint) -> Iterable[object]:
    """The events a driver records when it starts: tenancy, models, workflows, devices."""
    yield TenancyConfigChanged(blueprint.tenancy)
    yield from (ModelRegistered(m) for m in blueprint.models)
    yield from (WorkflowRegistered(w) for w in blueprint.workflows)
    yield from (DeviceUp(d) for d in blueprint.devices)
