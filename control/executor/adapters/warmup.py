"""The warm-up forward pass a load ends with, before the replica is reported loaded.

The first call through a freshly built model pays one-off costs (lazy kernels and allocator
pools, tokenizer caches, torch's first-dispatch bookkeeping): tens to hundreds of milliseconds
on a CPU. A worker runs ``warm_up`` on the loader, right after building the adapter and before
it reports the load, so a replica the core sees as ready serves its first request at the speed
the latency tables predict. One tiny input goes through the adapter's own ``run``; the
prefix KV cache of a generate adapter is emptied after it, so the warm-up leaves no entry that a
real request could hit. Tasks without a model (router, noop) are not warmed. A warm-up that
raises is logged and the load still reports: the replica's own batches then report the fault,
as they would have without a warm-up.
"""

from __future__ import annotations

import logging
from typing import Any

from control import clock
from control.executor.adapters.base import PreparedItem
from control.executor.protocol import BatchItem, GenParams, StepKey

log = logging.getLogger(__name__)

_TEXT = "warm up"
#: one tiny input per task with a model to warm
_INPUTS: dict[str, dict[str, Any]] = {
    "embed": {"text": _TEXT},
    "classify": {"text": _TEXT},
    "rerank": {"query": _TEXT, "documents": [_TEXT]},
    "generate": {"prompt": _TEXT},
    "vector_search": {"query": _TEXT},
}


class _Quiet:
    """A run context that streams nothing (the warm-up answers nobody)."""

    def __init__(self) -> None:
        self.started = clock.perf_counter()

    def tick(self) -> None:
        pass

    def emit_delta(self, item: BatchItem, index: int, text: str) -> None:
        pass

    def elapsed_ms(self) -> float:
        return (clock.perf_counter() - self.started) * 1000.0


def warm_up(adapter: Any, task: str) -> float | None:
    """Run one tiny input of ``task`` through ``adapter``; returns its milliseconds, or None
    when the task has nothing to warm or the pass raised (logged)."""
    inputs = _INPUTS.get(task)
    if inputs is None:
        return None
    item = BatchItem(StepKey("warm-up", "warm-up"), "warm-up", {}, GenParams(max_tokens=1))
    ctx = _Quiet()
    try:
        adapter.run([PreparedItem(item, dict(inputs))], ctx)
    except Exception:  # the load stands; the replica's batches will report their own faults
        log.exception("warm-up of a %s adapter failed", task)
        return None
    cache = getattr(adapter, "prefix_cache", None)
    if cache is not None:  # no entry of the warm-up's for a real request to hit
        adapter.prefix_cache = type(cache)(cache.max_bytes, cache.min_hit_tokens)
    return ctx.elapsed_ms()
