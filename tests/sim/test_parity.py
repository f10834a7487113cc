"""Parity: the SimPy twin driver and the plain replay driver make identical decisions."""

from __future__ import annotations

import pytest

from control.core.assembly import CoreBlueprint, build_core
from control.core.dag.spec import dag_from_dict
from control.core.events import ReplicaLoaded
from control.core.tenancy.base import QuotaSpec, TenancyConfig, TenantSpec
from control.core.types import Request
from sim.driver import Arrival, FleetEvent, TwinDriver
from sim.executor import SimExecutor, SimExecutorConfig
from sim.traces.azure import read_azure_csv
from sim.traces.records import scale_time, shipped_trace_path
from tests.support import builders as b
from tests.support.replay import Arrival as ReplayArrival
from tests.support.replay import ReplayDriver
from tests.support.replay import SimExecutor as ReplayExecutor

TENANTS = TenancyConfig(
    (TenantSpec("a", 3, "critical"), TenantSpec("b", 1, "standard")),
    (QuotaSpec("b", "concurrent_requests", 6, borrowing_limit=0),),
)


def _core(seed: int, hot_llm: bool):
    devs = b.devices(4, n_cold=2)
    bp = CoreBlueprint(
        devices=tuple(devs), models=b.MODELS, workflows=(dag_from_dict(b.RAG),),
        tenancy=TENANTS, seed=seed,
    )  # fmt: skip
    lat = b.latency()
    core = build_core(bp, lat)
    placed = [("minilm:1", "d000"), ("rerank:1", "d001"), ("minilm:1", "d002")]
    if hot_llm:
        placed.append(("smollm2:1", "d003"))
    for i, (m, d) in enumerate(placed):
        core.ingest(ReplicaLoaded(f"r{i}", m, (d,), "hot"), 0.0)
    return core, lat, {d.device_id: d for d in devs}


def _arrivals(n: int, rate: float) -> list[tuple[float, Request]]:
    trace = scale_time(read_azure_csv(shipped_trace_path("azure_code"), max_requests=n), rate)
    return [
        (t.arrival_s, Request(f"q{i}", "ab"[i % 3 == 0], "rag", prompt_tokens=min(t.input_tokens, 2000),
                              max_output_tokens=min(t.output_tokens, 64)))
        for i, t in enumerate(trace)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("n", "rate", "hot_llm", "seed"),
    [(150, 10.0, True, 0), (150, 40.0, False, 3), (80, 2.0, True, 7)],
)
def test_twin_and_replay_decision_logs_are_identical(n, rate, hot_llm, seed):
    reqs = _arrivals(n, rate)
    core1, lat, devs = _core(seed, hot_llm)
    replay = ReplayDriver(core1, ReplayExecutor(lat, {k: d.accelerator for k, d in devs.items()}))
    log1 = replay.run([ReplayArrival(t, r) for t, r in reqs])
    core2, lat2, devs2 = _core(seed, hot_llm)
    plain = SimExecutorConfig(prefix_cache=False, transfers=False)
    models = {m.key: m for m in b.MODELS}
    twin = TwinDriver(core2, SimExecutor(lat2, devs2, models, plain), keep_log=True)
    log2 = twin.run([Arrival(t, r) for t, r in reqs])
    assert len(log1) > 2 * n  # dispatches, finishes and more: a log worth comparing
    kinds = {type(a).__name__ for _, a in log1}
    assert {"Dispatch", "RunFinished"} <= kinds
    assert log2 == log1


def test_parity_holds_with_loads():
    """No hot LLM replica: the core loads one on the cold pool; both drivers wait it out."""
    reqs = _arrivals(40, 5.0)
    core1, lat, devs = _core(1, hot_llm=False)
    log1 = ReplayDriver(
        core1, ReplayExecutor(lat, {k: d.accelerator for k, d in devs.items()})
    ).run([ReplayArrival(t, r) for t, r in reqs])
    core2, lat2, devs2 = _core(1, hot_llm=False)
    plain = SimExecutorConfig(prefix_cache=False, transfers=False)
    twin = TwinDriver(
        core2, SimExecutor(lat2, devs2, {m.key: m for m in b.MODELS}, plain), keep_log=True
    )
    assert "LoadModel" in {type(a).__name__ for _, a in log1}
    assert twin.run([Arrival(t, r) for t, r in reqs]) == log1


def test_device_failure_reroutes_and_recovery_reloads():
    reqs = _arrivals(60, 20.0)
    core, lat, devs = _core(0, hot_llm=True)
    ex = SimExecutor(lat, devs, {m.key: m for m in b.MODELS})
    twin = TwinDriver(core, ex, keep_log=True)  # the core restores d000's replicas itself
    twin.run(
        [Arrival(t, r) for t, r in reqs],
        fleet_events=[FleetEvent(0.5, "down", "d000"), FleetEvent(1.0, "up", "d000")],
    )
    embeds = [
        (t, a) for t, a in twin.log if type(a).__name__ == "Dispatch" and a.model_key == "minilm:1"
    ]
    assert not [a for t, a in embeds if 0.5 <= t < 1.0 and "d000" in a.device_ids]
    assert [a for t, a in embeds if t > 1.5 and "d000" in a.device_ids]  # reloaded and used again
    ended = {a.request_id for _, a in twin.log if type(a).__name__ in ("RunFinished", "Reject")}
    assert len(ended) == 60  # every request ends: the failure lost no run
