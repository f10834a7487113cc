"""Fidelity of the twin: one trace slice through the live stack and through the twin.

``validate_fidelity`` (called by ``legato sim validate``) does, in this order:

1. **Profile.** Measures the embedding model's latency table on this machine with the
   executor's profiler (``control/executor/profile.py``), in this process pinned to the
   worker's core with one torch thread, exactly as ``legato profile`` does.
2. **Live.** Starts a ``LiveRuntime`` over the real multi-process executor (one CPU worker slot,
   the same ``build_core`` wiring as the twin, the measured table as its latency model). A few
   isolated requests first measure the serving stack's own time per model batch (driver hops,
   IPC to the worker, result decoding) as the median of ``end-to-end - device time`` reported
   by the executor; this is the only figure the twin takes from the live run, and it is taken
   before the slice, from different requests. Then the slice replays open-loop: each request is
   submitted at its (time-scaled) trace arrival and its end-to-end latency is measured.
3. **Twin.** Replays the very same request list through ``sim.runner.run_seed`` with the
   measured table and the measured per-batch overhead (batching, queueing and routing are the
   core's own decisions in both).
4. **Compare.** ``p50_error`` / ``p99_error``: relative error of the twin's percentile against
   the live one; ``slo_attainment_error_pp``: twin minus live SLO attainment in percentage
   points, the SLO being ``slo_s`` end to end (fixed in the config, never fitted to a run).

The trace is the shipped Azure code slice; prompt lengths are scaled by ``token_divisor`` and
clamped to what the embedding model reads (MiniLM truncates at 256 tokens), so the slice keeps
its mix of short and long requests at a size this 2-core machine serves in real time.
"""

from __future__ import annotations

import asyncio
import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.dag.spec import dag_from_dict
from control.core.latency import LatencyRow
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.core.types import ModelSpec
from control.executor.base import DeviceInfo, ModelRef
from control.runtime import clock
from sim.driver import Arrival
from sim.executor import SimExecutorConfig
from sim.runner import run_seed
from sim.scenario import LatencyTables, PlacedReplica, Scenario, Workload
from sim.stats import percentile
from sim.workload import arrivals

MODEL_KEY = "minilm-embed:1"
DEVICE_ID = "cpu:0"
TENANT = "fidelity"
WORKFLOW = "embed-only"
#: Words that MiniLM's tokenizer reads as one token each (a text of n words is n + 2 tokens).
_WORDS = (
    "the model reads short words and writes a vector for each query so that search can find "
    "the closest text in the index"
).split()


@dataclass(frozen=True)
class FidelityConfig:
    rate_factor: float = field(default=1.5, metadata={"help": "trace time scaling (x faster)"})
    max_gap_s: float = field(
        default=1.0, metadata={"help": "idle gaps of the trace longer than this are shortened"}
    )
    max_requests: int = field(default=120, metadata={"help": "requests of the slice"})
    token_divisor: int = field(default=16, metadata={"help": "trace prompt tokens per token"})
    min_tokens: int = field(default=8, metadata={"help": "shortest prompt sent"})
    max_tokens: int = field(default=128, metadata={"help": "longest prompt sent"})
    slo_s: float = field(default=0.1, metadata={"help": "end-to-end SLO of a request"})
    max_batch_size: int = field(default=8, metadata={"help": "the model's max batch size"})
    max_queue_delay_s: float = field(default=0.005, metadata={"help": "batching delay"})
    profile_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    profile_tokens: tuple[int, ...] = (8, 32, 64, 128)
    profile_repeats: int = field(default=5, metadata={"help": "timed runs per profile point"})
    calibration_requests: int = field(default=16, metadata={"help": "isolated requests"})
    model_source: str = field(default="minilm", metadata={"help": "minilm, or tiny (tests)"})
    cache_dir: str = field(default="var/models", metadata={"help": "model cache folder"})
    worker_core: int = field(default=0, metadata={"help": "CPU core of the worker slot"})
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_requests < 2:
            raise ValueError(f"FidelityConfig.max_requests={self.max_requests}: must be >= 2")
        if not 2 < self.min_tokens <= self.max_tokens <= 256:
            raise ValueError(
                f"FidelityConfig.min_tokens={self.min_tokens}, max_tokens={self.max_tokens}: "
                "need 2 < min_tokens <= max_tokens <= 256"
            )


@dataclass(frozen=True)
class Side:
    """Latency figures of one side (live or twin) over the slice."""

    p50_s: float
    p99_s: float
    slo_attainment: float
    succeeded: int


@dataclass(frozen=True)
class FidelityResult:
    p50_error: float
    p99_error: float
    slo_attainment_error_pp: float
    live: Side
    twin: Side
    requests: int
    overhead_us: int
    profile_rows: int
    goal_met: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----- the world both sides run
def text_of(tokens: int) -> str:
    """A payload text MiniLM tokenizes into exactly ``tokens`` tokens ([CLS] and [SEP] incl.)."""
    n = max(1, tokens - 2)
    return " ".join(_WORDS[i % len(_WORDS)] for i in range(n))


def _ref(cfg: FidelityConfig) -> ModelRef:
    path = "bert" if cfg.model_source == "tiny" else None
    return ModelRef(MODEL_KEY, "embed", cfg.model_source, path)


def fidelity_scenario(cfg: FidelityConfig, rows: tuple[LatencyRow, ...]) -> Scenario:
    """The twin's scenario: one CPU slot, one embedding replica, the Azure code slice."""
    from control.runtime.wiring import device_specs

    workflow = {
        "workflow": WORKFLOW, "inputs": {"text": "text"}, "outputs": {"vector": "embed.embedding"},
        "nodes": [{"id": "embed", "task": "embed", "model": MODEL_KEY}],
        "edges": [{"from": "input.text", "to": "embed.text"}],
    }  # fmt: skip
    return Scenario(
        name="fidelity",
        devices=device_specs([_device(cfg)]),
        models=(ModelSpec("minilm-embed", "1", "embed", 512, max_batch_size=cfg.max_batch_size),),
        workflows=(dag_from_dict(workflow),),
        placement=(PlacedReplica(MODEL_KEY, (DEVICE_ID,)),),
        workload=Workload(
            rate_factor=cfg.rate_factor,
            max_requests=cfg.max_requests,
            tenants={TENANT: 1},
            workflows={WORKFLOW: 1},
        ),  # fmt: skip
        tenancy=TenancyConfig(tenants=(TenantSpec(TENANT, 1),)),
        latency=LatencyTables(rows, sources=("measured on this machine by the profiler",)),
        core_config=CoreConfig(
            batching_config=SizeDelayConfig(max_queue_delay_s=cfg.max_queue_delay_s)
        ),
        executor=SimExecutorConfig(prefix_cache=False, transfers=False),
        seeds=(cfg.seed,),
    )


def _device(cfg: FidelityConfig) -> DeviceInfo:
    return DeviceInfo(DEVICE_ID, "cpu", 0, 2048, cfg.worker_core)


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


@contextmanager
def _pinned(cores: set[int]) -> Iterator[None]:
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


# ----- step 1: profile
def measure_profile(cfg: FidelityConfig) -> tuple[LatencyRow, ...]:
    """The model's forward table on this machine, as core latency rows (device type cpu)."""
    import torch

    from control.executor.profile import profile_model

    torch.set_num_threads(1)
    with _pinned({cfg.worker_core}):
        rows = profile_model(
            _ref(cfg), "cpu", cfg.profile_batch_sizes, cfg.profile_tokens,
            repeats=cfg.profile_repeats, cache_dir=Path(cfg.cache_dir),
        )  # fmt: skip
    return tuple(
        LatencyRow(MODEL_KEY, "cpu", r.batch_size, r.input_tokens, r.latency_us) for r in rows
    )


def merge_profiles(a: tuple[LatencyRow, ...], b: tuple[LatencyRow, ...]) -> tuple[LatencyRow, ...]:
    """Per (batch, tokens) point the mean of two tables; points only one has are kept."""
    points: dict[tuple[int, int], list[int]] = {}
    for r in (*a, *b):
        points.setdefault((r.batch_size, r.tokens), []).append(r.latency_us)
    return tuple(
        LatencyRow(MODEL_KEY, "cpu", bs, tok, round(sum(us) / len(us)))
        for (bs, tok), us in sorted(points.items())
    )


# ----- step 2: the live stack
@dataclass
class _LiveOutcome:
    overhead_us: int
    e2e_s: dict[str, float]  # request id -> seconds (succeeded requests only)


def _runtime(cfg: FidelityConfig, scenario: Scenario):  # noqa: ANN202
    from control.executor.local import ExecutorConfig, LocalExecutor
    from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig

    executor = LocalExecutor(
        ExecutorConfig(cache_dir=cfg.cache_dir, use_cuda=False, poll_queue=False, heartbeat_s=2.0),
        [_device(cfg)],
    )

    return LiveRuntime(
        scenario.blueprint(cfg.seed), scenario.latency.model(), executor, {MODEL_KEY: _ref(cfg)},
        (InitialReplica(MODEL_KEY, DEVICE_ID),), RuntimeConfig(stream_tokens=False),
    )  # fmt: skip


async def _one(rt, request, at: float | None = None) -> tuple[str, float | None]:  # noqa: ANN001
    """Submit at monotonic time ``at`` (now if None); (request id, e2e seconds or None)."""
    from control.runtime.types import RunRequest

    if at is not None:
        await asyncio.sleep(max(0.0, at - clock.monotonic()))
    start = clock.monotonic()
    result = await rt.submit_run(
        RunRequest(request, {"text": text_of(request.prompt_tokens)})
    ).result()
    return request.request_id, (clock.monotonic() - start) if result.ok else None


async def _calibrate(rt, template, cfg: FidelityConfig, latency) -> int:  # noqa: ANN001
    """Median time the live stack adds to a batch beyond its profiled device time: isolated
    requests (never part of the slice) at the profiled lengths, e2e minus the table's
    prediction. It holds the driver hops, IPC to the worker and waking an idle worker."""
    extra = []
    for i in range(cfg.calibration_requests + 2):
        tokens = cfg.profile_tokens[i % len(cfg.profile_tokens)]
        req = replace(template, request_id=f"calibrate-{i}", prompt_tokens=tokens)
        _, e2e = await _one(rt, req)
        if e2e is not None and i >= 2:  # the first two warm the path up
            extra.append(e2e * 1e6 - latency.forward_us(MODEL_KEY, "cpu", 1, tokens))
        await asyncio.sleep(0.05)
    if not extra:
        raise RuntimeError("fidelity calibration: no isolated request succeeded")
    return max(0, round(statistics.median(extra)))


async def _live(cfg: FidelityConfig, scenario: Scenario, reqs: list[Arrival]) -> _LiveOutcome:
    rt = _runtime(cfg, scenario)
    await rt.start()
    try:
        overhead = await _calibrate(rt, reqs[0].request, cfg, scenario.latency.model())
        t0 = clock.monotonic() + 0.2
        done = await asyncio.gather(*(_one(rt, a.request, t0 + a.at) for a in reqs))
    finally:
        await rt.stop()
    return _LiveOutcome(overhead, {rid: s for rid, s in done if s is not None})


def run_live(cfg: FidelityConfig, scenario: Scenario, reqs: list[Arrival]) -> _LiveOutcome:
    """The slice through the live stack; the driver runs beside the worker's core."""
    others = set(range(os.cpu_count() or 1)) - {cfg.worker_core}
    with _pinned(others):
        return asyncio.run(_live(cfg, scenario, reqs))


# ----- step 3 and 4: the twin, and the comparison
def run_twin(scenario: Scenario, reqs: list[Arrival], overhead_us: int) -> dict[str, float]:
    """The same requests through the twin; request id -> e2e seconds of succeeded requests."""
    sc = replace(scenario, executor=replace(scenario.executor, dispatch_overhead_us=overhead_us))
    run = run_seed(sc, scenario.seeds[0], samples=0, requests=reqs)
    return {
        rid: r.end - r.arrival
        for rid, r in run.recorder.requests.items()
        if r.status == "succeeded" and r.end is not None
    }


def summarize(e2e: dict[str, float], total: int, slo_s: float) -> Side:
    """Percentiles over succeeded requests; SLO attainment over all ``total`` requests."""
    values = sorted(e2e.values())
    if not values:
        return Side(0.0, 0.0, 0.0, 0)
    met = sum(v <= slo_s for v in values)
    return Side(percentile(values, 50) or 0.0, percentile(values, 99) or 0.0, met / total,
                len(values))  # fmt: skip


def compare_sides(live: Side, twin: Side) -> tuple[float, float, float]:
    """(p50 relative error, p99 relative error, SLO attainment error in points: twin - live)."""

    def rel(t: float, x: float) -> float:
        return abs(t - x) / x if x > 0 else float("inf")

    return (rel(twin.p50_s, live.p50_s), rel(twin.p99_s, live.p99_s),
            (twin.slo_attainment - live.slo_attainment) * 100)  # fmt: skip


def validate_fidelity(config: FidelityConfig | None = None) -> dict[str, Any]:
    """Profile, run live, run the twin, compare (see the module docstring). Loads a real model
    and runs for roughly a minute; returns ``FidelityResult.to_dict()`` with rounded figures."""
    cfg = config or FidelityConfig()
    rows = measure_profile(cfg)
    scenario = fidelity_scenario(cfg, rows)
    reqs = slice_arrivals(scenario, cfg)
    live_out = run_live(cfg, scenario, reqs)
    # Other load on a shared machine drifts: profile again after the live run, and let the
    # twin wait out the mean of the two tables that bracket it.
    rows = merge_profiles(rows, measure_profile(cfg))
    twin_e2e = run_twin(
        replace(scenario, latency=LatencyTables(rows, sources=scenario.latency.sources)),
        reqs,
        live_out.overhead_us,
    )
    live = summarize(live_out.e2e_s, len(reqs), cfg.slo_s)
    twin = summarize(twin_e2e, len(reqs), cfg.slo_s)
    p50, p99, slo_pp = compare_sides(live, twin)
    result = FidelityResult(
        round(p50, 4), round(p99, 4), round(slo_pp, 2),
        Side(*(round(v, 5) for v in asdict(live).values())),  # type: ignore[arg-type]
        Side(*(round(v, 5) for v in asdict(twin).values())),  # type: ignore[arg-type]
        len(reqs), live_out.overhead_us, len(rows),
        p50 <= 0.10 and p99 <= 0.10 and abs(slo_pp) <= 2.0,
    )  # fmt: skip
    return result.to_dict()
