"""Scenarios: everything one twin run needs, as frozen values.

A :class:`Scenario` holds the fleet (devices, models, the placement of replicas), the tenancy
configuration (tenants, quotas, headroom), the workflows, the policy knobs of the core, the
latency tables the simulated executor waits out, the workload (which trace, how fast, which
tenants and workflows) and the seeds. Build one from a YAML/JSON file
(:func:`sim.scenario_io.load_scenario`), from the live database (``control.services.whatif``),
or in code. :meth:`Scenario.blueprint` gives the ``CoreBlueprint`` the live driver would build
from the same state, so the twin runs the very core that runs in production.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from control.core.assembly import CoreBlueprint
from control.core.context import CoreConfig
from control.core.dag.spec import DagSpec
from control.core.latency import DecodeRow, LatencyRow, LoadRow, TableLatencyModel
from control.core.tenancy.base import TenancyConfig
from control.core.tenancy.config import TenancyManagerConfig
from control.core.tenancy.cost import CostModel
from control.core.types import DeviceSpec, ModelSpec
from sim.driver import FleetEvent
from sim.executor import SimExecutorConfig

_NONE: Mapping[str, Mapping[str, int]] = MappingProxyType({})


@dataclass(frozen=True)
class PlacedReplica:
    """``replicas`` copies of ``model_key`` on the device group ``device_ids`` at start."""

    model_key: str
    device_ids: tuple[str, ...]
    replicas: int = 1
    pool: str = "hot"

    def __post_init__(self) -> None:
        if not self.device_ids:
            raise ValueError(f"PlacedReplica.device_ids for {self.model_key}: must not be empty")
        if self.replicas < 1:
            raise ValueError(f"PlacedReplica.replicas={self.replicas}: must be >= 1")


@dataclass(frozen=True)
class LatencyTables:
    """Rows for ``TableLatencyModel``; ``sources`` says where each table came from."""

    rows: tuple[LatencyRow, ...] = ()
    decode: tuple[DecodeRow, ...] = ()
    loads: tuple[LoadRow, ...] = ()
    sources: tuple[str, ...] = ()

    def model(self) -> TableLatencyModel:
        return TableLatencyModel(self.rows, self.decode, self.loads)


@dataclass(frozen=True)
class Workload:
    """Which requests arrive. ``trace``: azure | mooncake | servegen | synthetic; ``source``: a
    shipped slice name or a file path. ``rate_factor`` scales arrival rates (time scaling).
    Trace requests map to tenants and workflows by the seeded weighted choices ``tenants`` and
    ``workflows`` (name -> integer weight); requests take their tenant's priority class.
    ``deadline_s`` per workflow is the end-to-end SLO (also the request's deadline).
    ``routes`` weights router branches: node id -> label -> weight."""

    trace: str = "azure"
    source: str = "azure_code"
    rate_factor: float = 1.0
    max_requests: int | None = 500
    max_span_s: float | None = None
    tenants: Mapping[str, int] = field(default_factory=dict)
    workflows: Mapping[str, int] = field(default_factory=dict)
    deadline_s: Mapping[str, float] = field(default_factory=dict)
    ttft_slo_s: Mapping[str, float] = field(default_factory=dict)
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    routes: Mapping[str, Mapping[str, int]] = field(default_factory=lambda: _NONE)
    synthetic: Mapping[str, float] = field(default_factory=dict)  # rate_rps, duration_s, cv, ...

    def __post_init__(self) -> None:
        if self.trace not in ("azure", "mooncake", "servegen", "synthetic"):
            raise ValueError(f"Workload.trace={self.trace!r}: azure|mooncake|servegen|synthetic")
        if self.rate_factor <= 0:
            raise ValueError(f"Workload.rate_factor={self.rate_factor}: must be > 0")
        if not self.workflows:
            raise ValueError("Workload.workflows: name at least one workflow")


@dataclass(frozen=True)
class Scenario:
    name: str
    devices: tuple[DeviceSpec, ...]
    models: tuple[ModelSpec, ...]
    workflows: tuple[DagSpec, ...]
    placement: tuple[PlacedReplica, ...]
    workload: Workload
    tenancy: TenancyConfig = field(default_factory=TenancyConfig)
    latency: LatencyTables = field(default_factory=LatencyTables)
    cost: CostModel = field(default_factory=CostModel)
    core_config: CoreConfig = field(default_factory=CoreConfig)
    tenancy_config: TenancyManagerConfig = field(default_factory=TenancyManagerConfig)
    executor: SimExecutorConfig = field(default_factory=SimExecutorConfig)
    fleet_events: tuple[FleetEvent, ...] = ()
    seeds: tuple[int, ...] = (0, 1, 2)
    description: str = ""

    def __post_init__(self) -> None:
        devs = {d.device_id for d in self.devices}
        models = {m.key for m in self.models}
        for p in self.placement:
            if p.model_key not in models:
                raise ValueError(f"placement model_key={p.model_key!r}: not a model of {self.name}")
            bad = [d for d in p.device_ids if d not in devs]
            if bad:
                raise ValueError(f"placement device_ids={bad!r}: not devices of {self.name}")
        for fe in self.fleet_events:
            if fe.device_id not in devs:
                raise ValueError(f"fleet event device_id={fe.device_id!r}: not a device")
        if not self.seeds:
            raise ValueError(f"Scenario.seeds of {self.name}: at least one seed")

    def blueprint(self, seed: int) -> CoreBlueprint:
        return CoreBlueprint(
            devices=self.devices, models=self.models, workflows=self.workflows,
            tenancy=self.tenancy, cost=self.cost, core_config=self.core_config,
            tenancy_config=self.tenancy_config, seed=seed,
        )  # fmt: skip

    def replica_slots(self) -> list[tuple[str, tuple[str, ...], str]]:
        """(model key, device ids, pool) of every replica to load at start, in order."""
        return [
            (p.model_key, p.device_ids, p.pool) for p in self.placement for _ in range(p.replicas)
        ]
