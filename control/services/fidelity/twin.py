"""The twin side of the fidelity check: the very request list through ``sim.runner.run_seed``.

Batching, queueing and routing are the core's own decisions on both sides. The simulated
executor waits out the in-worker table plus the measured per-batch overhead (the replica's busy
path); the measured per-run overhead (off the busy path) is added to each request's end-to-end
time, as the live runtime adds it outside the device.

``run_twin_replayed`` is a diagnostic beside the figures: the same replay with every batch
taking the device time the live run measured for it, which separates the error of the table
(device-time prediction on a machine whose speed moves) from the error of everything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from control.core.actions import Dispatch
from control.core.assembly import build_core
from control.core.events import ReplicaLoaded
from control.services.fidelity.records import Overheads, RequestSeen
from sim.driver import Arrival, TwinDriver
from sim.executor import Completion, SimExecutor
from sim.metrics import Recorder
from sim.runner import output_nodes, run_seed
from sim.scenario import Scenario


def run_twin_detailed(
    scenario: Scenario, reqs: list[Arrival], overheads: Overheads, seed: int | None = None
) -> dict[str, RequestSeen]:
    """Request id -> what the twin predicts for it (succeeded requests only), the scatter of
    device times drawn with ``seed`` (default: the scenario's first)."""
    busy = overheads.busy_us
    sc = replace(scenario, executor=replace(scenario.executor, dispatch_overhead_us=busy))
    seed = scenario.seeds[0] if seed is None else seed
    run = run_seed(sc, seed, samples=0, requests=reqs, keep_log=True)
    batch_of: dict[str, tuple[int, float]] = {}
    for _, action in run.driver.log:
        if type(action) is Dispatch and action.replica_id is not None:
            # prefix cache off: predicting a batch again is pure and gives the same duration
            device_ms = (run.driver.executor.run(action).duration_us - busy) / 1000
            for item in action.items:
                batch_of[item.request_id] = (len(action.items), device_ms)
    out = {}
    for rid, r in run.recorder.requests.items():
        if r.status != "succeeded" or r.end is None:
            continue
        size, device_ms = batch_of.get(rid, (0, 0.0))
        out[rid] = RequestSeen(r.end - r.arrival + overheads.run_us / 1e6, size, device_ms)
    return out


def run_twin_pooled(
    scenario: Scenario, reqs: list[Arrival], overheads: Overheads, draws: int
) -> list[dict[str, RequestSeen]]:
    """``draws`` replays that differ only in the seed of the device-time scatter (seeds
    ``scenario.seeds[0]`` onwards). The twin predicts a distribution: with scattered device
    times one replay is one sample of it, whose SLO attainment alone moved by +-3 points per
    seed here (a batch more or less late near the SLO); figures over the pooled replays are the
    distribution's own. Without scatter every replay is the same, so one is run."""
    if not scenario.executor.service_sigma_milli:
        draws = 1
    first = scenario.seeds[0]
    return [run_twin_detailed(scenario, reqs, overheads, first + k) for k in range(max(1, draws))]


def run_twin(
    scenario: Scenario, reqs: list[Arrival], overhead_us: int, run_overhead_us: int = 0
) -> dict[str, float]:
    """Request id -> end-to-end seconds in the twin, ``overhead_us`` per batch on the busy path
    and ``run_overhead_us`` per run beside it."""
    seen = run_twin_detailed(scenario, reqs, Overheads(overhead_us, run_overhead_us))
    return {rid: s.e2e_s for rid, s in seen.items()}


class ReplayedDeviceExecutor(SimExecutor):
    """Diagnostic only: a batch takes the longest device time its requests had in the live run
    (plus the busy overhead), so the twin's remaining error is that of its batching, queueing and
    overheads alone. Falls back to the table for a batch with a request the live run lacks."""

    def __init__(self, *args, device_ms: Mapping[str, float], **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.device_ms = dict(device_ms)

    def run(self, d: Dispatch) -> Completion:
        done = super().run(d)
        live = [self.device_ms.get(i.request_id) for i in d.items]
        if d.replica_id is None or any(ms is None for ms in live):
            return done
        total = self.config.dispatch_overhead_us + round(max(live) * 1000)  # type: ignore[type-var]
        return replace(done, duration_us=total, result=replace(done.result, device_us=total))


def run_twin_replayed(
    scenario: Scenario, reqs: list[Arrival], overheads: Overheads, device_ms: Mapping[str, float]
) -> dict[str, float]:
    """Request id -> end-to-end seconds in the twin when every batch takes the device time the
    live run measured for it (``ReplayedDeviceExecutor``): the error left is not the table's."""
    sc = replace(
        scenario, executor=replace(scenario.executor, dispatch_overhead_us=overheads.busy_us)
    )
    latency, seed = sc.latency.model(), sc.seeds[0]
    core = build_core(sc.blueprint(seed), latency)
    for i, (model_key, device_ids, pool) in enumerate(sc.replica_slots()):
        rid = f"{model_key}@{device_ids[0]}#p{i}"
        core.ingest(ReplicaLoaded(rid, model_key, device_ids, pool), 0.0)
    ex = ReplayedDeviceExecutor(
        latency, {d.device_id: d for d in sc.devices}, {m.key: m for m in sc.models}, sc.executor,
        sc.workload.routes, seed, device_ms=device_ms,
    )  # fmt: skip
    rec = Recorder(sc.cost, output_nodes(sc))
    TwinDriver(core, ex, observer=rec).run(reqs, until=(reqs[-1].at if reqs else 0) * 20 + 3600)
    rec.finalize(core)
    return {
        rid: r.end - r.arrival + overheads.run_us / 1e6
        for rid, r in rec.requests.items()
        if r.status == "succeeded" and r.end is not None
    }
