"""Continuous batching in the generate adapter: batches join a running decode loop.

Every output of a joined loop is compared with the same batch run alone on a fresh adapter
(no joins, no prefix cache warmed by the others): joining must not change what any row
computes. Joins are scheduled by step boundary (0: right after the first batch's prefill).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from control.executor.adapters.generate import GenerateAdapter
from tests.executor.test_adapters import RecordingCtx, item

CPU = torch.device("cpu")
SHARED = "System: you are a terse assistant that answers questions.\n"
LONG = "Legato serves workflows of embedding, search and generation models " * 3


def gen(model_cache, **options) -> GenerateAdapter:
    return GenerateAdapter(model_cache / "tiny" / "gpt2", CPU, options)


class Group:
    """A BatchGroup that records when it was reported, in a log shared by the test."""

    def __init__(self, name: str, items: list, log: list) -> None:
        self.name, self.items, self.log = name, items, log
        self.ctx = RecordingCtx()
        self.outputs: list | None = None
        self.error: str | None = None

    def finish(self, outputs: list) -> None:
        assert self.outputs is None and self.error is None, "reported twice"
        self.outputs = outputs
        self.log.append(("finish", self.name))

    def fail(self, reason: str) -> None:
        assert self.outputs is None and self.error is None, "reported twice"
        self.error = reason
        self.log.append(("fail", self.name))


def run_joined(adapter, first: Group, plan: dict[int, list[Group]], log: list) -> None:
    """Run ``first``; at step boundary k, the groups ``plan[k]`` join."""
    boundary = itertools.count()

    def joins():
        k = next(boundary)
        log.append(("boundary", k))
        return plan.get(k, [])

    adapter.run_continuous(first, joins)


def alone(model_cache, items: list) -> list:
    return gen(model_cache).run(items, RecordingCtx())


def texts(outputs) -> list[tuple[str, int]]:
    return [(o.value["text"], o.output_tokens) for o in outputs]


PARAMS = [dict(temperature=0.0), dict(temperature=0.9, top_p=0.9, seed=7)]


@pytest.mark.parametrize("params", PARAMS)
def test_joined_batches_compute_exactly_what_they_compute_alone(model_cache, params):
    # a: the running batch (two rows, different lengths); b joins mid-decode with a prompt
    # longer than the running cache (the running rows get left-padded); c joins later with a
    # short one (c gets left-padded), while a row of a has already left the batch.
    a = [item("a0", {"prompt": "the quick brown fox"}, max_tokens=24, **params),
         item("a1", {"prompt": "Question: what is it?"}, max_tokens=5, **params)]  # fmt: skip
    b = [item("b0", {"prompt": LONG}, max_tokens=10, **params),
         item("b1", {"prompt": "hi"}, max_tokens=16, **params)]  # fmt: skip
    c = [item("c0", {"prompt": "Paris"}, max_tokens=8, **params)]
    log: list = []
    ga, gb, gc = Group("a", a, log), Group("b", b, log), Group("c", c, log)
    run_joined(gen(model_cache), ga, {3: [gb], 7: [gc]}, log)
    assert texts(ga.outputs) == texts(alone(model_cache, a))
    assert texts(gb.outputs) == texts(alone(model_cache, b))
    assert texts(gc.outputs) == texts(alone(model_cache, c))
    assert all(o.output_tokens > 1 for o in ga.outputs + gb.outputs + gc.outputs)


@torch.inference_mode()
def no_cache_reference(adapter, prompt: str, max_tokens: int) -> tuple[list[int], list]:
    """Greedy tokens and their logits by recomputing the whole sequence at every step: no KV
    cache, no padding, no batch. An oracle independent of the adapter's decode loop."""
    ids = adapter.tokenizer(prompt).input_ids
    tokens, logits = [], []
    for _ in range(max_tokens):
        full = torch.tensor([ids + tokens], device=adapter.device)
        last = adapter.model(input_ids=full).logits[0, -1].float()
        logits.append(last)
        token = int(torch.argmax(last))
        if token == adapter.eos:
            break
        tokens.append(token)
    return tokens, logits


def test_joined_rows_match_a_no_cache_reference_token_by_token(model_cache, monkeypatch):
    """White-box: text from a tiny random model hides small errors, so compare the logits
    every row samples from, at every step, with a full recomputation of its sequence."""
    from control.executor.adapters import generate_join

    adapter = gen(model_cache)
    seen: dict[str, list[torch.Tensor]] = {}
    original = generate_join.DecodeLoop.step

    def recording_step(loop):
        original(loop)
        for row in loop.rows:
            seen.setdefault(row.prepared.item.idempotency_key, []).append(row.seq.next_logits)

    monkeypatch.setattr(generate_join.DecodeLoop, "step", recording_step)
    cases = {"a": ("the quick brown fox", 12), "b": (LONG, 6), "c": ("hi", 9)}
    groups = {
        k: Group(k, [item(k, {"prompt": p}, max_tokens=m)], []) for k, (p, m) in cases.items()
    }
    run_joined(adapter, groups["a"], {2: [groups["b"]], 4: [groups["c"]]}, [])
    for key, (prompt, max_tokens) in cases.items():
        tokens, logits = no_cache_reference(adapter, prompt, max_tokens)
        assert groups[key].outputs[0].value["text"] == adapter.tokenizer.decode(tokens)
        assert len(seen[key]) == len(logits) - 1 > 0  # the first token comes from the prefill
        for mixed, full in zip(seen[key], logits[1:], strict=True):
            assert torch.allclose(mixed, full, atol=1e-4)


def test_each_batch_reports_when_its_own_items_are_done(model_cache):
    log: list = []
    long_a = Group("a", [item("a", {"prompt": "the quick brown fox"}, max_tokens=30)], log)
    short_b = Group("b", [item("b", {"prompt": "Paris"}, max_tokens=3)], log)
    run_joined(gen(model_cache), long_a, {1: [short_b]}, log)
    assert [e for e in log if e[0] == "finish"] == [("finish", "b"), ("finish", "a")]
    # b went out while a still decoded: many step boundaries came after b's report
    after_b = log[log.index(("finish", "b")) :]
    assert sum(1 for e in after_b if e[0] == "boundary") >= 20

    log = []
    short_a = Group("a", [item("a", {"prompt": "the quick brown fox"}, max_tokens=4)], log)
    long_b = Group("b", [item("b", {"prompt": "Paris"}, max_tokens=20)], log)
    run_joined(gen(model_cache), short_a, {1: [long_b]}, log)
    assert [e for e in log if e[0] == "finish"] == [("finish", "a"), ("finish", "b")]
    assert long_b.outputs[0].output_tokens == alone(model_cache, long_b.items)[0].output_tokens


@pytest.mark.parametrize("params", PARAMS)
def test_joiner_reuses_the_prefix_cached_by_the_running_batch(model_cache, params):
    log: list = []
    first = Group("a", [item("a", {"prompt": SHARED + "first question"}, max_tokens=10)], log)
    b = [item("b", {"prompt": SHARED + "second question"}, max_tokens=12, **params)]
    joiner = Group("b", b, log)
    run_joined(gen(model_cache), first, {2: [joiner]}, log)
    cold = alone(model_cache, b)[0]
    assert cold.prefix_hit_tokens == 0
    assert (
        joiner.outputs[0].prefix_hit_tokens >= len(gen(model_cache).tokenizer(SHARED).input_ids) - 1
    )
    assert texts(joiner.outputs) == texts([cold])


def test_joined_stream_rebuilds_its_text_and_stops_at_its_stop_string(model_cache):
    params = dict(max_tokens=14, temperature=1.0, seed=5)
    free = alone(model_cache, [item("x", {"prompt": "Paris"}, **params)])[0].value["text"]
    stop = free[len(free) // 2 : len(free) // 2 + 2]
    joined_item = item("x", {"prompt": "Paris"}, stop=(stop,), stream=True, **params)
    log: list = []
    first = Group("a", [item("a", {"prompt": "the quick brown fox"}, max_tokens=30)], log)
    joiner = Group("b", [joined_item], log)
    run_joined(gen(model_cache), first, {4: [joiner]}, log)
    out = joiner.outputs[0]
    assert out.value["text"] == free[: free.find(stop)]
    assert texts([out]) == texts(alone(model_cache, [joined_item]))
    pieces = joiner.ctx.deltas["x"]
    assert "".join(t for _, t in pieces) == out.value["text"]
    assert [i for i, _ in pieces] == sorted(i for i, _ in pieces)
    assert "a" not in joiner.ctx.deltas and not first.ctx.deltas  # deltas go to their own batch


def test_a_joiner_that_fails_fails_alone(model_cache):
    log: list = []
    a = [item("a", {"prompt": "the quick brown fox"}, max_tokens=12)]
    first = Group("a", a, log)
    too_long = Group("bad", [item("bad", {"prompt": "word " * 700}, max_tokens=4)], log)
    missing = Group("m", [item("m", {"text": "no prompt"}), item("ok", {"prompt": "hi"})], log)
    adapter = gen(model_cache)
    # Without the context check (which makes a too-long prompt a bad input of its own item,
    # see test_bad_input), the prompt reaches the forward pass: its joiner's prefill raises.
    adapter.context = None
    run_joined(adapter, first, {2: [too_long, missing]}, log)
    assert too_long.error is not None and too_long.outputs is None
    assert texts(first.outputs) == texts(alone(model_cache, a))
    assert "prompt" in missing.outputs[0].error and missing.outputs[1].error is None
    assert texts(missing.outputs[1:]) == texts(alone(model_cache, [missing.items[1]]))


def test_cache_stays_as_wide_as_its_live_rows_need(model_cache):
    """Rows that left take their columns with them: a long-lived loop does not keep them."""
    from control.executor.adapters.generate_join import DecodeLoop

    adapter = gen(model_cache)
    loop = DecodeLoop(adapter)
    log: list = []
    loop.add(Group("long", [item("l", {"prompt": LONG}, max_tokens=3)], log))
    loop.add(Group("short", [item("s", {"prompt": "hi"}, max_tokens=20)], log))
    wide = loop.mask.shape[1]
    while loop.live:
        loop.report_finished()
        loop.step()
    loop.report_finished()
    short_tokens = len(adapter.tokenizer("hi").input_ids) + 20
    assert wide > short_tokens  # the long prompt set the width at first
    assert loop.mask.shape[1] <= short_tokens  # then its columns went with it
    assert loop.cache.layers[0].keys.shape[2] == loop.mask.shape[1]
