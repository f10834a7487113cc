"""The twin drives the same autoscaling code as a plain replay: with the RAG models
autoscaled (scale-out on backlog, scale-in after idle, the reranker to zero) the SimPy twin
driver and the replay driver make identical decisions, scale events included."""

from __future__ import annotations

from dataclasses import replace

from control.core.actions import DrainReplica, LoadModel
from control.core.assembly import CoreBlueprint, build_core
from control.core.dag.spec import dag_from_dict
from control.core.events import ReplicaLoaded
from sim.driver import Arrival, TwinDriver
from sim.executor import SimExecutor, SimExecutorConfig
from tests.sim.test_parity import TENANTS, _arrivals
from tests.support import builders as b
from tests.support.replay import Arrival as ReplayArrival
from tests.support.replay import ReplayDriver
from tests.support.replay import SimExecutor as ReplayExecutor

SCALED = {
    "minilm:1": {"min_replicas": 1, "max_replicas": 3, "scale_out_delay_s": 0.02, "idle_s": 2.0},
    "rerank:1": {"min_replicas": 0, "max_replicas": 2, "scale_out_delay_s": 0.02, "idle_s": 2.0},
}
MODELS = tuple(replace(m, **SCALED.get(m.key, {})) for m in b.MODELS)


def _core():  # noqa: ANN202
    devs = b.devices(4, n_cold=2)
    bp = CoreBlueprint(devices=tuple(devs), models=MODELS, workflows=(dag_from_dict(b.RAG),),
                       tenancy=TENANTS, seed=1)  # fmt: skip
    core = build_core(bp, b.latency())
    for i, (m, d) in enumerate([("minilm:1", "d000"), ("rerank:1", "d001"),
                                ("smollm2:1", "d003")]):  # fmt: skip
        core.ingest(ReplicaLoaded(f"r{i}", m, (d,), "hot"), 0.0)
    return core, {d.device_id: d for d in devs}


def test_twin_and_replay_make_the_same_scale_decisions() -> None:
    burst = _arrivals(150, 60.0)
    late = [(t + 30.0, replace(r, request_id=f"late-{r.request_id}"))
            for t, r in _arrivals(10, 2.0)]  # fmt: skip
    reqs = burst + late
    core1, devs = _core()
    log1 = ReplayDriver(core1, ReplayExecutor(b.latency(), {k: d.accelerator
                                                            for k, d in devs.items()})
                        ).run([ReplayArrival(t, r) for t, r in reqs])  # fmt: skip
    core2, devs2 = _core()
    plain = SimExecutorConfig(prefix_cache=False, transfers=False)
    twin = TwinDriver(core2, SimExecutor(b.latency(), devs2, {m.key: m for m in MODELS}, plain),
                      keep_log=True)  # fmt: skip
    log2 = twin.run([Arrival(t, r) for t, r in reqs])
    drains = [a for _, a in log1 if isinstance(a, DrainReplica)]
    scale_outs = [a for _, a in log1 if isinstance(a, LoadModel) and "queue delay" in a.reason]
    assert scale_outs and drains  # it scaled both ways
    assert log2 == log1
