"""Model adapters and their registry: task name -> factory building the adapter on a device.

A new task is a new module plus one registry entry; the worker never branches on task names.
A model's precision (``ModelRef.precision``) is checked against the device before anything is
loaded; tasks without weights of their own (tools) run at ``fp32`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from control.executor import sources
from control.executor.adapters.base import Adapter
from control.executor.adapters.encoders import ClassifyAdapter, EmbedAdapter, RerankAdapter
from control.executor.adapters.generate import GenerateAdapter
from control.executor.adapters.tools import NoopAdapter, RouterAdapter, VectorSearchAdapter
from control.executor.precision import check_precision
from control.executor.protocol import ExecutorError, ModelRef

Factory = Callable[[ModelRef, torch.device, Path], Adapter]


def _embed(ref: ModelRef, device: torch.device, cache_dir: Path) -> Adapter:
    return EmbedAdapter(sources.resolve(ref, cache_dir), device, precision=ref.precision)


def _rerank(ref: ModelRef, device: torch.device, cache_dir: Path) -> Adapter:
    # Only an operator's own folder can hold a trained cross-encoder head.
    fresh = ref.source != "hf"
    folder = sources.resolve(ref, cache_dir)
    return RerankAdapter(folder, device, fresh_head=fresh, precision=ref.precision)


def _classify(ref: ModelRef, device: torch.device, cache_dir: Path) -> Adapter:
    return ClassifyAdapter(sources.resolve(ref, cache_dir), device, precision=ref.precision)


def _generate(ref: ModelRef, device: torch.device, cache_dir: Path) -> Adapter:
    folder = sources.resolve(ref, cache_dir)
    return GenerateAdapter(folder, device, dict(ref.options), precision=ref.precision)


def _vector_search(ref: ModelRef, device: torch.device, cache_dir: Path) -> Adapter:
    embed_ref = ref.options.get("embed_model") or ModelRef("minilm", "embed", "minilm")
    if not isinstance(embed_ref, ModelRef):
        raise ExecutorError(
            f"vector_search options['embed_model'] must be a ModelRef, got {embed_ref!r}"
        )
    embedder = EmbedAdapter(sources.resolve(embed_ref, cache_dir), device)
    return VectorSearchAdapter(embedder, list(ref.options.get("documents", [])))


def _router(ref: ModelRef, device: torch.device, cache_dir: Path) -> Adapter:
    return RouterAdapter(dict(ref.options))


def _noop(ref: ModelRef, device: torch.device, cache_dir: Path) -> Adapter:
    fail = ref.options.get("fail")
    return NoopAdapter(tick=bool(ref.options.get("tick", True)), fail=str(fail) if fail else None)


#: Tasks whose models can run as precision variants.
PRECISION_TASKS = ("embed", "rerank", "classify", "generate")

ADAPTERS: dict[str, Factory] = {
    "embed": _embed,
    "rerank": _rerank,
    "classify": _classify,
    "generate": _generate,
    "vector_search": _vector_search,
    "router": _router,
    "noop": _noop,
}


def build_adapter(ref: ModelRef, device: torch.device, cache_dir: Path) -> Adapter:
    """Load ``ref`` onto ``device``; raises ExecutorError for an unknown task."""
    try:
        factory = ADAPTERS[ref.task]
    except KeyError:
        raise ExecutorError(f"no adapter for task {ref.task!r}") from None
    check_precision(ref.precision, device)
    if ref.precision != "fp32" and ref.task not in PRECISION_TASKS:
        raise ExecutorError(
            f"task {ref.task!r} has no weights to convert: precision {ref.precision!r} refused "
            f"(only {PRECISION_TASKS} run precision variants)"
        )
    return factory(ref, device, cache_dir)
