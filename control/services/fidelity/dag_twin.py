"""The twin side of the whole-DAG fidelity check: the live run's arrivals through the core.

The scenario mirrors the live world (``dag_world``): the same devices, models, placement,
workflow, batching and tenant; the tables, overheads and tool time of the calibration
(``dag_tables``); the agent's router sends every query down its lookup branch, as the live
router does (every query asks "what"). A recorder notes each step's ready and end instants, so
stage times mean on both sides what the live spans mean: ``end - ready``.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.core.assembly import build_core
from control.core.dag.spec import dag_from_dict
from control.core.events import ReplicaLoaded
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.runtime.local_fleet import device_specs
from control.services.fidelity.dag_tables import Calibration
from control.services.fidelity.dag_world import (
    TENANT,
    DagFidelityConfig,
    devices,
    model_specs,
    placement,
    workflow_spec,
)
from sim.driver import Arrival, TwinDriver
from sim.executor import SimExecutor, SimExecutorConfig
from sim.metrics import Recorder
from sim.runner import output_nodes
from sim.scenario import PlacedReplica, Scenario, Workload


@dataclass(frozen=True)
class StageSeen:
    """One step of one run, as either side saw it: ``end - ready`` seconds, how long its batch
    held the replica (``device_ms``: dispatch to result) and the batch's size."""

    secs: float
    device_ms: float
    batch_size: int


@dataclass(frozen=True)
class TwinRun:
    """Per request id: end-to-end seconds and node -> its step (succeeded runs only)."""

    e2e_s: dict[str, float]
    stages: dict[str, dict[str, StageSeen]]


class _StageRecorder:
    """The twin's :class:`~sim.metrics.Recorder` (``inner``), plus each step's ready-to-end time
    and device time per request and node. A wrapper, not a subclass: the Recorder may be the
    compiled one (``make native``), which an interpreted class cannot inherit from."""

    def __init__(self, inner: Recorder) -> None:
        self.inner = inner
        self.stage: dict[str, dict[str, StageSeen]] = {}

    def __getattr__(self, name: str):  # noqa: ANN204 - the Observer's other hooks, unchanged
        return getattr(self.inner, name)

    def on_complete(self, d, done, now: float) -> None:  # noqa: ANN001
        self.inner.on_complete(d, done, now)
        device_ms = done.duration_us / 1000
        for item in d.items:
            seen = StageSeen(now - item.ready_at, device_ms, len(d.items))
            self.stage.setdefault(item.request_id, {})[item.node_id] = seen


def dag_scenario(cfg: DagFidelityConfig, cal: Calibration, draw: int = 0) -> Scenario:
    from control.core.batching.size_delay import SizeDelayConfig
    from control.core.context import CoreConfig

    routes = {"route": {"lookup": 1}} if cfg.workflow == "agent" else {}
    return Scenario(
        name=f"fidelity-{cfg.workflow}", devices=device_specs(devices()), models=model_specs(cfg),
        workflows=(dag_from_dict(workflow_spec(cfg)),),
        placement=tuple(PlacedReplica(k, (d,)) for k, d in placement().items()),
        workload=Workload(source="given", tenants={TENANT: 1}, workflows={cfg.workflow: 1},
                          routes=routes),
        tenancy=TenancyConfig(tenants=(TenantSpec(TENANT, 1),)), latency=cal.tables,
        core_config=CoreConfig(batching_config=SizeDelayConfig(
            max_queue_delay_s=cfg.max_queue_delay_s)),
        executor=SimExecutorConfig(prefix_cache=False, transfers=False, tool_us=cal.tool_us,
                                   dispatch_overhead_us=0),  # the rows hold the hops
        seeds=(cfg.seed + draw,),
    )  # fmt: skip


def run_dag_twin(cfg: DagFidelityConfig, cal: Calibration, reqs: list[Arrival]) -> TwinRun:
    """``reqs`` (as the live side sent them) through the twin once."""
    sc = dag_scenario(cfg, cal)
    latency, seed = sc.latency.model(), sc.seeds[0]
    core = build_core(sc.blueprint(seed), latency)
    for i, (model_key, device_ids, pool) in enumerate(sc.replica_slots()):
        core.ingest(ReplicaLoaded(f"{model_key}@{device_ids[0]}#p{i}", model_key, device_ids,
                                  pool), 0.0)  # fmt: skip
    ex = SimExecutor(latency, {d.device_id: d for d in sc.devices}, {m.key: m for m in sc.models},
                     sc.executor, sc.workload.routes, seed)  # fmt: skip
    rec = _StageRecorder(Recorder(sc.cost, output_nodes(sc)))
    TwinDriver(core, ex, observer=rec).run(reqs, until=(reqs[-1].at if reqs else 0) * 20 + 3600)
    rec.finalize(core)
    beside = cal.run_overhead_us / 1e6
    e2e = {rid: r.end - r.arrival + beside for rid, r in rec.requests.items()
           if r.status == "succeeded" and r.end is not None}  # fmt: skip
    return TwinRun(e2e, {rid: rec.stage.get(rid, {}) for rid in e2e})
