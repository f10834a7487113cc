"""Continuous batching on a CUDA device: joined batches compute what they compute alone, in the
adapter and through a worker process on ``cuda:0`` (skipped without a CUDA device)."""

from __future__ import annotations

import pytest
import torch

from control.executor.adapters.generate import GenerateAdapter
from control.executor.protocol import Batch, BatchItem, GenParams, ItemCompleted, ModelRef, StepKey
from tests.executor.conftest import all_done, completions, make_executor, wait_for
from tests.executor.test_adapters import RecordingCtx, item
from tests.executor.test_continuous_batching import LONG, Group, no_cache_reference, run_joined

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def gen_item(key: str, prompt: str, **params) -> BatchItem:
    return BatchItem(StepKey(f"run-{key}", "gen"), key, {"prompt": prompt}, GenParams(**params))


def cuda_gen(model_cache) -> GenerateAdapter:
    return GenerateAdapter(model_cache / "tiny" / "gpt2", torch.device("cuda:0"), {})


@pytest.mark.parametrize("params", [dict(temperature=0.0), dict(temperature=0.9, seed=7)])
def test_joined_batches_on_cuda_match_their_lone_runs(model_cache, params):
    a = [item("a0", {"prompt": "the quick brown fox"}, max_tokens=24, **params),
         item("a1", {"prompt": "Question: what is it?"}, max_tokens=5, **params)]  # fmt: skip
    b = [item("b0", {"prompt": LONG}, max_tokens=10, **params)]
    c = [item("c0", {"prompt": "Paris"}, max_tokens=8, **params)]
    log: list = []
    ga, gb, gc = Group("a", a, log), Group("b", b, log), Group("c", c, log)
    run_joined(cuda_gen(model_cache), ga, {3: [gb], 7: [gc]}, log)
    for group, items in ((ga, a), (gb, b), (gc, c)):
        lone = cuda_gen(model_cache).run(items, RecordingCtx())
        assert [o.value["text"] for o in group.outputs] == [o.value["text"] for o in lone]


def test_joined_rows_on_cuda_match_a_no_cache_reference(model_cache):
    adapter = cuda_gen(model_cache)
    cases = {"a": ("the quick brown fox", 12), "b": (LONG, 6), "c": ("hi", 9)}
    groups = {
        k: Group(k, [item(k, {"prompt": p}, max_tokens=m)], []) for k, (p, m) in cases.items()
    }
    run_joined(adapter, groups["a"], {2: [groups["b"]], 4: [groups["c"]]}, [])
    for key, (prompt, max_tokens) in cases.items():
        tokens, _ = no_cache_reference(adapter, prompt, max_tokens)
        assert groups[key].outputs[0].value["text"] == adapter.tokenizer.decode(tokens)


def test_cuda_worker_joins_a_second_batch_into_its_loop(model_cache):
    ex = make_executor(model_cache, use_cuda=True)
    try:
        ref = ModelRef("g", "generate", "tiny", "gpt2")
        assert ex.load("g", ref, "cuda:0").result(120).ok
        ex.submit(Batch("A", "g", (gen_item("a", "the quick brown fox", max_tokens=300),)))
        ex.submit(Batch("B", "g", (gen_item("b", "Paris", max_tokens=3),)))
        events = wait_for(ex, all_done(["a", "b"]), 120)
        order = [e.result.idempotency_key for e in events if isinstance(e, ItemCompleted)]
        done = completions(events)
        assert order == ["b", "a"] and done["a"].ok and done["b"].ok
        assert done["a"].output_tokens == 300
    finally:
        ex.stop()
