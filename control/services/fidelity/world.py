"""The small world both sides of the fidelity check run: one CPU worker slot, one MiniLM
replica, an embed-only workflow, and the shipped Azure code trace slice scaled to this machine.

Pure helpers (no I/O beyond reading the shipped trace, no clock): the payload text of a given
token count, the twin's scenario, the slice's arrivals, the rate that offers a target load.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.dag.spec import dag_from_dict
from control.core.latency import LatencyModel, LatencyRow
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.core.types import ModelSpec
from control.executor.protocol import DeviceInfo, ModelRef
from control.services.fidelity.config import (
    DEVICE_ID,
    MODEL_KEY,
    TENANT,
    TRACE,
    WORKFLOW,
    FidelityConfig,
)
from sim.driver import Arrival
from sim.executor import SimExecutorConfig
from sim.scenario import LatencyTables, PlacedReplica, Scenario, Workload
from sim.workload import arrivals

#: Words that MiniLM's tokenizer reads as one token each (a text of n words is n + 2 tokens).
_WORDS = (
    "the model reads short words and writes a vector for each query so that search can find "
    "the closest text in the index"
).split()


def text_of(tokens: int) -> str:
    """A payload text MiniLM tokenizes into exactly ``tokens`` tokens ([CLS] and [SEP] incl.)."""
    n = max(1, tokens - 2)
    return " ".join(_WORDS[i % len(_WORDS)] for i in range(n))


def model_ref(cfg: FidelityConfig) -> ModelRef:
    path = "bert" if cfg.model_source == "tiny" else None
    return ModelRef(MODEL_KEY, "embed", cfg.model_source, path)


def device_info(cfg: FidelityConfig) -> DeviceInfo:
    return DeviceInfo(DEVICE_ID, "cpu", 0, 2048, cfg.worker_core)


def fidelity_scenario(
    cfg: FidelityConfig, rows: tuple[LatencyRow, ...], rate_factor: float | None = None
) -> Scenario:
    """The twin's scenario: one CPU slot, one embedding replica, the Azure code slice at
    ``rate_factor`` (else the config's, else 1.0)."""
    from control.runtime.local_fleet import device_specs

    workflow = {
        "workflow": WORKFLOW, "inputs": {"text": "text"}, "outputs": {"vector": "embed.embedding"},
        "nodes": [{"id": "embed", "task": "embed", "model": MODEL_KEY}],
        "edges": [{"from": "input.text", "to": "embed.text"}],
    }  # fmt: skip
    rate = rate_factor or cfg.rate_factor or 1.0
    return Scenario(
        name="fidelity",
        devices=device_specs([device_info(cfg)]),
        models=(ModelSpec("minilm-embed", "1", "embed", 512, max_batch_size=cfg.max_batch_size),),
        workflows=(dag_from_dict(workflow),),
        placement=(PlacedReplica(MODEL_KEY, (DEVICE_ID,)),),
        workload=Workload(
            source=TRACE,
            rate_factor=rate,
            max_requests=cfg.max_requests,
            tenants={TENANT: 1},
            workflows={WORKFLOW: 1},
        ),  # fmt: skip
        tenancy=TenancyConfig(tenants=(TenantSpec(TENANT, 1),)),
        latency=LatencyTables(rows, sources=("measured in the serving worker on this machine",)),
        core_config=CoreConfig(
            batching_config=SizeDelayConfig(max_queue_delay_s=cfg.max_queue_delay_s)
        ),
        executor=SimExecutorConfig(prefix_cache=False, transfers=False),
        seeds=(cfg.seed,),
    )


def slice_arrivals(scenario: Scenario, cfg: FidelityConfig) -> list[Arrival]:
    """The scenario's arrivals with prompt lengths scaled into the model's range and idle gaps
    longer than ``max_gap_s`` shortened to it (the system is empty by then at these rates, so
    a shorter wait changes no latency, only the wall time of the check)."""
    out: list[Arrival] = []
    shift, last = 0.0, 0.0
    for a in arrivals(scenario, cfg.seed):
        shift += max(0.0, a.at - last - cfg.max_gap_s)
        last = a.at
        tokens = a.request.prompt_tokens // cfg.token_divisor
        tokens = min(cfg.max_tokens, max(cfg.min_tokens, tokens))
        out.append(Arrival(a.at - shift, replace(a.request, prompt_tokens=tokens, deadline=None)))
    return out


def offered_load(reqs: list[Arrival], latency: LatencyModel) -> float:
    """Device time the slice asks for at batch size 1, over its span (1.0 = saturated)."""
    if len(reqs) < 2:
        return 0.0
    busy_us = sum(latency.forward_us(MODEL_KEY, "cpu", 1, a.request.prompt_tokens) for a in reqs)
    span = reqs[-1].at - reqs[0].at
    return busy_us / 1e6 / span if span > 0 else float("inf")


def rate_for_load(cfg: FidelityConfig, rows: tuple[LatencyRow, ...]) -> float:
    """The time scaling whose slice offers ``cfg.target_utilization`` of the worker under the
    measured table ``rows``, raised where needed so that the slice spans at most
    ``cfg.max_slice_s`` (a slow machine then gets a higher load rather than a longer check)."""
    latency = LatencyTables(rows).model()

    def at(rate: float) -> list[Arrival]:
        return slice_arrivals(fidelity_scenario(cfg, rows, rate), cfg)

    by_load = _bisect(lambda r: offered_load(at(r), latency) < cfg.target_utilization)
    by_span = _bisect(lambda r: _span(at(r)) > cfg.max_slice_s)
    return round(max(by_load, by_span), 4)


def _span(reqs: list[Arrival]) -> float:
    return reqs[-1].at - reqs[0].at if reqs else 0.0


def _bisect(below: Callable[[float], bool]) -> float:
    """The largest rate in [0.01, 100] (log scale, 30 halvings) where ``below`` still holds,
    for a ``below`` that holds up to some rate and not beyond."""
    lo, hi = 0.01, 100.0
    for _ in range(30):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if below(mid) else (lo, mid)
    return lo


@contextmanager
def pinned(cores: set[int]) -> Iterator[None]:
    """Run the block on ``cores`` only (where the OS allows it), then restore the mask."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, (cores & before) or before)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
