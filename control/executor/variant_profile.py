"""Profile a model's precision variants: memory, load time, latency rows and quality.

:func:`profile_variants` loads the base model (fp32) once, as the quality reference, then each
variant in turn, in THIS process (pin it like a worker: one core, one torch thread). Per
variant it measures:

* ``load_time_ms``: building the variant's adapter (weights read, converted to the precision);
* ``memory_mib``: the converted model's tensors (:func:`control.executor.precision.state_mib`,
  packed quantized weights included);
* ``rows``: the same latency rows as :func:`control.executor.profile.profile_model`;
* ``quality``: the issue-27 quality JSON against the base (:mod:`control.executor.quality`).

Base and variants are loaded as the profiler loads a model (:func:`profiling_ref`: no prefix
cache, generate prompts without the chat template), so quality is measured on the raw prompts.

A variant is dropped from memory before the next one is loaded. A precision the device cannot
run raises ExecutorError before anything is loaded.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from control import clock
from control.executor import sources
from control.executor.precision import check_precision
from control.executor.profile import LatencyRow, profile_adapter, profiling_ref
from control.executor.protocol import ModelRef
from control.executor.quality import measure_quality


@dataclass(frozen=True)
class VariantProfile:
    precision: str
    memory_mib: int
    load_time_ms: int
    quality: dict[str, Any]
    rows: list[LatencyRow]


def profile_variants(
    ref: ModelRef,
    precisions: Sequence[str],
    device: str = "cpu",
    batch_sizes: Sequence[int] = (1, 2, 4, 8),
    token_lengths: Sequence[int] = (16, 64),
    repeats: int = 3,
    cache_dir: Path = sources.DEFAULT_CACHE_DIR,
) -> list[VariantProfile]:
    """One :class:`VariantProfile` per precision of ``ref`` (the base's ``fp32`` included when
    asked: its quality is then exactly 1)."""
    import torch

    torch_device = torch.device(device)
    for precision in precisions:
        check_precision(precision, torch_device)
    base_ref = profiling_ref(replace(ref, precision="fp32"))
    base, _ = _load(base_ref, torch_device, Path(cache_dir))
    out = []
    for precision in precisions:
        variant, load_ms = _load(replace(base_ref, precision=precision), torch_device,
                                 Path(cache_dir))  # fmt: skip
        quality = measure_quality(ref.task, base, variant)
        rows = profile_adapter(variant, ref, torch_device.type, batch_sizes, token_lengths,
                               repeats=repeats)  # fmt: skip
        out.append(VariantProfile(precision, variant.memory_mib(), load_ms, quality, rows))
        del variant
        gc.collect()
    return out


def _load(ref: ModelRef, device: Any, cache_dir: Path) -> tuple[Any, int]:
    """The adapter of ``ref`` and the milliseconds its build took."""
    from control.executor.adapters import build_adapter

    started = clock.perf_counter()
    adapter = build_adapter(ref, device, cache_dir)
    return adapter, int((clock.perf_counter() - started) * 1000)
