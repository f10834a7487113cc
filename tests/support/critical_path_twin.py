"""The live ``fork`` workflow (``critical_path_fleet``) as a twin scenario: the same shape on two
simulated devices, the shared model one step at a time, the deep model batching up to eight,
under bursty (Gamma, cv 3) arrivals from one tenant. Latency tables are round figures of the
same order as the tiny models' on a CPU (no measured source: a what-if, not a fidelity claim)."""

from __future__ import annotations

import dataclasses
from typing import Any

from sim.scenario import Scenario
from sim.scenario_io import scenario_from_dict
from tests.support.critical_path_fleet import DEEP, FORK, SHARED


def fork_scenario(step_order: str = "arrival", rate_rps: float = 5.0) -> Scenario:
    """The scenario with the core's ``step_order``; ``rate_rps`` the mean arrival rate."""
    dev = {"node_id": "n0", "kind": "cpu", "accelerator": "cpu", "memory_mib": 2048}
    raw: dict[str, Any] = {
        "name": "fork",
        "seeds": [0, 1, 2],
        "devices": [{"device_id": f"cpu-{i}", **dev} for i in range(2)],
        "models": [
            {
                "name": k.split(":")[0],
                "version": "1",
                "task": "generate",
                "memory_mib": 16,
                "max_batch_size": b,
                "max_batch_tokens": 8192,
            }
            for k, b in ((SHARED, 1), (DEEP, 8))
        ],  # fmt: skip
        "workflows": [{"workflow": "fork", **FORK}],
        "placement": [
            {"model_key": SHARED, "device_ids": ["cpu-0"]},
            {"model_key": DEEP, "device_ids": ["cpu-1"]},
        ],
        "tenants": [{"tenant_id": "agent", "weight": 1}],
        "latency": {
            "tables": [
                {
                    "model": k,
                    "accelerator": "cpu",
                    "rows": [[1, 64, 8000], [8, 64, 12000]],
                    "decode": [8000, 300],
                }
                for k in (SHARED, DEEP)
            ]
        },  # fmt: skip
        "core": {"step_order": step_order},
        "workload": {
            "trace": "synthetic",
            "synthetic": {
                "rate_rps": rate_rps,
                "duration_s": 60.0,
                "cv": 3.0,
                "input_tokens": 32,
                "output_tokens": 8,
            },
            "tenants": {"agent": 1},
            "workflows": {"fork": 1},
            "routes": {"route": {"go": 1}},
        },  # fmt: skip
    }
    return scenario_from_dict(raw)


def with_order(scenario: Scenario, step_order: str) -> Scenario:
    """``scenario`` with only the core's ``step_order`` replaced."""
    core = dataclasses.replace(scenario.core_config, step_order=step_order)
    return dataclasses.replace(scenario, core_config=core)
