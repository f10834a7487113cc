"""The live side of the whole-DAG fidelity check: the real runtime, executor and workers.

``run_dag_live`` starts a ``LiveRuntime`` over the real multi-process executor (two CPU worker
slots, ``dag_world``), then in order:

1. **calibration**: bursts of 1, 2, 4 whole workflow runs submitted at one instant (so each
   stage forms batches of those sizes), short and long queries, each burst run alone. The
   stages' spans (how long each batch held its replica, its size, the query tokens) become the twin's
   tables (``dag_tables``), measured in the very workers that serve;
2. **the trace**, once per load: the slice open-loop at its (time-scaled) arrivals, the rate
   chosen from the first calibration for the asked load, each replay followed by another
   calibration block. Each run's end-to-end time and every stage's span are kept.

A load's twin tables pool the two blocks around its replay (``calibrations[k]`` and
``[k + 1]``): on a shared machine the workers' speed moves by tens of percent over minutes,
and the blocks that bracket a replay describe it better than one block before everything.

A stage's time is its span's ``end_ms - ready_ms``: from the instant its inputs were all there
to its result (queueing, batching delay, device time and the process hops).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from control import clock
from control.services.fidelity.dag_world import (
    GENERATE,
    INDEX,
    TENANT,
    DagFidelityConfig,
    devices,
    documents,
    index_embed,
    model_refs,
    model_specs,
    placement,
    query,
    workflow_spec,
)
from sim.driver import Arrival


@dataclass(frozen=True)
class RunSeen:
    """One live run: its end-to-end seconds, its spans (node -> span dict, last attempt) and
    its generate steps' output tokens (node -> tokens)."""

    e2e_s: float
    spans: dict[str, dict[str, Any]]
    output_tokens: dict[str, int]
    input_tokens: dict[str, int]
    prompt_tokens: int = 0  # the query tokens it was sent with


def _runtime(cfg: DagFidelityConfig):  # noqa: ANN202
    from control.core.assembly import CoreBlueprint
    from control.core.batching.size_delay import SizeDelayConfig
    from control.core.context import CoreConfig
    from control.core.dag.spec import dag_from_dict
    from control.core.latency import TableLatencyModel
    from control.core.tenancy.base import TenancyConfig, TenantSpec
    from control.executor.host import ExecutorConfig, LocalExecutor
    from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig
    from control.runtime.local_fleet import device_specs
    from control.runtime.state import IndexSpec

    devs = devices()
    executor = LocalExecutor(ExecutorConfig(cache_dir=cfg.cache_dir, use_cuda=False,
                                            poll_queue=False, heartbeat_s=2.0), devs)  # fmt: skip
    blueprint = CoreBlueprint(
        devices=device_specs(devs), models=model_specs(cfg),
        workflows=(dag_from_dict(workflow_spec(cfg)),),
        tenancy=TenancyConfig(tenants=(TenantSpec(TENANT, 1),)),
        core_config=CoreConfig(batching_config=SizeDelayConfig(
            max_queue_delay_s=cfg.max_queue_delay_s)),
    )  # fmt: skip
    config = RuntimeConfig(indexes=(IndexSpec(INDEX, documents(), index_embed(cfg)),),
                           stream_tokens=False)  # fmt: skip
    replicas = tuple(InitialReplica(k, d) for k, d in placement().items())
    return LiveRuntime(blueprint, TableLatencyModel(), executor, model_refs(cfg), replicas, config)


async def _one(rt, request, at: float | None = None) -> tuple[str, RunSeen | None, float]:  # noqa: ANN001
    """Submit ``request`` at monotonic ``at`` (now if None): (id, what was seen, sent at)."""
    from control.runtime.types import RunRequest

    if at is not None:
        await asyncio.sleep(max(0.0, at - clock.monotonic()))
    start = clock.monotonic()
    text = query(request.prompt_tokens, hash(request.request_id) % 7)
    result = await rt.submit_run(RunRequest(request, {"query": text})).result()
    e2e = clock.monotonic() - start
    if not result.ok or not result.timeline:
        return request.request_id, None, start
    spans = {s["node"]: s for s in result.timeline["spans"] if s.get("ok")}
    outs = {u.node_id: u.output_tokens for u in result.usage if u.model == GENERATE}
    ins = {u.node_id: u.input_tokens for u in result.usage}
    return request.request_id, RunSeen(e2e, spans, outs, ins, request.prompt_tokens), start


async def _calibrate(rt, cfg: DagFidelityConfig, template, warm: bool = True) -> list[RunSeen]:  # noqa: ANN001
    """One calibration block (the runs of its timed sweeps); ``warm``: an untimed sweep
    first, which warms every shape up (later blocks follow a replay that did)."""
    seen: list[RunSeen] = []
    n = 0
    for rep in range(0 if warm else 1, cfg.calibration_repeats + 1):
        for tokens in (cfg.min_tokens, cfg.max_tokens):
            for size in cfg.calibration_sizes:
                tag = f"cal{id(seen)}-{n}"  # unique per block
                reqs = [replace(template, request_id=f"{tag}-{i}", prompt_tokens=tokens)
                        for i in range(size)]  # fmt: skip
                n += 1
                done = await asyncio.gather(*(_one(rt, r) for r in reqs))
                if rep:
                    seen.extend(s for _, s, _ in done if s is not None)
    return seen


async def _replay(rt, slice_: list[Arrival]) -> tuple[list[Arrival], dict[str, RunSeen]]:  # noqa: ANN001
    t0 = clock.monotonic() + 0.2
    done = await asyncio.gather(*(_one(rt, a.request, t0 + a.at) for a in slice_))
    # the twin replays the arrivals as really sent (a busy event loop wakes a sender late)
    sent = sorted((Arrival(at - t0, a.request) for a, (_, _, at) in zip(slice_, done, strict=True)),
                  key=lambda a: a.at)  # fmt: skip
    return sent, {rid: s for rid, s, _ in done if s is not None}


async def _session(cfg: DagFidelityConfig, plan) -> dict[str, Any]:  # noqa: ANN001
    """``plan.slices(first calibration) -> [(load, arrivals)]``: what to replay (see the module
    docstring); returns every calibration block and every replay."""
    rt = _runtime(cfg)
    try:
        await rt.start()
        template = plan.template
        calibrations = [await _calibrate(rt, cfg, template)]
        played = []
        for load, slice_ in plan.slices(calibrations[0]):
            played.append((load, *await _replay(rt, slice_)))
            calibrations.append(await _calibrate(rt, cfg, template, warm=False))
    finally:
        await rt.stop()
    return {"calibrations": calibrations, "played": played}


def run_dag_live(cfg: DagFidelityConfig, plan) -> dict[str, Any]:  # noqa: ANN001
    """One live session (see the module docstring)."""
    return asyncio.run(_session(cfg, plan))
