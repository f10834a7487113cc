"""Precision variants of MiniLM (embed) and SmolLM2-135M (generate) on this machine, one torch
thread: per variant (fp32, bf16, int8) its throughput and memory against fp32 and its quality
against fp32 (the issue-27 quality JSON, :mod:`control.executor.quality`).

How: each variant's adapter is built the way a worker builds it (``ModelRef.precision``), in
this process, pinned to one core. Throughput is measured through the adapter's own ``run``:
MiniLM embeds batches of 16 of the fixed quality texts (items/s); SmolLM2 decodes 4 prompts
for 16 greedy tokens each, end-of-sequence ignored so that every precision does the same work
(generated tokens/s, prefill included). The figure is the median of
``REPEATS`` timed runs after a warm-up, interleaved across the precisions. Models are loaded as ``legato profile`` loads them (no
prefix cache, prompts without the chat template), so the quality here is the one it stores. Memory is the converted model's tensors (packed
quantized weights included; :func:`control.executor.precision.state_mib`).

Parts measured by the other issue-27 benchmarks are merged in when present: the mixed load
(``bench/variants_mixed.py``, key ``mixed``) and LoRA adapters (``bench/variants_adapters.py``,
key ``adapters``). Prints one JSON object.
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control import clock  # noqa: E402
from control.executor import quality_inputs as qi  # noqa: E402
from control.executor import sources  # noqa: E402
from control.executor.adapters.base import PreparedItem  # noqa: E402
from control.executor.profile import profiling_ref  # noqa: E402
from control.executor.protocol import BatchItem, GenParams, ModelRef, StepKey  # noqa: E402
from control.executor.quality import QuietContext, measure_quality  # noqa: E402

PRECISIONS = ("fp32", "bf16", "int8")
MODELS = {
    "minilm": ModelRef("minilm", "embed", "minilm"),
    "smollm2": ModelRef("smollm2", "generate", "smollm2"),
}
REPEATS = 5
GEN_TOKENS = 16


def _batch(task: str) -> list[PreparedItem]:
    if task == "embed":
        inputs = [{"text": t} for t in qi.texts()[:16]]
    else:
        inputs = [{"prompt": p} for p in qi.prompts()[:4]]
    params = GenParams(max_tokens=GEN_TOKENS, temperature=0.0)
    return [PreparedItem(BatchItem(StepKey("bench", str(i)), f"b{i}", {}, params), x)
            for i, x in enumerate(inputs)]  # fmt: skip


def _run_rate(adapter: Any, task: str, items: list[PreparedItem]) -> float:
    """Items/s (embed) or generated tokens/s (generate) of one timed run."""
    started = clock.perf_counter()
    outs = adapter.run(items, QuietContext())
    took = clock.perf_counter() - started
    return (len(outs) if task == "embed" else sum(o.output_tokens for o in outs)) / took


def measure_model(ref: ModelRef) -> dict[str, Any]:
    """Per precision of ``ref``: throughput, memory and quality against its fp32. The timed
    runs are interleaved (one run of each precision per round), so a slower moment of this
    shared machine falls on every precision alike instead of on one of them."""
    import torch

    from control.executor.adapters import build_adapter

    device, cache = torch.device("cpu"), sources.DEFAULT_CACHE_DIR
    ref = profiling_ref(ref)  # as `legato profile` measures: no prefix cache, no chat template
    adapters = {p: build_adapter(replace(ref, precision=p), device, cache) for p in PRECISIONS}
    items = _batch(ref.task)
    rates: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    # Same work for every precision: with end-of-sequence on, fp32 SmolLM2 ends 3 of the 4 raw
    # prompts at once while int8 decodes all 16 tokens, and tokens/s would compare unlike runs.
    eos = {p: getattr(a, "eos", None) for p, a in adapters.items()}
    for a in adapters.values():
        if ref.task == "generate":
            a.eos = -1  # no token id is -1: every row decodes GEN_TOKENS tokens
        a.run(items, QuietContext())  # warm-up
    for _ in range(REPEATS):
        for p, a in adapters.items():
            rates[p].append(_run_rate(a, ref.task, items))
    for p, a in adapters.items():
        if ref.task == "generate":
            a.eos = eos[p]  # quality decodes as served: it ends on end-of-sequence
    base_rate = statistics.median(rates["fp32"])
    base_mib = adapters["fp32"].memory_mib()
    out: dict[str, Any] = {"unit": "items/s" if ref.task == "embed" else "tokens/s"}
    for p, adapter in adapters.items():
        rate = statistics.median(rates[p])
        out[p] = {
            "throughput": round(rate, 2),
            "throughput_vs_fp32": round(rate / base_rate, 3),
            "memory_mib": adapter.memory_mib(),
            "memory_vs_fp32": round(adapter.memory_mib() / base_mib, 3),
            "quality": _rounded(measure_quality(ref.task, adapters["fp32"], adapter)),
        }
    return out


def _rounded(quality: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in quality.items()}


def _part(module: str) -> dict[str, Any] | None:
    """``measure()`` of another issue-27 benchmark, when its module exists on this branch."""
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise  # the part exists but something it needs does not: say so
        return None
    return found.measure()


def measure() -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_setaffinity") else None
    started = clock.perf_counter()
    result: dict[str, Any] = {"threads": 1, "precisions": list(PRECISIONS)}
    try:
        if cores:
            os.sched_setaffinity(0, {min(cores)})  # one core, like a worker
        for name, ref in MODELS.items():
            result[name] = measure_model(ref)
    finally:  # the other parts start workers of their own: give them every core back
        if cores:
            os.sched_setaffinity(0, cores)
    for key, module in (("mixed", "bench.variants_mixed"), ("adapters", "bench.variants_adapters")):
        part = _part(module)
        if part is not None:
            result[key] = part
    result["seconds"] = round(clock.perf_counter() - started, 1)
    return result


if __name__ == "__main__":
    print(json.dumps(measure()))
