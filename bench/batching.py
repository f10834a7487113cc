"""Served throughput under an SLO vs the model's own ceiling, for MiniLM embed and SmolLM2
generate, through the live driver (driver + core + actuator + one executor worker).

Per model:
* ``ceiling_throughput``: items/s of the adapter called directly in this process (same core
  pin, one torch thread) at its best batch size, no serving stack (median of 5 runs), measured
  before AND after the served levels, the better of the two counting; ``batch1_throughput``
  the same at batch size 1.
* served: open-loop Poisson arrivals of one-step runs at increasing rates (fractions of the
  ceiling) for ``--seconds`` each. A load level's ``throughput`` is the rate it carried: runs
  completed divided by the arrival window (the goodput definition of DistServe: a level counts
  only when every run succeeded and p99 latency, submit -> result, is within the stated SLO;
  an overloaded level shows as growing latency, so the window must be several batch times
  long). The old figure divided by the window PLUS the drain after the last arrival, which
  charged every level its own latency once more and understated short windows badly.
  After the grid (``FRACTIONS``) two probes bisect between the best qualifying level and the
  next one up, so the figure is not capped by the grid's step.
  ``served_throughput`` is the best qualifying level; ``served_vs_ceiling`` the ratio. The
  SLO is stated per model (see ``SLO_BATCHES``): the larger of a fixed quiet-machine figure
  and three times one ceiling batch.
* instrumentation per level: batch sizes the core formed (mean, max) and per-batch device
  time (ms, median and slowest) measured by the worker, so a gap can be told apart: small
  batches (core batching) vs slow batches (executor) vs waiting between batches (driver); and
  the longest time no run ended (``max_completion_gap_ms``): a stall far longer than the
  slowest batch happened outside the device.
Every run's prompt is the same shared text plus a unique suffix, in the ceiling too, so both
see the same prefix-cache hits. The worker is pinned to the same core the ceiling was
measured on; the driver runs beside it. The 1-minute load average before and after is
reported: the machine is shared, and figures on a loaded machine are lower and noisier.
Prints one JSON object.   python bench/batching.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control.api.live import serving_core_config  # noqa: E402
from control.core.assembly import CoreBlueprint  # noqa: E402
from control.core.batching.size_delay import SizeDelayConfig  # noqa: E402
from control.core.dag.spec import dag_from_dict  # noqa: E402
from control.core.latency import LatencyRow, TableLatencyModel  # noqa: E402
from control.core.types import ModelSpec, Request  # noqa: E402
from control.executor.base import BatchItem, DeviceInfo, GenParams, ModelRef, StepKey  # noqa: E402
from control.executor.local import ExecutorConfig, LocalExecutor  # noqa: E402
from control.runtime.clock import monotonic, perf_counter  # noqa: E402
from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig  # noqa: E402
from control.runtime.types import RunRequest  # noqa: E402
from control.runtime.wiring import device_specs  # noqa: E402

CACHE = Path("var/models")
CORE = 0
TEXT = "Dynamic batching groups requests for one model until the batch is full or too old."
CASES = {
    "minilm_embed": dict(ref=ModelRef("minilm:1", "embed", "minilm"), task="embed",
                         field="text", sizes=(1, 8, 16, 32), quiet_slo_s=0.5,
                         delay_s=0.02, params={}),
    "smollm2_generate": dict(ref=ModelRef("smollm2:1", "generate", "smollm2"), task="generate",
                             field="prompt", sizes=(1, 4, 8, 16), quiet_slo_s=12.0,
                             delay_s=0.05, params={"max_tokens": 16, "stream": False}),
}  # fmt: skip
# The same SmolLM2 case with iteration-level batching (runs join the running decode loop), as an
# operator could set it per model. Reported beside the goal cases, not as one of them: on a CPU
# each join's prefill is a forward of its own that reads every weight again, so continuous
# batching loses throughput here (the demo seed keeps SmolLM2 static for that reason).
CASES["smollm2_generate_continuous"] = dict(CASES["smollm2_generate"], continuous=True)
GOAL_CASES = ("minilm_embed", "smollm2_generate")
# The stated SLO. A static replica serves one batch at a time, so a run waits for the batch in
# flight and then runs in the next: near the ceiling p99 is two to three times the time of one
# full batch. (In the ``_continuous`` case a run joins the running decode loop instead; the same
# rule is kept for it so the figures compare.) The SLO is therefore p99 <= SLO_BATCHES x the time
# of one ceiling batch as measured in this run, and never below ``quiet_slo_s`` (on a quiet core:
# 0.5 s for MiniLM, 12 s for 16 SmolLM2 tokens). On a shared, loaded machine a batch takes two or
# three times longer, and a fixed SLO would measure the neighbours, not the serving stack; the
# throughput within the fixed ``quiet_slo_s`` is reported beside it.
SLO_BATCHES = 3.0

FRACTIONS = (0.6, 0.75, 0.85, 0.95, 1.05)
#: Probes that bisect between the best qualifying grid level and the next one up (a coarse grid
#: under-reads the served throughput by up to its step: the highest rate within the SLO lies
#: somewhere between the last level that met it and the first that did not).
REFINE_PROBES = 2


def prompt(serial: int) -> str:
    """The shared text plus a unique number: the same shape (and token count, give or take
    one) in the ceiling and the served runs, so both do the same work per item."""
    return f"{TEXT} #{serial % 10_000:04d}"


def ceiling(case: dict) -> dict[int, float]:
    """Items/s of the adapter called directly at each batch size (median of 3 after warm-up)."""
    import torch

    from control.executor.adapters import build_adapter
    from control.executor.adapters.base import PreparedItem

    torch.set_num_threads(1)
    adapter = build_adapter(case["ref"], torch.device("cpu"), CACHE)
    gp = GenParams(max_tokens=case["params"].get("max_tokens", 32))

    class Ctx:
        def tick(self) -> None: ...
        def emit_delta(self, *a) -> None: ...
        def elapsed_ms(self) -> float:
            return 0.0

    rates, runs = {}, iter(range(10**6))

    def items(size: int) -> list:
        n = next(runs)  # unique prompts per run, like the served runs (no whole-prompt hits)
        return [PreparedItem(BatchItem(StepKey("c", f"{n}-{i}"), f"k{n}-{i}", {}, gp),
                             {case["field"]: prompt(n * 100 + i)}) for i in range(size)]  # fmt: skip

    for size in case["sizes"]:
        adapter.run(items(size), Ctx())
        times = []
        for _ in range(5):
            batch = items(size)
            t0 = perf_counter()
            adapter.run(batch, Ctx())
            times.append(perf_counter() - t0)
        rates[size] = size / sorted(times)[2]
    return rates


#: Prompt tokens the core is told per run (the shared text plus its number, give or take one).
PROMPT_TOKENS = 20


def profile(case: dict, rates: dict[int, float]) -> TableLatencyModel:
    """The core's latency table for the case, from the ceiling just measured: one row per batch
    size, as ``legato profile`` gives the live API. Without it the core predicts a batch of 16
    MiniLM items at ~8 ms instead of ~75 ms, so its dispatch-ahead instants come at once.
    Generate keeps the default model: a whole-generation time is not a forward row (the core
    adds decode steps to it)."""
    if case["task"] == "generate":
        return TableLatencyModel()
    return TableLatencyModel(
        [LatencyRow("m:1", "cpu", b, PROMPT_TOKENS, round(b / r * 1e6)) for b, r in rates.items()]
    )


def runtime(name: str, case: dict, max_batch: int, rates: dict[int, float]) -> LiveRuntime:
    devices = [DeviceInfo("cpu:0", "cpu", 0, 4096, CORE)]
    ex = LocalExecutor(ExecutorConfig(cache_dir=str(CACHE), use_cuda=False, poll_queue=False),
                       devices)  # fmt: skip
    node = {"id": "n", "task": case["task"], "model": "m:1", "params": case["params"]}
    wf = {"workflow": name, "inputs": {"x": "text"}, "nodes": [node],
          "edges": [{"from": "input.x", "to": f"n.{case['field']}"}]}  # fmt: skip
    model = ModelSpec("m", "1", case["task"], 512, max_batch_size=max_batch,
                      continuous_batching=case.get("continuous", False))  # fmt: skip
    bp = CoreBlueprint(device_specs(devices), (model,), (dag_from_dict(wf),),
                       # the serving configuration (dispatch ahead included), with the case's
                       # batching delay
                       core_config=replace(serving_core_config(), batching_config=SizeDelayConfig(
                           max_queue_delay_s=case["delay_s"])))  # fmt: skip
    return LiveRuntime(bp, profile(case, rates), ex, {"m:1": case["ref"]},
                       (InitialReplica("m:1", "cpu:0"),), RuntimeConfig(stream_tokens=False))  # fmt: skip


async def served(
    name: str, case: dict, rates: dict[int, float], seconds: float, max_batch: int, slo_s: float
) -> list[dict]:
    """The grid of load levels, then ``REFINE_PROBES`` bisection probes between the highest
    level within ``slo_s`` (0 if none) and the lowest level above it that missed it. Rows are
    in the order run; each carries its ``fraction`` of the ceiling in ``rates`` (items/s by
    batch size, also the core's latency profile)."""
    top = max(rates.values())
    rt = runtime(name, case, max_batch, rates)
    await rt.start()
    rows = []

    async def probe(frac: float) -> None:
        row = await timed_load(rt, name, case, top * frac, seconds)
        rows.append({"fraction": round(frac, 4), **row})

    try:
        await timed_load(rt, name, case, top * 0.3, 2.0)  # warm-up
        for frac in FRACTIONS:
            await probe(frac)
        for _ in range(REFINE_PROBES):
            ok = [r["fraction"] for r in rows if qualifies(r, slo_s)]
            low = max(ok, default=0.0)
            above = [r["fraction"] for r in rows if r["fraction"] > low and not qualifies(r, slo_s)]
            if not above:
                break  # every level above the best one met the SLO: nothing to bisect
            await probe((low + min(above)) / 2)
    finally:
        await rt.stop()
    return rows


async def timed_load(rt: LiveRuntime, name: str, case: dict, rate: float, seconds: float) -> dict:
    """Open-loop Poisson arrivals at ``rate`` for ``seconds``; latency of every run."""
    rng = random.Random(int(rate * 1000))
    lat: list[float] = []
    ends: list[float] = []  # when each run's result arrived
    batches: dict[tuple[str, str], tuple[int, float]] = {}  # (replica, batch) -> size, ms
    failed = 0
    tasks = []
    ahead0 = rt.snapshot().counters.get("batching.sent_ahead", 0)
    t0 = monotonic()
    due, n = t0, 0

    async def one(req: Request, serial: int) -> None:
        nonlocal failed
        start = monotonic()
        r = await rt.submit_run(RunRequest(req, {"x": prompt(serial)})).result()
        if r.ok:
            ends.append(monotonic())
            lat.append(ends[-1] - start)
            u = r.usage[0]
            # items of one batch share its device time: size x share = the batch's time
            key = (u.replica or "", f"{u.batch_size}:{u.device_us}")
            batches[key] = (u.batch_size, u.device_us * u.batch_size / 1000.0)
        else:
            failed += 1

    while due - t0 < seconds:
        await asyncio.sleep(max(0.0, due - monotonic()))
        req = Request(f"{name}-{rate:.3f}-{n}", "bench", name, prompt_tokens=PROMPT_TOKENS,
                      max_output_tokens=case["params"].get("max_tokens", 0))  # fmt: skip
        tasks.append(asyncio.ensure_future(one(req, n)))
        n += 1
        due += rng.expovariate(rate)
    window = monotonic() - t0
    await asyncio.gather(*tasks)
    drained = monotonic() - t0 - window
    sent_ahead = rt.snapshot().counters.get("batching.sent_ahead", 0) - ahead0
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("inf")
    sizes = [size for size, _ in batches.values()]
    per_batch = sorted(ms for _, ms in batches.values())
    busy_s = sum(per_batch) / 1000.0
    ends.sort()
    gap_ms = max((b - a for a, b in itertools.pairwise(ends)), default=0.0) * 1000.0
    return {"offered_rate": round(rate, 2), "arrivals": n, "completed": len(lat),
            "failed": failed, "throughput": round(len(lat) / window, 2),
            "p50_s": round(lat[len(lat) // 2], 3) if lat else None, "p99_s": round(p99, 3),
            "drain_s": round(drained, 2), "batches": len(sizes),
            "batch_size_mean": round(sum(sizes) / max(1, len(sizes)), 1),
            "batch_size_max": max(sizes, default=0),
            "batch_device_ms_p50": round(per_batch[len(per_batch) // 2], 1) if per_batch else None,
            # a stall tells its place: the slowest batch on the device against the longest time
            # no run ended (a gap far beyond any batch: the driver or the host stood still)
            "batch_device_ms_max": round(per_batch[-1], 1) if per_batch else None,
            "max_completion_gap_ms": round(gap_ms, 1),
            "latency_max_s": round(lat[-1], 3) if lat else None,
            # joined batches overlap on the device: their sum is no busy share
            "device_busy_share": None if case.get("continuous") else
                                 round(busy_s / (window + drained), 3),
            # the device's idle time per batch (window + drain less device time): the gaps
            # between batches, the completion round trip where nothing was sent ahead
            "idle_ms_per_batch": None if case.get("continuous") or not sizes else
                                 round((window + drained - busy_s) * 1000.0 / len(sizes), 1),
            "sent_ahead": sent_ahead}  # fmt: skip


def ceiling_pinned(case: dict, cores: set[int]) -> dict[int, float]:
    """The ceiling on the worker's core; afterwards the driver goes back beside the worker."""
    if cores:
        os.sched_setaffinity(0, {CORE})
    rates = ceiling(case)
    if len(cores) > 1:
        os.sched_setaffinity(0, cores - {CORE})
    return rates


def qualifies(row: dict, slo_s: float) -> bool:
    """A level counts when no run failed and p99 is within ``slo_s``."""
    return row["p99_s"] <= slo_s and not row["failed"]


def served_at(rows: list[dict], slo_s: float) -> float:
    """The best throughput among qualifying levels."""
    return max((r["throughput"] for r in rows if qualifies(r, slo_s)), default=0.0)


def slo_of(case: dict, size: int, top: float) -> float:
    """The stated SLO (see ``SLO_BATCHES``) for a ceiling of ``top`` items/s at batch ``size``."""
    return max(case["quiet_slo_s"], SLO_BATCHES * size / top)


def load_average() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


async def bench(seconds: float, only: list[str] | None = None) -> dict:
    out = {"benchmark": "batching", "goal_served_vs_ceiling": 0.85, "goal_cases": GOAL_CASES,
           "cpu_cores": os.cpu_count(), "load_avg_1m_before": load_average()}  # fmt: skip
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    for name, case in CASES.items():
        if only and name not in only:
            continue
        rates = ceiling_pinned(case, cores)
        top = max(rates.values())
        # The model's max batch size is where its measured throughput peaks, as an operator
        # would set it from ``legato profile``: on a CPU a bigger batch can be SLOWER per item
        # (MiniLM here: 8 beats 32), and the core fills batches up to the cap under load.
        size = max(rates, key=rates.get)
        # the SLO as known before the served levels steers the bisection; the verdict below
        # uses the final one (a higher ceiling after can only tighten it)
        rows = await served(name, case, rates, seconds, size, slo_of(case, size, top))
        # measured again after the served levels: the ratio uses the better of the two, so a
        # quieter moment during either measurement can only make the goal harder to reach
        after = ceiling_pinned(case, cores)
        top = max(top, max(after.values()))
        slo = slo_of(case, size, top)
        best = served_at(rows, slo)
        out[name] = {
            "slo_p99_s": round(slo, 2),
            "slo_rule": f"p99 <= max({case['quiet_slo_s']} s, {SLO_BATCHES} x one ceiling batch)",
            "served_throughput": best,
            "ceiling_throughput": round(top, 2),
            "ceiling_before_after": [round(max(rates.values()), 2), round(max(after.values()), 2)],
            "ceiling_batch_size": size,
            "ceiling_by_batch_size": {b: round(max(r, after[b]), 2) for b, r in rates.items()},
            "served_max_batch_size": size,
            "batch1_throughput": round(max(rates[1], after[1]), 2),
            "served_vs_ceiling": round(best / top, 3),
            "served_throughput_within_quiet_slo": served_at(rows, case["quiet_slo_s"]),
            "unit": "items/s",
            "loads": rows,
        }
    out["load_avg_1m_after"] = load_average()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="served vs ceiling throughput")
    parser.add_argument("--seconds", type=float, default=20.0, help="arrival window per level")
    parser.add_argument("--only", action="append", choices=sorted(CASES), help="run one case")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(bench(args.seconds, args.only))))
