"""The shipped RAG case's shape: a node of 4 GPUs (one kept cold) and a node of 2, a 70B at TP2,
two encoders. A demanding LLM gets every TP group the fleet can hold and the rest is reported;
the naive baseline is exactly one replica per model, round-robin in registration order, and
ignores demand and traffic."""

from __future__ import annotations

import pytest

from control.core.placement import ClusterSnapshot, DeviceEntry, plan_with, violations
from control.core.types import DeviceSpec
from tests.core.placement.worlds import demand, model

MODELS = (
    model("embed", 1_024, task="embed"),
    model("rerank", 1_024, task="rerank"),
    model("llm", 70_000, tp=2, task="generate"),
)
TRAFFIC = {("embed:1", "rerank:1"): 3.0, ("rerank:1", "llm:1"): 3.0}


def rag_fleet() -> ClusterSnapshot:
    devs = [("a", i, "cold" if i == 3 else "hot") for i in range(4)] + [("b", 0, "hot"),
                                                                           ("b", 1, "hot")]  # fmt: skip
    return ClusterSnapshot(
        tuple(
            DeviceEntry(
                DeviceSpec(f"gpu-{n}-{i}", f"gpu-{n}", "gpu", "H100", 81_559, f"nvl-{n}", pool=pool)
            )  # fmt: skip
            for n, i, pool in devs
        ),
        MODELS,
    )


@pytest.mark.parametrize(
    ("llm_rate", "placed", "missing"),
    [
        (0.5, 1, 0),  # 0.5 x 0.4 / 0.7: one replica
        (3.0, 2, 0),  # 3 x 0.4 / 0.7 = 1.7: two
        (10.0, 2, 4),  # six wanted; the fleet holds two TP2 groups beside the cold GPU
    ],
)
def test_llm_gets_replicas_from_demand_up_to_what_the_fleet_holds(llm_rate, placed, missing):
    rates = {"embed:1": (llm_rate, 0.0003), "rerank:1": (llm_rate, 0.0007),
             "llm:1": (llm_rate, 0.4)}  # fmt: skip
    s = rag_fleet()
    plan = plan_with("planner", s, demand(rates, TRAFFIC))
    assert plan.replicas_of("llm:1") == placed
    assert violations(plan, s) == []
    assert plan.cold_devices == ("gpu-a-3",)  # the declared buffer stays free
    groups = [p.device_ids for p in plan.placements if p.model_key == "llm:1"]
    assert all(len({d.split("-")[1] for d in g}) == 1 for g in groups)  # one NVLink domain each
    short = {u.model_key: u.missing for u in plan.unplaced}
    assert short.get("llm:1", 0) == missing
    if missing:
        assert "tp_domain" in {b.kind for b in plan.binding_constraints}
    # the encoders share one device (neighbours), next to an LLM shard
    (embed,), (rerank,) = ([p.device_ids for p in plan.placements if p.model_key == k]
                           for k in ("embed:1", "rerank:1"))  # fmt: skip
    assert embed == rerank and any(embed[0] in g for g in groups)


@pytest.mark.parametrize("rate", [0.0, 3.0, 50.0])
def test_naive_is_one_round_robin_replica_per_model_whatever_the_demand(rate):
    rates = {k: (rate, 0.4) for k in ("embed:1", "rerank:1", "llm:1")}
    plan = plan_with("naive", rag_fleet(), demand(rates, TRAFFIC))
    layout = {p.model_key: p.device_ids for p in plan.placements}
    assert layout == {
        "embed:1": ("gpu-a-0",),
        "rerank:1": ("gpu-a-1",),
        "llm:1": ("gpu-a-2", "gpu-a-3"),
    }
    assert all(p.replicas == 1 for p in plan.placements)
