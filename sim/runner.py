"""One twin run: a scenario and a seed in, a recorder (and the driver) out.

``run_seed`` builds the core with ``control.core.assembly.build_core`` (the live driver's own
wiring), adopts the scenario's placement as replicas already loaded at time 0, and replays the
seed's workload through :class:`~sim.driver.TwinDriver` and the simulated executor.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from control.core.assembly import build_core
from control.core.events import ReplicaLoaded
from control.core.latency import TableLatencyModel
from sim.driver import Arrival, FleetEvent, TwinDriver
from sim.env import tuned_gc
from sim.executor import SimExecutor
from sim.metrics import Recorder
from sim.scenario import LatencyTables, Scenario
from sim.workload import arrivals

#: Latency models shared by the replays of equal tables (seeds, variants, benchmark repeats).
#: A ``TableLatencyModel`` is immutable and its memo of lookups is a pure cache, so sharing one
#: changes no prediction; it only spares each replay the interpolations an earlier one made.
_LATENCY_MODELS: dict[LatencyTables, TableLatencyModel] = {}
#: Distinct tables kept (the oldest goes first): a what-if compares a handful of layouts.
LATENCY_MODELS_KEPT = 8


def latency_model(tables: LatencyTables) -> TableLatencyModel:
    """The shared latency model of ``tables`` (built on first use; see ``_LATENCY_MODELS``)."""
    model = _LATENCY_MODELS.get(tables)
    if model is None:
        if len(_LATENCY_MODELS) >= LATENCY_MODELS_KEPT:
            del _LATENCY_MODELS[next(iter(_LATENCY_MODELS))]
        model = _LATENCY_MODELS[tables] = tables.model()
    return model


@dataclass
class SeedRun:
    recorder: Recorder
    driver: TwinDriver
    num_requests: int


def output_nodes(scenario: Scenario) -> dict[str, frozenset[str]]:
    """Workflow -> nodes whose output the caller receives (TTFT is measured there)."""
    return {
        w.workflow: frozenset(ref.split(".", 1)[0] for ref in w.outputs.values())
        for w in scenario.workflows
    }


@dataclass
class PreparedSeed:
    """A seed's world, built and not yet replayed: the core with its placement loaded, the
    driver, the arrivals and the replay's horizon. ``replay`` runs it once."""

    recorder: Recorder
    driver: TwinDriver
    requests: list[Arrival]
    until: float
    sample_every_s: float | None
    fleet_events: tuple[FleetEvent, ...]

    def replay(self) -> SeedRun:
        """Replay to quiescence (under ``tuned_gc``), finalize the recorder; call once."""
        with tuned_gc():
            self.driver.run(self.requests, fleet_events=self.fleet_events, until=self.until,
                            sample_every_s=self.sample_every_s)  # fmt: skip
        self.recorder.finalize(self.driver.core)
        return SeedRun(self.recorder, self.driver, len(self.requests))


def prepare_seed(
    scenario: Scenario,
    seed: int,
    *,
    samples: int = 40,
    keep_log: bool = False,
    requests: list[Arrival] | None = None,
) -> PreparedSeed:
    """Build everything a replay of ``seed`` needs (see ``run_seed``) without running it, so a
    benchmark can time the replay alone."""
    latency = latency_model(scenario.latency)
    core = build_core(scenario.blueprint(seed), latency)
    for i, (model_key, device_ids, pool) in enumerate(scenario.replica_slots()):
        core.ingest(
            ReplicaLoaded(f"{model_key}@{device_ids[0]}#p{i}", model_key, device_ids, pool), 0.0
        )
    ex_config = scenario.executor
    if ex_config.transfer_costs is None:  # the twin charges moves as the core prices them
        ex_config = replace(ex_config, transfer_costs=scenario.core_config.transfer)
    ex = SimExecutor(
        latency, {d.device_id: d for d in scenario.devices}, {m.key: m for m in scenario.models},
        ex_config, scenario.workload.routes, seed,
    )  # fmt: skip
    reqs = arrivals(scenario, seed) if requests is None else requests
    span = reqs[-1].at if reqs else 1.0
    rec = Recorder(scenario.cost, output_nodes(scenario), bucket_s=max(span / 20, 1e-3))
    driver = TwinDriver(core, ex, observer=rec, keep_log=keep_log)
    every = max(span / samples, 1e-3) if samples else None
    return PreparedSeed(rec, driver, reqs, span * 20 + 3600.0, every, scenario.fleet_events)


def run_seed(
    scenario: Scenario,
    seed: int,
    *,
    samples: int = 40,
    keep_log: bool = False,
    requests: list[Arrival] | None = None,
) -> SeedRun:
    """Replay the scenario's workload for ``seed`` to quiescence; ``requests`` replaces the
    workload's arrivals (the fidelity check replays the very list it sent to the live stack)."""
    prepared = prepare_seed(scenario, seed, samples=samples, keep_log=keep_log, requests=requests)
    return prepared.replay()
