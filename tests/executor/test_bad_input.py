"""One item's bad input fails that item only (issue 22).

Text with a lone surrogate (which JSON's ``\\ud800`` escape carries past every schema) used to
reach the tokenizer, which raised for the whole batch: every item of it failed as
``model_error``, other tenants' included, and three such batches opened the replica's breaker.
Now the adapters refuse it per item (``bad_input``, naming the input), the worker isolates an
item that makes a batch raise in a way no check foresaw, and the breaker counts only failures
about the replica.

The worker runs in this process (its ``conn`` records what it sends, as in
``test_continuous_worker``), with tiny real models and their real tokenizers.
"""

from __future__ import annotations

import pytest
import torch

from control.executor.adapters import build_adapter
from control.executor.adapters.base import InputError, ItemOutput
from control.executor.adapters.encoders import EmbedAdapter
from control.executor.adapters.generate import GenerateAdapter
from control.executor.adapters.tools import NoopAdapter
from control.executor.host.breaker import BreakerConfig, Breakers, batch_outcome
from control.executor.protocol import Batch, BatchItem, DeviceInfo, GenParams, ItemResult, StepKey
from control.executor.worker.main import WorkerConfig
from control.executor.worker.process import Worker
from tests.executor.test_adapters import RecordingCtx, item
from tests.executor.test_continuous_worker import Conn

CPU = torch.device("cpu")
LONE = "caf\u00e9 \ud800 bar"  # a lone (high) surrogate: not encodable as UTF-8


def test_the_tokenizer_itself_raises_on_a_lone_surrogate(model_cache):
    """The premise: without the per-item check, one such text fails a whole batch."""
    embed = EmbedAdapter(model_cache / "tiny" / "bert", CPU)
    with pytest.raises(Exception):  # noqa: B017 - whichever the tokenizer library raises
        embed.encode(["fine", LONE])


@pytest.mark.parametrize(
    ("arch", "task", "bad", "good", "field"),
    [
        ("bert", "embed", {"text": LONE}, {"text": "fine"}, "text"),
        ("bert", "embed", {"texts": ["ok", LONE]}, {"texts": ["a", "b"]}, "texts[1]"),
        ("bert", "rerank", {"query": "q", "documents": ["a", LONE]},
         {"query": "q", "documents": ["a", "b"]}, "documents[1]"),
        ("bert", "rerank", {"query": LONE, "documents": ["a"]},
         {"query": "q", "documents": ["a"]}, "query"),
        ("bert-cls", "classify", {"text": LONE}, {"text": "fine"}, "text"),
        ("gpt2", "generate", {"prompt": LONE}, {"prompt": "fine"}, "prompt"),
        ("gpt2", "generate", {"prompt": "p", "documents": [LONE]}, {"prompt": "p"},
         "documents[0]"),
        ("bert", "embed", {"texts": ["ok", {"a": 1}]}, {"texts": ["a"]}, "texts[1]"),
    ],
)  # fmt: skip
def test_an_unusable_text_fails_only_its_item_naming_the_input(
    model_cache, arch, task, bad, good, field
):
    from control.executor.protocol import ModelRef

    adapter = build_adapter(ModelRef("m", task, "tiny", arch), CPU, model_cache)
    params = {"max_tokens": 2} if task == "generate" else {}
    outs = adapter.run([item("good", good, **params), item("bad", bad, **params)], RecordingCtx())
    alone = adapter.run([item("good", good, **params)], RecordingCtx())[0]
    assert outs[0].error is None and outs[0].input_tokens == alone.input_tokens
    assert outs[1].error is not None and outs[1].field == field, outs[1]
    assert repr(field) in outs[1].error
    outs[1].error.encode("utf-8")  # the message itself stays encodable (it goes on as JSON)


def test_vector_search_refuses_a_bad_query_before_embedding_the_others(model_cache):
    from control.executor.protocol import ModelRef

    ref = ModelRef("vs", "vector_search", "tool", options={
        "documents": ["paris is in france", "dogs bark"],
        "embed_model": ModelRef("e", "embed", "tiny", "bert")})  # fmt: skip
    adapter = build_adapter(ref, CPU, model_cache)
    outs = adapter.run([item("a", {"query": "paris"}), item("b", {"query": LONE})], RecordingCtx())
    assert outs[0].error is None and outs[0].item_count == 2
    assert outs[1].field == "query" and "lone surrogate" in outs[1].error


def test_a_prompt_longer_than_the_context_is_a_bad_input_and_decoding_stops_at_its_end(
    model_cache,
):
    gen = GenerateAdapter(model_cache / "tiny" / "gpt2", CPU, {"chat": False})
    assert gen.context == 512
    words = 100
    while len(gen.tokenizer(" ".join(["word"] * (words + 10))).input_ids) < 500 and words < 5000:
        words += 10
    fits = " ".join(["word"] * words)  # just under the context: 400 more tokens do not fit
    n = len(gen.tokenizer(fits).input_ids)
    outs = gen.run(
        [item("long", {"prompt": "word " * 700}, max_tokens=2),
         item("fits", {"prompt": fits}, max_tokens=400)],
        RecordingCtx(),
    )  # fmt: skip
    assert outs[0].field == "prompt" and "at most 512" in outs[0].error
    assert outs[1].error is None and n + outs[1].output_tokens <= 512  # never past its context


# ---- the worker: isolating an item no adapter check foresaw ------------------------------------


class _Unchecked(EmbedAdapter):
    """An embed adapter without the per-item text check (as every adapter was before issue
    22): the real tokenizer raises for the whole batch."""

    def run(self, items, ctx):  # noqa: ANN001, ANN201
        vectors, counts = self.encode([p.inputs["text"] for p in items])
        return [ItemOutput({"vector": v}, input_tokens=c, item_count=1)
                for v, c in zip(vectors, counts, strict=True)]  # fmt: skip


class _Poisoned(NoopAdapter):
    """Raises (not an input error) for any batch holding the input ``x == "poison"``."""

    def run(self, items, ctx):  # noqa: ANN001, ANN201
        if any(p.inputs.get("x") == "poison" for p in items):
            raise RuntimeError("index out of range in self")
        return super().run(items, ctx)


@pytest.fixture
def worker(model_cache):
    w = Worker(DeviceInfo("cpu:0", "cpu", 0, 1024), Conn(), WorkerConfig())
    w.adapters["raw"] = _Unchecked(model_cache / "tiny" / "bert", CPU)
    w.adapters["poisoned"] = _Poisoned()
    w.adapters["broken"] = NoopAdapter(fail="CUDA error: an illegal memory access")
    return w


def _batch(batch_id: str, replica: str, *inputs: dict) -> Batch:
    items = tuple(BatchItem(StepKey(f"{batch_id}-run", f"n{i}"), f"{batch_id}-{i}", x, GenParams())
                  for i, x in enumerate(inputs))  # fmt: skip
    return Batch(batch_id, replica, items)


def _results(worker, batch: Batch) -> dict[str, ItemResult]:  # noqa: ANN001
    worker.on_batch(batch, {})
    return {r.idempotency_key: r for r in worker.conn.results(batch.batch_id)}


def test_a_batch_the_tokenizer_raises_on_is_isolated_item_by_item(worker, model_cache):
    texts = ["alpha", LONE, "gamma", "delta"]
    got = _results(worker, _batch("B", "raw", *({"text": t} for t in texts)))
    bad = got["B-1"]
    assert not bad.ok and bad.cause == "bad_input" and not bad.retriable, bad
    bad.error.encode("utf-8")
    ok = [got[f"B-{i}"] for i in (0, 2, 3)]
    assert all(r.ok for r in ok), ok
    alone = EmbedAdapter(model_cache / "tiny" / "bert", CPU).encode(["gamma"])[0][0]
    assert torch.allclose(worker.outputs.get("B-run", "n2")["vector"], alone, atol=1e-5)
    assert worker.outputs.get("B-run", "n1") is None


def test_a_single_item_raising_an_input_error_is_bad_input(worker):
    got = _results(worker, _batch("S", "raw", {"text": LONE}))
    assert got["S-0"].cause == "bad_input" and not got["S-0"].retriable


def test_an_item_that_alone_makes_the_model_raise_is_blamed_when_the_others_succeed(worker):
    got = _results(worker, _batch("P", "poisoned", {"x": 1}, {"x": "poison"}, {"x": 3}))
    assert got["P-0"].ok and got["P-2"].ok
    assert got["P-1"].cause == "bad_input" and "index out of range" in got["P-1"].error


def test_a_replica_that_fails_every_item_is_the_replicas_fault(worker):
    got = _results(worker, _batch("F", "broken", {"x": 1}, {"x": 2}))
    assert all(r.cause == "model_error" and r.retriable for r in got.values()), got
    single = _results(worker, _batch("G", "broken", {"x": 1}))
    assert single["G-0"].cause == "model_error"


def test_input_error_class_names_its_field():
    err = InputError("input 'text' is bad", "text")
    assert err.field == "text" and str(err) == "input 'text' is bad"


# ---- the breaker counts only failures about the replica -----------------------------------------


def _result(key: str, cause: str | None) -> ItemResult:
    retriable = cause in ("model_error", "hang", "worker_down", "unavailable")
    return ItemResult(StepKey("r", key), key, "rep", "cpu:0", ok=cause is None,
                      error=None if cause is None else cause, retriable=retriable, cause=cause)  # fmt: skip


@pytest.mark.parametrize(
    ("causes", "outcome"),
    [
        (["bad_input", "bad_input"], None),
        (["bad_input", None], True),
        (["unavailable"], None),  # an input lost with another worker
        (["worker_down"], None),  # one crash, handled by the worker's restart
        (["model_error", None], False),
        (["hang"], False),
        (["bad_input", "model_error"], False),
    ],
)
def test_batch_outcome_counts_only_replica_faults(causes, outcome):
    results = [_result(f"k{i}", c) for i, c in enumerate(causes)]
    assert batch_outcome(results) is outcome


def test_bad_inputs_never_open_the_breaker_nor_close_it():
    events = []
    breakers = Breakers(BreakerConfig(failure_threshold=3, cooldown_s=5.0), events.append)
    for t in range(10):  # a tenant sending only bad text
        breakers.record_results("rep", [_result(f"b{t}", "bad_input")], float(t))
    assert breakers.of("rep").state == "closed" and not events
    for t in range(3):  # a real replica fault still opens it
        breakers.record_results("rep", [_result(f"m{t}", "model_error")], 10.0 + t)
    assert breakers.of("rep").state == "open"
    assert breakers.allow("rep", 20.0) == (True, "circuit half-open: this batch is the probe")
    breakers.record_results("rep", [_result("probe", "bad_input")], 20.1)  # proves nothing
    assert breakers.of("rep").state == "half_open"
    assert breakers.allow("rep", 20.2)[0] is True  # the probe is over: another one may go
    breakers.record_results("rep", [_result("probe2", None)], 20.3)
    assert breakers.of("rep").state == "closed"
