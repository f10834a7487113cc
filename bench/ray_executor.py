"""Hop cost of the Ray executor against the local one, at the executor level.

A chain of 10 no-op model steps (the ``noop`` adapter), each taking the previous step's output
as its input (an ``InputRef``), submitted one step after the other's completion, one chain at a
time: wall time per hop (submit -> ``ItemCompleted``), median over the chains. Three figures:

* ``local_us_per_hop_p50``: LocalExecutor, every step on worker ``cpu:0``;
* ``ray_us_per_hop_p50``: RayExecutor, every step on the driver node's actor;
* ``ray_cross_node_us_per_hop_p50``: steps alternating between the actors of two nodes of a
  local ``ray.cluster_utils`` cluster (each input moves through the object store).

Not measured yet (the issue's other figures): ``local_served_per_s``/``ray_served_per_s`` at a
p99 SLO and their ratio; printed as null. Through the executor only (no driver or core).

    python bench/ray_executor.py [--chains 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from control.clock import perf_counter  # noqa: E402
from control.executor.host import ExecutorConfig, LocalExecutor  # noqa: E402
from control.executor.protocol import (  # noqa: E402
    Batch,
    BatchItem,
    DeviceInfo,
    GenParams,
    InputRef,
    ItemCompleted,
    ModelRef,
    StepKey,
)

HOPS = 10
NOOP = ModelRef("noop", "noop", "tool")


def chains(ex, replicas: list[str], n: int, tag: str) -> float:
    """Median us per hop over ``n`` chains (after 3 warm-up chains)."""
    per_hop = []
    for c in range(n + 3):
        run = f"{tag}{c}"
        started = perf_counter()
        for i in range(HOPS):
            inputs = {"x": 1} if i == 0 else {"x": InputRef(run, f"n{i - 1}", "x")}
            item = BatchItem(StepKey(run, f"n{i}"), f"{run}-{i}", inputs, GenParams())
            ex.submit(Batch(f"{run}-b{i}", replicas[i % len(replicas)], (item,)))
            while True:
                event = ex.poll(30.0)
                assert event is not None, "no completion"
                if isinstance(event, ItemCompleted):
                    assert event.result.ok, event.result
                    break
        if c >= 3:
            per_hop.append((perf_counter() - started) / HOPS * 1e6)
        ex.release_run(run)
    return statistics.median(per_hop)


def local_figure(n: int) -> float:
    ex = LocalExecutor(ExecutorConfig(use_cuda=False), [DeviceInfo("cpu:0", "cpu", 0, 1024, 0)])
    ex.start()
    try:
        assert ex.wait_ready(120)
        assert ex.load("noop", NOOP, "cpu:0").result(60).ok
        return chains(ex, ["noop"], n, "L")
    finally:
        ex.stop()


def ray_figures(n: int) -> tuple[float, float]:
    import ray
    from ray.cluster_utils import Cluster

    from control.executor.ray import RayExecutor, RayExecutorConfig

    store = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                      "object_store_memory": store, "include_dashboard": False})  # fmt: skip
    cluster.add_node(num_cpus=1, object_store_memory=store)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    ex = RayExecutor(RayExecutorConfig(cache_dir=tempfile.mkdtemp()))
    try:
        ex.start()
        assert ex.wait_ready(120)
        here, there = (d.device_id for d in ex.devices())
        assert ex.load("a", NOOP, here).result(60).ok
        assert ex.load("b", NOOP, there).result(60).ok
        return chains(ex, ["a"], n, "R"), chains(ex, ["a", "b"], n, "X")
    finally:
        ex.stop()
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=40)
    args = parser.parse_args()
    local = local_figure(args.chains)
    same, cross = ray_figures(args.chains)
    print(json.dumps({
        "hops": HOPS, "chains": args.chains,
        "local_us_per_hop_p50": round(local), "ray_us_per_hop_p50": round(same),
        "ray_cross_node_us_per_hop_p50": round(cross),
        "local_served_per_s": None, "ray_served_per_s": None, "ray_vs_local": None,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
