"""Adapters run in-process on tiny random models (fast), MiniLM once for real semantics."""

from __future__ import annotations

import pytest
import torch

from control.executor import sources
from control.executor.adapters import build_adapter
from control.executor.adapters.base import PreparedItem
from control.executor.adapters.generate import GenerateAdapter
from control.executor.protocol import BatchItem, GenParams, ModelRef, StepKey

CPU = torch.device("cpu")


class RecordingCtx:
    """A RunContext that records streamed deltas and ticks."""

    def __init__(self) -> None:
        self.deltas: dict[str, list[tuple[int, str]]] = {}
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1

    def emit_delta(self, item, index: int, text: str) -> None:
        self.deltas.setdefault(item.idempotency_key, []).append((index, text))

    def elapsed_ms(self) -> float:
        return 1.0


def item(key: str, inputs: dict, **params) -> PreparedItem:
    return PreparedItem(
        BatchItem(StepKey("r", key), key, inputs, GenParams(**params)), dict(inputs)
    )


def gen(model_cache) -> GenerateAdapter:
    return GenerateAdapter(model_cache / "tiny" / "gpt2", CPU, {})


PROMPTS = [
    "the quick brown fox jumps",
    "Question: what is the capital of France?",
    "Legato serves workflows of embedding, search and generation models",
]


def test_embed_batched_equals_unbatched(model_cache):
    embed = build_adapter(ModelRef("e", "embed", "tiny", "bert"), CPU, model_cache)
    texts = ["short", "a much longer sentence with many more tokens in it", "mid length text"]
    single = [
        embed.run([item(str(i), {"text": t})], RecordingCtx())[0] for i, t in enumerate(texts)
    ]
    batched = embed.run([item(str(i), {"text": t}) for i, t in enumerate(texts)], RecordingCtx())
    for s, b in zip(single, batched, strict=True):
        assert torch.allclose(s.value["vector"], b.value["vector"], atol=1e-5)
        assert s.input_tokens == b.input_tokens > 0
        assert abs(float(b.value["vector"].norm()) - 1.0) < 1e-5


@pytest.mark.parametrize(
    "params", [dict(temperature=0.0), dict(temperature=0.9, top_p=0.9, seed=7)]
)
def test_generate_batched_equals_unbatched(model_cache, params):
    single = [
        gen(model_cache).run([item(p, {"prompt": p}, max_tokens=8, **params)], RecordingCtx())[0]
        for p in PROMPTS
    ]
    batched = gen(model_cache).run(
        [item(p, {"prompt": p}, max_tokens=8, **params) for p in PROMPTS], RecordingCtx()
    )
    assert [s.value["text"] for s in single] == [b.value["text"] for b in batched]
    assert all(b.output_tokens == 8 for b in batched)


@pytest.mark.parametrize(
    "params", [dict(temperature=0.0), dict(temperature=1.0, top_p=0.95, seed=3)]
)
def test_prefix_reuse_matches_cold_run_and_reports_hits(model_cache, params):
    shared = "System: you are a terse assistant that answers questions.\n"
    warm = gen(model_cache)
    warm.run(
        [item("a", {"prompt": shared + "first question"}, max_tokens=6, **params)], RecordingCtx()
    )
    hot = warm.run(
        [item("b", {"prompt": shared + "second question"}, max_tokens=12, **params)], RecordingCtx()
    )[0]
    cold = gen(model_cache).run(
        [item("b", {"prompt": shared + "second question"}, max_tokens=12, **params)], RecordingCtx()
    )[0]
    assert cold.prefix_hit_tokens == 0
    shared_tokens = len(warm.tokenizer(shared).input_ids)
    assert hot.prefix_hit_tokens >= shared_tokens - 1
    assert hot.value["text"] == cold.value["text"]


def test_prefix_cache_stays_within_its_memory_bound(model_cache):
    adapter = GenerateAdapter(model_cache / "tiny" / "gpt2", CPU, {"prefix_cache_mib": 1})
    for i in range(40):
        adapter.run(
            [item(str(i), {"prompt": f"prompt number {i} " * 20}, max_tokens=1)], RecordingCtx()
        )
    assert 0 < adapter.prefix_cache.used_bytes <= 1024 * 1024
    assert len(adapter.prefix_cache) < 40


def test_generate_stop_string_max_tokens_and_seed(model_cache):
    adapter = gen(model_cache)
    free = adapter.run(
        [item("f", {"prompt": PROMPTS[0]}, max_tokens=10, temperature=1.0, seed=1)], RecordingCtx()
    )[0]
    text = free.value["text"]
    assert free.output_tokens == 10
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    cut = adapter.run(
        [item("s", {"prompt": PROMPTS[0]}, max_tokens=10, temperature=1.0, seed=1, stop=(stop,))],
        RecordingCtx(),
    )[0]
    assert cut.value["text"] == text[: text.find(stop)]
    assert cut.output_tokens < 10
    again = gen(model_cache).run(
        [item("f", {"prompt": PROMPTS[0]}, max_tokens=10, temperature=1.0, seed=1)], RecordingCtx()
    )[0]
    other = gen(model_cache).run(
        [item("f", {"prompt": PROMPTS[0]}, max_tokens=10, temperature=1.0, seed=2)], RecordingCtx()
    )[0]
    assert again.value["text"] == text
    assert other.value["text"] != text


def test_streamed_deltas_rebuild_the_text_without_the_stop_string(model_cache):
    adapter = gen(model_cache)
    base = adapter.run(
        [item("x", {"prompt": PROMPTS[1]}, max_tokens=12, temperature=1.0, seed=5)], RecordingCtx()
    )[0]
    stop = base.value["text"][-3:]
    ctx = RecordingCtx()
    out = adapter.run(
        [
            item(
                "x",
                {"prompt": PROMPTS[1]},
                max_tokens=12,
                temperature=1.0,
                seed=5,
                stop=(stop,),
                stream=True,
            )
        ],
        ctx,
    )[0]
    pieces = ctx.deltas["x"]
    assert "".join(t for _, t in pieces) == out.value["text"]
    assert [i for i, _ in pieces] == sorted(i for i, _ in pieces)
    assert stop not in "".join(t for _, t in pieces)


def test_missing_input_fails_only_that_item(model_cache):
    adapter = gen(model_cache)
    outs = adapter.run(
        [item("ok", {"prompt": "hi"}, max_tokens=2), item("bad", {"text": "hi"})], RecordingCtx()
    )
    assert outs[0].error is None and outs[0].output_tokens == 2
    assert "prompt" in outs[1].error


def test_rerank_and_classify_shapes(model_cache):
    rerank = build_adapter(ModelRef("r", "rerank", "tiny", "bert"), CPU, model_cache)
    docs = ["alpha", "beta gamma", "delta"]
    out = rerank.run([item("q", {"query": "alpha?", "documents": docs}, top_k=2)], RecordingCtx())[
        0
    ]
    scores = out.value["scores"]
    assert len(scores) == 3 and out.item_count == 3
    assert out.value["documents"] == [
        docs[i] for i in sorted(range(3), key=lambda i: -scores[i])[:2]
    ]
    cls = build_adapter(ModelRef("c", "classify", "tiny", "bert-cls"), CPU, model_cache)
    res = cls.run([item("t", {"text": "my invoice is wrong"})], RecordingCtx())[0]
    assert res.label in {"billing", "technical", "other"}
    assert abs(sum(res.value["probs"].values()) - 1.0) < 1e-5


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("My INVOICE is wrong", "billing"),
        ("the app crashes on start", "technical"),
        ("hello", "other"),
    ],
)
def test_router_picks_label_by_keywords(text, label):
    rules = {
        "rules": [["billing", ["invoice", "refund"]], ["technical", ["crash", "error"]]],
        "default": "other",
    }
    router = build_adapter(
        ModelRef("rt", "router", "tool", options=rules), CPU, sources.DEFAULT_CACHE_DIR
    )
    assert router.run([item("x", {"text": text})], RecordingCtx())[0].label == label


def test_minilm_similar_sentences_score_higher_and_search_finds_them():
    embed = build_adapter(ModelRef("m", "embed", "minilm"), CPU, sources.DEFAULT_CACHE_DIR)
    vecs, _ = embed.encode(
        [
            "A cat sits on the mat.",
            "A kitten is resting on a rug.",
            "Stock markets fell sharply today.",
        ]
    )
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2]) + 0.2
    docs = [
        "Paris is the capital of France.",
        "Bananas are yellow fruit.",
        "The GPU has 80 GB of memory.",
    ]
    search = build_adapter(
        ModelRef("vs", "vector_search", "tool", options={"documents": docs}),
        CPU,
        sources.DEFAULT_CACHE_DIR,
    )
    out = search.run(
        [item("q", {"query": "Which city is France's capital?"}, top_k=2)], RecordingCtx()
    )[0]
    assert out.value["documents"][0] == docs[0]
    assert out.value["scores"][0] > out.value["scores"][1]


@pytest.mark.parametrize("params", [dict(temperature=0.0), dict(temperature=1.0, seed=11)])
def test_fused_prefill_mixing_cache_hits_and_misses_matches_cold_single_runs(model_cache, params):
    shared = "System: you are a terse assistant that answers questions.\n"
    # (prompt, max_tokens): a cache hit, two misses of different lengths, a second hit that
    # stops early (its row leaves the decode batch while the others go on)
    cases = [
        (shared + "what is the capital of France?", 24),
        ("the quick brown fox", 20),
        ("Legato serves workflows of embedding, search and generation models " * 3, 24),
        (shared + "name a colour", 3),
    ]
    warm = gen(model_cache)
    warm.run([item("w", {"prompt": shared + "warm up"}, max_tokens=1)], RecordingCtx())
    batched = warm.run(
        [item(str(i), {"prompt": p}, max_tokens=m, **params) for i, (p, m) in enumerate(cases)],
        RecordingCtx(),
    )
    cold = [
        gen(model_cache).run([item(str(i), {"prompt": p}, max_tokens=m, **params)], RecordingCtx())[
            0
        ]
        for i, (p, m) in enumerate(cases)
    ]
    assert [b.value["text"] for b in batched] == [c.value["text"] for c in cold]
    assert [b.output_tokens for b in batched] == [c.output_tokens for c in cold]
    hits = [b.prefix_hit_tokens for b in batched]
    assert hits[0] > 0 and hits[3] > 0 and hits[1] == 0 and hits[2] == 0


def test_fused_prefill_logits_match_single_prompt_logits(model_cache):
    """White-box: the tiny random model's text is insensitive to small errors, so compare the
    first-token logits of every row of a fused prefill (hits and misses mixed) with each
    prompt's own cold prefill."""
    from control.executor.adapters.generate import _Seq

    shared = "System: you are a terse assistant that answers questions.\n"
    prompts = [shared + "first?", "short", "a much longer prompt " * 6, shared + "second one?"]

    def seqs(adapter, texts):
        return [_Seq(adapter.tokenizer(t).input_ids, GenParams(), torch.Generator()) for t in texts]

    warm = gen(model_cache)
    warm._prefill(seqs(warm, [shared + "warm up"]))
    fused = seqs(warm, prompts)
    warm._prefill(fused)
    assert fused[0].hit > 0 and fused[3].hit > 0 and fused[1].hit == 0
    for prompt, row in zip(prompts, fused, strict=True):
        alone = seqs(gen(model_cache), [prompt])
        gen(model_cache)._prefill(alone)
        assert torch.allclose(row.next_logits, alone[0].next_logits, atol=1e-4)
