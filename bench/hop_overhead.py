"""Per-hop overhead of the live driver: a 10-node chain of no-op steps, minus their own time.

Two chains run through the real ``LiveRuntime`` (driver + core + actuator + executor):

* ``tools``: ten ``router`` tool steps with no rules (a pass-through: the core's no-op tool),
  dispatched "on the host" exactly as the core asks. This is the figure the goal is about.
* ``workers``: ten model steps backed by the executor's ``noop`` adapter, so every hop also
  crosses the process boundary to a worker and back (pipe, the executor reading it on the loop).

Per run: wall time from ``submit_run`` to the result, minus the steps' measured own time
(``device_us`` of the usage records), divided by the ten hops. Runs go one at a time (no
queueing), after a warm-up. Prints one JSON object.

    python bench/hop_overhead.py [--runs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control import native  # noqa: E402

native.install()  # before the core is imported: the compiled core when a build is current

from control.clock import perf_counter  # noqa: E402
from control.core.assembly import CoreBlueprint  # noqa: E402
from control.core.batching.size_delay import SizeDelayConfig  # noqa: E402
from control.core.context import CoreConfig  # noqa: E402
from control.core.dag.spec import dag_from_dict  # noqa: E402
from control.core.latency import TableLatencyModel  # noqa: E402
from control.core.types import ModelSpec, Request  # noqa: E402
from control.executor.host import ExecutorConfig, LocalExecutor  # noqa: E402
from control.executor.protocol import DeviceInfo, ModelRef  # noqa: E402
from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig  # noqa: E402
from control.runtime.local_fleet import device_specs  # noqa: E402
from control.runtime.types import RunRequest  # noqa: E402

HOPS = 10
GOAL_P50_US = 300


def tool_chain() -> dict:
    nodes = [{"id": f"n{i}", "tool": "router", "params": {"default": "go"}} for i in range(HOPS)]
    edges = [{"from": "input.text", "to": "n0.value"}]
    edges += [{"from": f"n{i - 1}.value", "to": f"n{i}.value"} for i in range(1, HOPS)]
    return {"workflow": "tools", "inputs": {"text": "text"}, "nodes": nodes, "edges": edges,
            "outputs": {"out": f"n{HOPS - 1}.value"}}  # fmt: skip


def worker_chain() -> dict:
    # "rerank" ports (query, documents -> documents) chain; the noop adapter echoes its inputs.
    nodes = [{"id": f"n{i}", "task": "rerank", "model": "noop:1"} for i in range(HOPS)]
    edges = [{"from": "input.docs", "to": "n0.documents"}]
    edges += [{"from": "input.text", "to": f"n{i}.query"} for i in range(HOPS)]
    edges += [{"from": f"n{i - 1}.documents", "to": f"n{i}.documents"} for i in range(1, HOPS)]
    return {"workflow": "workers", "inputs": {"text": "text", "docs": "documents"},
            "nodes": nodes, "edges": edges, "outputs": {"out": f"n{HOPS - 1}.documents"}}  # fmt: skip


def build() -> LiveRuntime:
    devices = [DeviceInfo("cpu:0", "cpu", 0, 1024, 0)]
    executor = LocalExecutor(ExecutorConfig(use_cuda=False, poll_queue=False), devices)
    blueprint = CoreBlueprint(
        devices=device_specs(devices),
        models=(ModelSpec("noop", "1", "rerank", 1, max_batch_size=1),),
        workflows=(dag_from_dict(tool_chain()), dag_from_dict(worker_chain())),
        core_config=CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=0.0)),
    )
    refs = {"noop:1": ModelRef("noop:1", "noop", "tool", options={"tick": False})}
    return LiveRuntime(blueprint, TableLatencyModel(), executor, refs,
                       (InitialReplica("noop:1", "cpu:0"),), RuntimeConfig(sample_every_s=60))  # fmt: skip


async def measure(rt: LiveRuntime, workflow: str, runs: int, warmup: int) -> list[float]:
    per_hop = []
    for i in range(warmup + runs):
        req = Request(f"{workflow}-{i}", "bench", workflow)
        payload = {"text": "hello", "docs": ["a", "b"]}
        started = perf_counter()
        result = await rt.submit_run(RunRequest(req, payload)).result()
        wall_us = (perf_counter() - started) * 1e6
        if result.status != "succeeded":
            raise RuntimeError(f"{workflow} run failed: {result}")
        own_us = sum(u.device_us for u in result.usage)
        if i >= warmup:
            per_hop.append((wall_us - own_us) / HOPS)
    return per_hop


def pct(values: list[float], q: float) -> int:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


async def main(runs: int) -> dict:
    rt = build()
    await rt.start()
    try:
        tools = await measure(rt, "tools", runs, warmup=30)
        workers = await measure(rt, "workers", runs, warmup=30)
    finally:
        await rt.stop()
    return {
        "benchmark": "hop_overhead",
        "hops_per_run": HOPS,
        "runs": runs,
        "us_per_hop_p50": pct(tools, 0.5),
        "us_per_hop_p99": pct(tools, 0.99),
        "us_per_hop_mean": round(statistics.fmean(tools)),
        "goal_p50_us": GOAL_P50_US,
        "goal_met": pct(tools, 0.5) <= GOAL_P50_US,
        "worker_us_per_hop_p50": pct(workers, 0.5),
        "worker_us_per_hop_p99": pct(workers, 0.99),
        "note": "us_per_hop_*: no-op tool steps (router pass-through) run on the host as the "
        "core dispatches them; worker_us_per_hop_*: no-op model steps through a worker "
        "process (pipe round trip included)",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.runs))))
