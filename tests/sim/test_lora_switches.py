"""The twin charges LoRA adapter loads where the core found the replica lacking the adapter
(issue 27, item 5): a trace cycling through more adapters than the replica's slots pays a load
per request, one within the slots pays each adapter's first load only, so a what-if with many
adapters shows the switch cost."""

from __future__ import annotations

from typing import Any

import pytest

from control.core.actions import Dispatch
from control.core.types import Request
from sim.driver import Arrival
from sim.runner import run_seed
from sim.scenario_io import scenario_from_dict

LOAD_S = 0.25
N = 12


def _scenario() -> dict[str, Any]:
    return {
        "name": "lora", "seeds": [0],
        "devices": [{"device_id": "c0", "node_id": "n", "kind": "cpu", "accelerator": "cpu",
                     "memory_mib": 8192, "interconnect_group": "g"}],
        "models": [{"name": "gen", "version": "1", "task": "generate", "memory_mib": 1024,
                    "max_adapters": 2, "adapter_load_s": LOAD_S}],
        "workflows": [{"workflow": "w", "inputs": {"query": "text"},
                       "outputs": {"text": "gen.text"},
                       "nodes": [{"id": "gen", "task": "generate", "model": "gen:1"}],
                       "edges": [{"from": "input.query", "to": "gen.prompt"}]}],
        "placement": [{"model_key": "gen:1", "device_ids": ["c0"]}],
        "latency": {"tables": [{"model": "gen:1", "accelerator": "cpu",
                                "rows": [[1, 100, 10_000], [8, 1000, 90_000]],
                                "decode": [1_000, 100]}]},
        "workload": {"trace": "synthetic", "workflows": {"w": 1}},
    }  # fmt: skip


def _run(adapters: int) -> tuple[float, list[Dispatch]]:
    """Mean latency of ``N`` requests one second apart, cycling through ``adapters``."""
    sc = scenario_from_dict(_scenario())
    reqs = [
        Arrival(1.0 + i, Request(f"r{i}", "t", "w", prompt_tokens=100, max_output_tokens=10,
                                 adapter=f"lora-{i % adapters}", adapter_model="gen:1"))
        for i in range(N)
    ]  # fmt: skip
    run = run_seed(sc, 0, keep_log=True, samples=0, requests=reqs)
    recs = [run.recorder.requests[f"r{i}"] for i in range(N)]
    assert all(r.status == "succeeded" and r.end is not None for r in recs)
    mean = sum(r.end - (1.0 + i) for i, r in enumerate(recs)) / N  # type: ignore[operator]
    return mean, [a for _, a in run.driver.log if isinstance(a, Dispatch)]


def test_more_adapters_than_slots_costs_a_load_per_request_within_them_only_the_first() -> None:
    within, d_within = _run(2)
    beyond, d_beyond = _run(4)
    assert sum(d.adapter_load_us > 0 for d in d_within) == 2  # each adapter's first load
    assert sum(d.adapter_load_us > 0 for d in d_beyond) == N  # LRU of 2, cycle of 4: all miss
    assert beyond - within == pytest.approx((N - 2) * LOAD_S / N, abs=1e-3)
