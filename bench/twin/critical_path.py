"""Critical-path step order against today's order, in the twin and live.

Twin: ``sim/scenarios/agent_dag.yaml`` as shipped (its three seeds), once with the core's
``step_order`` as today ("arrival") and once with ``"critical_path"`` (only that field is
overridden, in code); end-to-end latency of every succeeded run, pooled over the seeds. Also
the same workload without its per-run deadlines (``..._no_deadline``): with deadlines, today's
order is already earliest-deadline-first on the run's deadline, so only the work ahead of each
step is new; without them, today's order is the step's ready time. And the live benchmark's
``fork`` workflow in the twin (``tests/support/critical_path_twin``: ``..._fork_twin``).

Live: ``bench/twin/critical_path_live.py`` (real gateway, real worker processes, tiny models).

Prints one JSON object: ``critical_path_gain`` (agent p99 today / with critical-path order,
twin), ``critical_path_gain_live`` and the p50/p99 behind them.

    python bench/twin/critical_path.py [--twin-only]
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from control import native  # noqa: E402

native.install()

from control.services.loadgen import percentile  # noqa: E402
from sim.runner import run_seed  # noqa: E402
from sim.scenario import Scenario  # noqa: E402
from sim.scenario_io import load_scenario  # noqa: E402
from tests.support.critical_path_twin import fork_scenario, with_order  # noqa: E402

AGENT = ROOT / "sim" / "scenarios" / "agent_dag.yaml"
ORDERS = ("arrival", "critical_path")


def latencies(scenario: Scenario, order: str) -> list[float]:
    """End-to-end seconds of every succeeded run over the scenario's seeds, under ``order``."""
    world = with_order(scenario, order)
    out: list[float] = []
    for seed in scenario.seeds:
        for r in run_seed(world, seed, samples=0).recorder.requests.values():
            if r.status == "succeeded" and r.end is not None:
                out.append(r.end - r.arrival)
    return out


def compare(scenario: Scenario) -> dict[str, float]:
    """p50/p99 (ms) under each order and the p99 gain (today / critical path)."""
    row: dict[str, float] = {}
    for order in ORDERS:
        lat = latencies(scenario, order)
        row[f"p50_ms_{order}"] = round(1000 * (percentile(lat, 0.5) or 0.0), 1)
        row[f"p99_ms_{order}"] = round(1000 * (percentile(lat, 0.99) or 0.0), 1)
        row[f"succeeded_{order}"] = len(lat)
    row["gain"] = round(row["p99_ms_arrival"] / max(row["p99_ms_critical_path"], 1e-9), 3)
    return row


def without_deadlines(scenario: Scenario) -> Scenario:
    workload = dataclasses.replace(scenario.workload, deadline_s={})
    return dataclasses.replace(scenario, workload=workload)


def measure_twin() -> dict:
    scenario = load_scenario(AGENT)
    twin = compare(scenario)
    bare = compare(without_deadlines(scenario))
    out = {"critical_path_gain": twin.pop("gain")}
    out.update({f"twin_{k}": v for k, v in twin.items()})
    out["critical_path_gain_no_deadline"] = bare.pop("gain")
    out.update({f"twin_no_deadline_{k}": v for k, v in bare.items()})
    fork = compare(fork_scenario())
    out["critical_path_gain_fork_twin"] = fork.pop("gain")
    out.update({f"twin_fork_{k}": v for k, v in fork.items()})
    return out


def measure(live: bool = True) -> dict:
    out = measure_twin()
    if live:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from critical_path_live import measure_live  # noqa: PLC0415

        out.update(measure_live())
    return out


if __name__ == "__main__":
    print(json.dumps(measure(live="--twin-only" not in sys.argv)))
