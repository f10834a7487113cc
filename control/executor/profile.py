"""Measure latency tables of a model on a device: the rows the twin's latency predictor uses.

``profile_model`` builds the model's adapter in THIS process on the given device (call it from a
process pinned like a worker: one core, ``torch.set_num_threads(1)``), runs synthetic batches
through the same adapter code the workers run, and returns one :class:`LatencyRow` per
(batch size, prompt tokens, phase) with the median of ``repeats`` timed runs after a warm-up.

Phases: ``forward`` for encoder and tool tasks (the whole batch); for generate, ``prefill``
(prompt in, first token out) and ``decode_per_token`` (each further token of the batch). The
prefix cache is off while profiling so repeated prompts are measured cold. The caller (CLI)
stores the rows in the database and as CSV: one database point per (device type, batch size,
tokens) whose ``latency_us`` is the forward (or prefill) time and, for generate, whose
``decode_us_per_token`` is the batch's time per further token; ``load_fleet_state`` turns them
into the twin's forward table and decode rows.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from control import clock
from control.executor import sources
from control.executor.adapters.base import PreparedItem
from control.executor.protocol import BatchItem, GenParams, ModelRef, StepKey

_FILLER = "the model measures latency of batches of tokens on this device "


@dataclass(frozen=True)
class LatencyRow:
    model: str
    task: str
    device_type: str  # "cpu" or "cuda"
    batch_size: int
    input_tokens: int  # measured tokens per item (mean over the batch)
    phase: str  # "forward" | "prefill" | "decode_per_token"
    latency_us: int  # median over repeats
    samples: int

    def as_dict(self) -> dict:
        return asdict(self)


class _QuietCtx:
    def __init__(self) -> None:
        self.started = clock.perf_counter()

    def tick(self) -> None:
        pass

    def emit_delta(self, item, index: int, text: str) -> None:
        pass

    def elapsed_ms(self) -> float:
        return (clock.perf_counter() - self.started) * 1000.0


def _inputs(task: str, text: str) -> dict:
    """Synthetic inputs of a task around one text of the wanted length."""
    table = {
        "embed": {"text": text},
        "classify": {"text": text},
        "router": {"text": text},
        "noop": {"text": text},
        "vector_search": {"query": text},
        "rerank": {"query": text[:60], "documents": [text]},
        "generate": {"prompt": text},
    }
    return dict(table[task])


def _text_of(tokenizer, tokens: int) -> str:
    words = (_FILLER * (tokens // 4 + 2)).split()
    if tokenizer is None:
        return " ".join(words[:tokens])
    lo, hi = 1, len(words)
    while lo < hi:  # the longest word prefix whose token count is <= tokens
        mid = (lo + hi + 1) // 2
        if len(tokenizer(" ".join(words[:mid])).input_ids) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def _time_batch(adapter, items: list[PreparedItem], repeats: int) -> tuple[int, int]:
    """Median microseconds of ``adapter.run(items)`` and mean input tokens per item."""
    outs = adapter.run(items, _QuietCtx())  # warm-up (and token counts)
    samples = []
    for _ in range(repeats):
        started = clock.perf_counter()
        adapter.run(items, _QuietCtx())
        samples.append((clock.perf_counter() - started) * 1e6)
    tokens = sum(o.input_tokens for o in outs) // max(1, len(outs))
    return int(statistics.median(samples)), tokens


def _time_generate(adapter, items: list[PreparedItem], repeats: int) -> tuple[int, int, int]:
    """Median prefill us (batch start to the last item's first token), median decode us per
    token (the rest of the run over the tokens after the first), and mean prompt tokens."""
    adapter.run(items, _QuietCtx())  # warm-up
    prefill, decode, tokens = [], [], 0
    for _ in range(repeats):
        ctx = _QuietCtx()
        outs = adapter.run(items, ctx)
        total_us = ctx.elapsed_ms() * 1000.0
        first_us = max(o.first_token_ms for o in outs) * 1000.0
        steps = max(o.output_tokens for o in outs) - 1
        prefill.append(first_us)
        decode.append((total_us - first_us) / max(1, steps))
        tokens = sum(o.input_tokens for o in outs) // len(outs)
    return int(statistics.median(prefill)), max(1, int(statistics.median(decode))), tokens


def profile_model(
    ref: ModelRef,
    device: str = "cpu",
    batch_sizes: Sequence[int] = (1, 2, 4, 8),
    token_lengths: Sequence[int] = (16, 64),
    decode_tokens: int = 8,
    repeats: int = 3,
    cache_dir: Path = sources.DEFAULT_CACHE_DIR,
) -> list[LatencyRow]:
    """Latency rows of ``ref`` on ``device`` ("cpu" or "cuda:N"); see the module docstring."""
    import torch

    from control.executor.adapters import build_adapter

    adapter = build_adapter(profiling_ref(ref), torch.device(device), Path(cache_dir))
    device_type = torch.device(device).type
    return profile_adapter(adapter, ref, device_type, batch_sizes, token_lengths,
                           decode_tokens, repeats)  # fmt: skip


def profiling_ref(ref: ModelRef) -> ModelRef:
    """``ref`` as the profiler loads it: for generate, cold prompts every time and no chat
    template around them (a point's token count is then exactly the prompt the latency table
    is keyed by; a template is just more tokens)."""
    if ref.task != "generate":
        return ref
    return replace(ref, options={**ref.options, "prefix_cache_mib": 0, "chat": False})


def profile_adapter(
    adapter: Any,
    ref: ModelRef,
    device_type: str,
    batch_sizes: Sequence[int] = (1, 2, 4, 8),
    token_lengths: Sequence[int] = (16, 64),
    decode_tokens: int = 8,
    repeats: int = 3,
) -> list[LatencyRow]:
    """Latency rows of an adapter already built from :func:`profiling_ref` (``ref``)."""
    tokenizer = getattr(adapter, "tokenizer", None) or getattr(
        getattr(adapter, "embedder", None), "tokenizer", None
    )
    rows: list[LatencyRow] = []
    for tokens in token_lengths:
        text = _text_of(tokenizer, tokens)
        for size in batch_sizes:
            rows.extend(_rows_at(adapter, ref, device_type, size, text, decode_tokens, repeats))
    return rows


def _rows_at(adapter, ref: ModelRef, device_type: str, size: int, text: str,
             decode_tokens: int, repeats: int) -> list[LatencyRow]:  # fmt: skip  # noqa: ANN001
    """The rows of one (batch size, prompt) point: ``forward``, or ``prefill`` and
    ``decode_per_token`` for generate."""

    def batch(max_tokens: int) -> list[PreparedItem]:
        params = GenParams(max_tokens=max_tokens)
        return [
            PreparedItem(
                BatchItem(StepKey("profile", str(i)), f"p{i}", {}, params),
                _inputs(ref.task, text),
            )
            for i in range(size)
        ]

    row = dict(model=ref.name, task=ref.task, device_type=device_type, batch_size=size)
    if ref.task != "generate":
        us, n = _time_batch(adapter, batch(1), repeats)
        return [LatencyRow(**row, input_tokens=n, phase="forward", latency_us=us, samples=repeats)]
    prefill_us, decode_us, n = _time_generate(adapter, batch(1 + decode_tokens), repeats)
    return [
        LatencyRow(**row, input_tokens=n, phase="prefill", latency_us=prefill_us, samples=repeats),
        LatencyRow(
            **row, input_tokens=n, phase="decode_per_token", latency_us=decode_us, samples=repeats
        ),
    ]
