"""Chunked prefill in the generate adapter (model option ``prefill_chunk_tokens``).

Chunking must change WHEN prompt tokens are computed, never WHAT any row computes: every output
is compared with the same run without chunks (a fresh adapter, option off). It must also let
the running rows decode while a joiner's chunks are prefilled, one step between two chunks.
"""

from __future__ import annotations

import math

import pytest
import torch

from control.executor.adapters import build_adapter, generate_chunks, generate_join
from control.executor.adapters.generate import GenerateAdapter, _Seq
from control.executor.protocol import ExecutorError, GenParams, ModelRef
from tests.executor.test_adapters import RecordingCtx, item
from tests.executor.test_continuous_batching import LONG, PARAMS, SHARED, Group, run_joined, texts

CPU = torch.device("cpu")
LONGER = LONG * 3  # about 90 tokens of the tiny tokenizer
CHUNKS = [1, 3, 7, 10_000]  # 10_000: larger than any prompt here (one chunk)


def gen(model_cache, chunk: int = 0, **options) -> GenerateAdapter:
    return GenerateAdapter(
        model_cache / "tiny" / "gpt2", CPU, dict(options, prefill_chunk_tokens=chunk)
    )


def ids(adapter, prompt: str) -> tuple[int, ...]:
    return tuple(adapter.tokenizer(adapter.compose(item("x", {"prompt": prompt}))).input_ids)


def n_tokens(adapter, prompt: str) -> int:
    return len(ids(adapter, prompt))


@pytest.fixture
def trace(monkeypatch) -> list:
    """Records every prefill chunk forward ("chunk", its first row's prompt ids, suffix
    columns computed after it) and every decode step ("step", tokens generated so far per row)."""
    log: list = []
    advance, step = generate_chunks.GroupPrefill.advance, generate_join.DecodeLoop.step

    def chunk(prefill):
        advance(prefill)
        log.append(("chunk", tuple(prefill.seqs[0].prompt_ids), prefill.computed))

    def decode(loop):
        step(loop)
        log.append(("step", [len(row.seq.generated) for row in loop.rows]))

    monkeypatch.setattr(generate_chunks.GroupPrefill, "advance", chunk)
    monkeypatch.setattr(generate_join.DecodeLoop, "step", decode)
    return log


@pytest.mark.parametrize("bad", [-1, 2.5, "64", True, [8]])
def test_a_bad_chunk_option_is_refused_by_name(model_cache, bad):
    ref = ModelRef("g", "generate", "tiny", "gpt2", options={"prefill_chunk_tokens": bad})
    with pytest.raises(ExecutorError, match="prefill_chunk_tokens"):
        build_adapter(ref, CPU, model_cache)


def test_absent_or_zero_option_means_no_chunks(model_cache, trace):
    assert GenerateAdapter(model_cache / "tiny" / "gpt2", CPU, {}).chunk_tokens == 0
    adapter = gen(model_cache, 0)
    adapter.run([item("a", {"prompt": LONG}, max_tokens=2)], RecordingCtx())
    assert [e for e in trace if e[0] == "chunk"] == [
        ("chunk", ids(adapter, LONG), len(ids(adapter, LONG)))
    ]


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_a_group_alone_computes_the_same_in_chunks(model_cache, trace, chunk, params):
    prompts = [LONG, "hi", "Question: what is the capital of France?"]  # different lengths
    items = [item(str(i), {"prompt": p}, max_tokens=10, **params) for i, p in enumerate(prompts)]
    whole = gen(model_cache).run(items, RecordingCtx())
    trace.clear()
    adapter = gen(model_cache, chunk)
    assert texts(adapter.run(items, RecordingCtx())) == texts(whole)
    # the first group is chunked too, back to back: ceil(longest / columns per chunk) forwards
    cols = max(1, chunk // len(items))
    longest = max(n_tokens(adapter, p) for p in prompts)
    chunks = [e for e in trace if e[0] == "chunk"]
    assert len(chunks) == math.ceil(longest / cols)
    assert trace.index(chunks[-1]) < trace.index(next(e for e in trace if e[0] == "step"))


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_chunked_first_token_logits_and_cache_match_the_fused_prefill(model_cache, chunk):
    """White-box: text from a tiny random model hides small errors, so compare every row's
    first-token logits and the group's whole KV cache and mask (hits and misses mixed)."""
    prompts = [SHARED + "first?", "short", "a much longer prompt " * 6, SHARED + "second one?"]

    def prefill(adapter):
        adapter._prefill(seqs(adapter, [SHARED + "warm up"]))  # a prefix for rows 0 and 3
        rows = seqs(adapter, prompts)
        cache, mask = adapter._prefill(rows)
        return rows, cache, mask

    def seqs(adapter, texts):
        return [_Seq(adapter.tokenizer(t).input_ids, GenParams(), torch.Generator()) for t in texts]

    rows, cache, mask = prefill(gen(model_cache, chunk))
    ref_rows, ref_cache, ref_mask = prefill(gen(model_cache))
    assert rows[0].hit > 0 and rows[3].hit > 0 and rows[1].hit == 0
    assert [r.hit for r in rows] == [r.hit for r in ref_rows]
    assert torch.equal(mask, ref_mask)
    for row, ref in zip(rows, ref_rows, strict=True):
        assert torch.allclose(row.next_logits, ref.next_logits, atol=1e-5)
    for layer, ref in zip(cache.layers, ref_cache.layers, strict=True):
        real = ref_mask.bool()[:, None, :, None]  # padding columns hold anything
        assert torch.allclose(layer.keys * real, ref.keys * real, atol=1e-5)
        assert torch.allclose(layer.values * real, ref.values * real, atol=1e-5)


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_joiners_compute_the_same_in_chunks(model_cache, chunk, params):
    a = [item("a0", {"prompt": "the quick brown fox"}, max_tokens=30, **params),
         item("a1", {"prompt": "Question: what is it?"}, max_tokens=6, **params)]  # fmt: skip
    b = [item("b0", {"prompt": LONG}, max_tokens=10, **params),
         item("b1", {"prompt": "hi"}, max_tokens=16, **params)]  # fmt: skip
    c = [item("c0", {"prompt": "Paris"}, max_tokens=8, **params)]
    outputs = {}
    for size in (0, chunk):
        ga, gb, gc = Group("a", a, []), Group("b", b, []), Group("c", c, [])
        run_joined(gen(model_cache, size), ga, {2: [gb, gc]}, [])  # c queues behind b
        outputs[size] = [texts(g.outputs) for g in (ga, gb, gc)]
    assert outputs[chunk] == outputs[0]
    assert all(n > 1 for group in outputs[chunk] for _, n in group)


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_a_chunked_joiner_reuses_the_prefix_cached_by_the_running_batch(
    model_cache, trace, chunk, params
):
    first = Group("a", [item("a", {"prompt": SHARED + "first question"}, max_tokens=20)], [])
    b = [item("b", {"prompt": SHARED + "2nd"}, max_tokens=12, **params)]
    joiner = Group("b", b, [])
    adapter = gen(model_cache, chunk)
    run_joined(adapter, first, {2: [joiner]}, [])
    joiner_chunks = [e for e in trace if e[0] == "chunk" and e[1] == ids(adapter, SHARED + "2nd")]
    cold = gen(model_cache).run(b, RecordingCtx())[0]
    hit = joiner.outputs[0].prefix_hit_tokens
    assert hit >= n_tokens(adapter, SHARED) - 1 and cold.prefix_hit_tokens == 0
    assert texts(joiner.outputs) == texts([cold])
    # only the suffix was computed, in chunks of max(1, chunk // 1) columns
    suffix = n_tokens(adapter, SHARED + "2nd") - hit
    assert len(joiner_chunks) == math.ceil(suffix / chunk)


@pytest.mark.parametrize("chunk", [4, 16])
def test_running_rows_decode_between_a_joiners_chunks(model_cache, trace, chunk):
    adapter = gen(model_cache, chunk)
    long_ids = ids(adapter, LONGER)
    first = Group("a", [item("a", {"prompt": "the quick brown fox"}, max_tokens=60)], [])
    joiner = Group("b", [item("b", {"prompt": LONGER}, max_tokens=4)], [])
    run_joined(adapter, first, {1: [joiner]}, [])
    mine = [i for i, e in enumerate(trace) if e[0] == "chunk" and e[1] == long_ids]
    assert len(mine) == math.ceil(len(long_ids) / chunk) > 2
    # between two chunks of the joiner: exactly one decode step, and the running row got a token
    for before, after in zip(mine, mine[1:], strict=False):
        steps = [e for e in trace[before + 1 : after] if e[0] == "step"]
        assert len(steps) == 1 and len(steps[0][1]) == 1  # only the running row decodes
    made = [e[1][0] for e in trace[mine[0] : mine[-1]] if e[0] == "step"]
    assert made == list(range(made[0], made[0] + len(mine) - 1))  # one token per step
    assert texts(joiner.outputs) == texts(gen(model_cache).run(joiner.items, RecordingCtx()))

    trace.clear()  # without chunks, the running row stalls for the whole prompt
    run_joined(
        gen(model_cache), Group("a", first.items, []), {1: [Group("b", joiner.items, [])]}, []
    )
    chunks = [e for e in trace if e[0] == "chunk"]
    assert chunks[1] == ("chunk", long_ids, len(long_ids))  # b's whole prompt in one forward
    assert [e[0] for e in trace[:4]] == ["chunk", "step", "chunk", "step"]


def test_a_joiner_whose_chunk_fails_fails_alone(model_cache, monkeypatch):
    advance = generate_chunks.GroupPrefill.advance

    def flaky(prefill):
        if tuple(prefill.seqs[0].prompt_ids) == bad_ids and prefill.computed >= 6:
            raise RuntimeError("chunk exploded")  # part-way: some chunks already ran
        advance(prefill)

    monkeypatch.setattr(generate_chunks.GroupPrefill, "advance", flaky)
    adapter = gen(model_cache, 3)
    bad_ids = ids(adapter, LONG)
    a = [item("a", {"prompt": "the quick brown fox"}, max_tokens=16)]
    log: list = []
    first, bad = Group("a", a, log), Group("bad", [item("bad", {"prompt": LONG})], log)
    after = Group("c", [item("c", {"prompt": "Paris"}, max_tokens=8)], log)
    missing = Group("m", [item("m", {"text": "no prompt"})], log)
    run_joined(adapter, first, {2: [bad, after, missing]}, log)
    assert bad.outputs is None and "chunk exploded" in bad.error
    assert texts(first.outputs) == texts(gen(model_cache).run(a, RecordingCtx()))
    assert texts(after.outputs) == texts(gen(model_cache).run(after.items, RecordingCtx()))
    assert "prompt" in missing.outputs[0].error
    assert adapter.prefix_cache.lookup([*bad_ids, 0])[0] == 0  # no partial prompt was stored


def test_a_prompt_too_long_for_the_model_fails_alone_in_chunks(model_cache):
    a = [item("a", {"prompt": "the quick brown fox"}, max_tokens=12)]
    first = Group("a", a, [])
    too_long = Group("bad", [item("bad", {"prompt": "word " * 700}, max_tokens=4)], [])
    run_joined(gen(model_cache, 128), first, {1: [too_long]}, [])
    # issue 22: refused before its prefill, as its own item's bad input (the group is reported)
    (out,) = too_long.outputs
    assert out.field == "prompt" and "at most 512" in out.error
    assert texts(first.outputs) == texts(gen(model_cache).run(a, RecordingCtx()))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("params", PARAMS)
def test_chunked_joiners_on_cuda_compute_the_same(model_cache, params):
    cuda = torch.device("cuda:0")
    a = [item("a0", {"prompt": "the quick brown fox"}, max_tokens=30, **params)]
    b = [item("b0", {"prompt": LONGER}, max_tokens=10, **params),
         item("b1", {"prompt": SHARED + "hi"}, max_tokens=12, **params)]  # fmt: skip
    c = [item("c0", {"prompt": SHARED + "Paris"}, max_tokens=8, **params)]
    outputs = {}
    for size in (0, 5):
        adapter = GenerateAdapter(
            model_cache / "tiny" / "gpt2", cuda, {"prefill_chunk_tokens": size}
        )
        ga, gb, gc = Group("a", a, []), Group("b", b, []), Group("c", c, [])
        run_joined(adapter, ga, {2: [gb, gc]}, [])
        outputs[size] = [texts(g.outputs) for g in (ga, gb, gc)]
        assert gc.outputs[0].prefix_hit_tokens > 0  # b's prompt was cached before c started
    assert outputs[5] == outputs[0]
