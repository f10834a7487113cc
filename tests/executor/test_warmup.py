"""The warm-up pass a load ends with (``control.executor.adapters.warmup``): one tiny input
through the adapter, no prefix-cache entry left behind, nothing for tasks without a model, and
a warm-up fault does not fail the load."""

from __future__ import annotations

import torch

from control.executor.adapters.encoders import EmbedAdapter
from control.executor.adapters.generate import GenerateAdapter
from control.executor.adapters.tools import NoopAdapter
from control.executor.adapters.warmup import warm_up

CPU = torch.device("cpu")


class Counting:
    """Wraps an adapter and counts its runs (and their sizes)."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner, self.runs = inner, []

    def run(self, items, ctx):  # noqa: ANN001, ANN201
        self.runs.append(len(items))
        return self.inner.run(items, ctx)


def test_an_encoder_runs_one_tiny_input(model_cache) -> None:
    adapter = Counting(EmbedAdapter(model_cache / "tiny" / "bert", CPU))
    ms = warm_up(adapter, "embed")
    assert adapter.runs == [1] and ms is not None and ms > 0


def test_a_generate_warm_up_leaves_the_prefix_cache_empty(model_cache) -> None:
    adapter = GenerateAdapter(model_cache / "tiny" / "gpt2", CPU, {})
    before = adapter.prefix_cache.max_bytes
    assert warm_up(adapter, "generate") is not None
    assert len(adapter.prefix_cache) == 0 and adapter.prefix_cache.used_bytes == 0
    assert adapter.prefix_cache.max_bytes == before


def test_tasks_without_a_model_are_not_warmed() -> None:
    adapter = Counting(NoopAdapter())
    assert warm_up(adapter, "noop") is None and warm_up(adapter, "router") is None
    assert adapter.runs == []


def test_a_failing_warm_up_does_not_fail_the_load() -> None:
    broken = NoopAdapter(fail="the model is broken")
    assert warm_up(broken, "embed") is None  # logged; the load reports, batches will fail
