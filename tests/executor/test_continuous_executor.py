"""Continuous batching through the LocalExecutor: a real worker process and its pipe.

(The executor's bookkeeping of several batches running at once in one worker, their hang
deadlines and how they are reported when the worker hangs, is in ``test_running_batches``.)
"""

from __future__ import annotations

import pytest

from control.executor.protocol import (
    Batch,
    BatchItem,
    GenParams,
    ItemCompleted,
    ModelRef,
    StepKey,
    TokenDelta,
)
from tests.executor.conftest import all_done, completions, make_executor, wait_for

GPT2 = ModelRef("tiny-gpt2", "generate", "tiny", "gpt2")


@pytest.fixture(scope="module")
def ex(model_cache):
    executor = make_executor(model_cache, cpu_slots=1, memory_budget_mib=64)
    yield executor
    executor.stop()


def gen_item(key: str, prompt: str, **params) -> BatchItem:
    return BatchItem(StepKey(f"run-{key}", "gen"), key, {"prompt": prompt}, GenParams(**params),
                     return_output=True)  # fmt: skip


def test_back_to_back_batches_for_one_generate_replica_run_together(ex):
    assert ex.load("gen-c", GPT2, "cpu:0").result(timeout=60).ok
    long_a = gen_item("a", "the quick brown fox", max_tokens=150)
    short_b = gen_item("b", "Paris", max_tokens=3, temperature=0.7, seed=2, stream=True)
    ex.submit(Batch("A", "gen-c", (long_a,)))
    ex.submit(Batch("B", "gen-c", (short_b,)))
    events = wait_for(ex, all_done(["a", "b"]), 60)
    done = completions(events)
    assert done["a"].ok and done["b"].ok
    order = [e.result.idempotency_key for e in events if isinstance(e, ItemCompleted)]
    # one batch at a time, B would have waited for A: it joined A's loop and finished first
    assert order == ["b", "a"]
    a_done = next(i for i, e in enumerate(events) if isinstance(e, ItemCompleted)
                  and e.result.idempotency_key == "a")  # fmt: skip
    deltas = [i for i, e in enumerate(events) if isinstance(e, TokenDelta)]
    assert deltas and max(deltas) < a_done
    assert done["a"].output_tokens == 150 and done["b"].output_tokens == 3
    assert done["b"].device_ms < done["a"].device_ms
    # each computed what it computes alone (fresh keys, run one at a time)
    for key, item in (("a", long_a), ("b", short_b)):
        again = BatchItem(StepKey(f"again-{key}", "gen"), f"again-{key}", item.inputs,
                          item.params, return_output=True)  # fmt: skip
        ex.submit(Batch(f"again-{key}", "gen-c", (again,)))
        alone = completions(wait_for(ex, all_done([f"again-{key}"]), 60))[f"again-{key}"]
        assert alone.output["text"] == done[key].output["text"]
    status = ex.heartbeat()[0]
    assert status.alive and status.running_batches == () and not status.busy
