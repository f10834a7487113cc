"""Benchmark of the twin: simulated requests per second of wall time.

A 3-node RAG workflow (embed -> vector search -> 70B LLM) on a 16-device fleet (two nodes of 8
x H100-80GB: 2 embedding replicas, 6 Llama-70B replicas at tensor parallelism 2, 4 spare)
replays the whole shipped Azure code-trace slice (1,200 requests) at 20x its rate, through the
real core (``build_core``), the SimPy driver and the simulated executor with the Splitwise table.
Only the replay is timed (not reading the trace or building the core), best of ``REPEATS``.
Prints one JSON line: ``sim_requests_per_s`` (wall time), ``sim_requests_per_cpu_s`` (CPU time
of this process: steadier on a shared machine), ``events_per_s`` (inputs processed plus instants
stepped, per second), ``steps_per_s`` (core steps), the run's size and ``native_core``: whether
the compiled core ran (``make native``; ``LEGATO_NATIVE=0`` runs the Python sources).
When the compiled core ran, the same replay on the Python sources is measured in a child
process and printed beside it (``python_sim_requests_per_s``, ``python_sim_requests_per_cpu_s``;
``--this-build-only`` skips it).

    python bench/twin_speed.py [--this-build-only]
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control import native  # noqa: E402

native.install()  # before the core is imported: the compiled core when a build is current

from control.clock import perf_counter, process_time  # noqa: E402
from sim.runner import SeedRun, prepare_seed, run_seed  # noqa: E402
from sim.scenario import Scenario  # noqa: E402
from sim.scenario_io import scenario_from_dict  # noqa: E402

RATE_FACTOR = 20.0
#: Replays timed; the best is reported (the machine is shared: the best is the least disturbed).
REPEATS = 5


def scenario() -> dict:
    devices = [
        {"device_id": f"gpu-{n}-{i}", "node_id": f"gpu-{n}", "kind": "gpu", "accelerator": "H100-80GB",
         "memory_mib": 81559, "interconnect_group": f"nvlink-{n}"}
        for n in "ab" for i in range(8)
    ]  # fmt: skip
    llm = [(f"gpu-{n}-{i}", f"gpu-{n}-{i + 1}") for n in "ab" for i in (2, 4, 6)]
    placement = [{"model_key": "embed:1", "device_ids": [f"gpu-{n}-0"]} for n in "ab"] + [
        {"model_key": "llama-70b:1", "device_ids": list(g)} for g in llm
    ]
    enc = [
        [1, 64, 1200],
        [8, 64, 1500],
        [32, 64, 2500],
        [1, 512, 1800],
        [8, 512, 4000],
        [32, 512, 12000],
    ]
    return {
        "name": "twin-speed",
        "devices": devices,
        "models": [
            {
                "name": "embed",
                "version": "1",
                "task": "embed",
                "memory_mib": 1024,
                "max_batch_size": 32,
            },
            {
                "name": "rerank",
                "version": "1",
                "task": "rerank",
                "memory_mib": 1024,
                "max_batch_size": 32,
                "max_batch_tokens": 32768,
            },
            {
                "name": "llama-70b",
                "version": "1",
                "task": "generate",
                "memory_mib": 70000,
                "max_batch_size": 16,
                "max_batch_tokens": 65536,
                "tp_degree": 2,
            },
        ],  # fmt: skip
        "workflows": [
            {
                "workflow": "rag3",
                "inputs": {"query": "text"},
                "outputs": {"answer": "answer.text"},
                "nodes": [
                    {
                        "id": "embed",
                        "task": "embed",
                        "model": "embed:1",
                        "params": {"input_tokens": 48},
                    },
                    {
                        "id": "search",
                        "tool": "vector_search",
                        "params": {"index": "docs", "top_k": 5},
                    },
                    {"id": "answer", "task": "generate", "model": "llama-70b:1"},
                ],
                "edges": [
                    {"from": "input.query", "to": "embed.text"},
                    {"from": "embed.embedding", "to": "search.embedding"},
                    {"from": "search.documents", "to": "answer.context"},
                    {"from": "input.query", "to": "answer.prompt"},
                ],
            }
        ],  # fmt: skip
        "placement": placement,
        "tenants": [
            {"tenant_id": t, "weight": w} for t, w in (("acme", 3), ("globex", 2), ("initech", 1))
        ],
        "latency": {
            "published": [
                {
                    "table": "splitwise",
                    "model": "llama2-70b",
                    "hardware": "h100-80gb",
                    "tp": 2,
                    "as_model": "llama-70b:1",
                    "as_accelerator": "H100-80GB",
                }
            ],  # fmt: skip
            "tables": [
                {"model": m, "accelerator": "H100-80GB", "rows": enc}
                for m in ("embed:1", "rerank:1")
            ],
        },
        "workload": {
            "trace": "azure",
            "source": "azure_code",
            "rate_factor": RATE_FACTOR,
            "max_requests": None,
            "max_input_tokens": 4096,
            "tenants": {"acme": 3, "globex": 2, "initech": 1},
            "workflows": {"rag3": 1},
        },  # fmt: skip
        "seeds": [0],
    }


def _replay_once(sc: Scenario) -> tuple[float, float, SeedRun]:
    """Build one seed's world (untimed), then time its replay: (wall s, CPU s, the run).
    ``PreparedSeed.replay`` runs under ``sim.env.tuned_gc`` (the world frozen out of the
    collector, rarer young collections), as every twin run does."""
    prepared = prepare_seed(sc, 0, samples=0)
    gc.collect()  # a clean start for each timed replay (replay itself freezes and tunes)
    w0, c0 = perf_counter(), process_time()
    run = prepared.replay()
    return perf_counter() - w0, process_time() - c0, run


def python_figures() -> dict[str, int]:
    """The replay's figures on the Python sources (a child process with ``LEGATO_NATIVE=0``)."""
    env = {**os.environ, "LEGATO_NATIVE": "0"}
    out = subprocess.run(
        [sys.executable, __file__, "--this-build-only"],
        env=env, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    child = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "python_sim_requests_per_s": child["sim_requests_per_s"],
        "python_sim_requests_per_cpu_s": child["sim_requests_per_cpu_s"],
    }


def main(this_build_only: bool = False) -> None:
    sc = scenario_from_dict(scenario())
    run_seed(sc, 0, samples=0)  # warm-up: imports, latency caches
    tries = [_replay_once(sc) for _ in range(REPEATS)]
    wall = min(t[0] for t in tries)
    cpu = min(t[1] for t in tries)
    run = tries[0][2]
    d = run.driver
    print(
        json.dumps(
            {
                "sim_requests_per_s": round(run.num_requests / wall),
                "sim_requests_per_cpu_s": round(run.num_requests / cpu),
                "events_per_s": round(d.events / wall),
                "steps_per_s": round(d.steps / wall),
                "requests": run.num_requests,
                "events": d.events,
                "core_steps": d.steps,
                "simulated_s": round(d.env.now, 3),
                "wall_s": round(wall, 4),
                "cpu_s": round(cpu, 4),
                "best_of": REPEATS,
                "devices": len(sc.devices),
                "rate_factor": RATE_FACTOR,
                "goal_sim_requests_per_s": 10_000,
                "native_core": native.active(),
                **(python_figures() if native.active() and not this_build_only else {}),
            }
        )
    )


if __name__ == "__main__":
    main(this_build_only="--this-build-only" in sys.argv[1:])
