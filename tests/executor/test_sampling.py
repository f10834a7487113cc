"""``temperature`` and ``top_p`` are honoured by the generate adapter (issue 24, item 1):
temperature 0 is greedy, a ``top_p`` small enough to keep one token is greedy at any
temperature and seed, and sampling at a high temperature follows its seed."""

from __future__ import annotations

import torch

from control.executor.adapters.generate import GenerateAdapter
from tests.executor.test_adapters import RecordingCtx, item

PROMPT = "the quick brown fox jumps over"


def _text(adapter: GenerateAdapter, **params) -> str:
    (out,) = adapter.run([item("x", {"prompt": PROMPT}, max_tokens=12, **params)], RecordingCtx())
    return out.value["text"]


def test_temperature_zero_and_a_tiny_top_p_are_greedy_and_sampling_follows_its_seed(model_cache):
    adapter = GenerateAdapter(model_cache / "tiny" / "gpt2", torch.device("cpu"), {})
    greedy = _text(adapter, temperature=0.0, seed=1)
    assert _text(adapter, temperature=0.0, seed=2) == greedy
    assert all(_text(adapter, temperature=1.5, top_p=1e-6, seed=s) == greedy for s in (1, 2, 3))
    sampled = {s: _text(adapter, temperature=5.0, top_p=1.0, seed=s) for s in (1, 2, 3, 4)}
    assert _text(adapter, temperature=5.0, top_p=1.0, seed=1) == sampled[1]  # repeatable
    assert len(set(sampled.values())) > 1 and any(t != greedy for t in sampled.values())
