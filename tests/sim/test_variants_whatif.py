"""The twin with precision variants: a scenario declares a model's int8 variant, and a what-if
compares "add an int8 replica" with "add a second fp32 replica" on a fast-heavy trace.

Nine in ten requests come from a tenant whose runs are ``fast`` (any variant), one in ten from
an ``exact`` one. One fp32 replica is busy. A second fp32 replica halves each replica's load;
an int8 replica (0.35 x the fp32 latency, 115 of 400 MiB, billed by memory) takes the whole
fast share at a third of the work, so the fast-heavy run ends sooner (lower p99) and costs
less per token; the exact tenant's steps stay on fp32 in both (measured quality 0.97 is below
the exact floor of 0.99).
"""

from __future__ import annotations

import pytest

from control.services.errors import ValidationError
from control.services.whatif_variants import _replica_add
from sim.runner import run_seed
from sim.scenario_io import ScenarioError, scenario_from_dict
from sim.scenario_variants import add_replica
from sim.whatif import compare

INT8 = "emb:1@int8"


def _device(dev: str) -> dict:
    return {"device_id": dev, "node_id": "n0", "kind": "cpu", "accelerator": "cpu",
            "memory_mib": 1024, "interconnect_group": "n0"}  # fmt: skip


def scenario() -> dict:
    return {
        "name": "variants", "seeds": [0, 1, 2],
        "devices": [_device("d0"), _device("d1")],
        "models": [{"name": "emb", "version": "1", "task": "embed", "memory_mib": 400,
                    "max_batch_size": 4, "max_batch_tokens": 4096, "cost_milli": 1000,
                    "variants": [{"precision": "int8", "memory_mib": 115,
                                  "latency_scale": 0.35, "quality_score": 0.97}]}],
        "workflows": [{"workflow": "w", "inputs": {"text": "text"},
                       "outputs": {"v": "e.embedding"},
                       "nodes": [{"id": "e", "task": "embed", "model": "emb:1"}],
                       "edges": [{"from": "input.text", "to": "e.text"}]}],
        "placement": [{"model_key": "emb:1", "device_ids": ["d0"]}],
        "latency": {"tables": [{"model": "emb:1", "accelerator": "cpu",
                                "rows": [[1, 64, 8_000], [4, 64, 24_000], [1, 512, 20_000],
                                         [4, 512, 70_000]], "load_us": 2_000_000}]},
        "tenants": [{"tenant_id": "fast", "weight": 1, "quality": "fast"},
                    {"tenant_id": "exact", "weight": 1, "quality": "exact"}],
        "workload": {"trace": "synthetic", "workflows": {"w": 1}, "max_requests": 600,
                     "tenants": {"fast": 9, "exact": 1},
                     "synthetic": {"rate_rps": 150, "duration_s": 4, "input_tokens": 64,
                                   "output_tokens": 1}},
    }  # fmt: skip


def test_a_declared_variant_is_a_model_of_its_own_with_scaled_latency_and_price():
    sc = scenario_from_dict(scenario())
    variant = next(m for m in sc.models if m.key == INT8)
    assert (variant.base, variant.precision, variant.memory_mib) == ("emb:1", "int8", 115)
    assert variant.quality_score == pytest.approx(0.97)
    lat = sc.latency.model()
    base_us = lat.forward_us("emb:1", "cpu", 1, 64)
    assert lat.forward_us(INT8, "cpu", 1, 64) == pytest.approx(base_us * 0.35, rel=0.01)
    assert sc.cost.weights[INT8].input_milli == 288  # ceil(1000 x 115 / 400)
    with pytest.raises(ScenarioError, match="memory_mib"):
        raw = scenario()
        raw["models"][0]["variants"] = [{"precision": "int8"}]
        scenario_from_dict(raw)


def _served(raw: dict) -> dict[str, set[str]]:
    """Tenant -> model keys its steps ran on (seed 0)."""
    from control.core.actions import Dispatch

    run = run_seed(scenario_from_dict(raw), 0, keep_log=True, samples=0)
    tenant = {r: t.tenant for r, t in run.recorder.requests.items()}
    out: dict[str, set[str]] = {}
    for _, a in run.driver.log:
        if isinstance(a, Dispatch):
            for item in a.items:
                out.setdefault(tenant[item.request_id], set()).add(a.model_key or "")
    return out


def test_adding_an_int8_replica_beats_a_second_fp32_one_on_a_fast_heavy_trace():
    base = scenario()
    int8 = add_replica(base, {"model_key": INT8, "device_ids": ["d1"]})
    fp32 = add_replica(base, {"model_key": "emb:1", "device_ids": ["d1"]})
    assert _served({**base, **int8}) == {"fast": {INT8}, "exact": {"emb:1"}}
    _, (with_int8, with_fp32) = compare(base, {"int8": int8, "fp32": fp32}, seeds=[0, 1, 2])
    figure = {c.name: {r.metric: r.variant for r in c.rows} for c in (with_int8, with_fp32)}
    assert figure["int8"]["all.e2e_p99_s"] < figure["fp32"]["all.e2e_p99_s"]
    assert (figure["int8"]["fleet.cost_units_per_1k_tokens"]
            < figure["fp32"]["fleet.cost_units_per_1k_tokens"])  # fmt: skip


def test_the_replica_add_what_if_refuses_an_unknown_model_or_device():
    with pytest.raises(ValidationError) as bad:
        _replica_add(None, scenario(), {"model_key": "emb:1@int4", "device_ids": ["d1"]}, "v.x")
    assert bad.value.field == "v.x" and "known" in bad.value.message
    with pytest.raises(ValidationError, match="device_ids"):
        _replica_add(None, scenario(), {"model_key": INT8, "device_ids": ["zz"]}, "v.x")
