"""The profiler measures real latency rows with the workers' adapter code."""

from __future__ import annotations

import pytest

from control.executor.base import ModelRef
from control.executor.profile import profile_model


@pytest.mark.parametrize(
    ("ref", "phases"),
    [
        (ModelRef("tiny-bert", "embed", "tiny", "bert"), {"forward"}),
        (ModelRef("tiny-gpt2", "generate", "tiny", "gpt2"), {"prefill", "decode_per_token"}),
    ],
)
def test_profile_rows_cover_the_grid_with_measured_latency(model_cache, ref, phases):
    rows = profile_model(
        ref,
        "cpu",
        batch_sizes=(1, 4),
        token_lengths=(8, 32),
        decode_tokens=4,
        repeats=1,
        cache_dir=model_cache,
    )
    assert {(r.batch_size, r.phase) for r in rows} == {(b, p) for b in (1, 4) for p in phases}
    assert len(rows) == 2 * 2 * len(phases)
    assert all(r.device_type == "cpu" and r.model == ref.name for r in rows)
    assert all(r.latency_us > 0 for r in rows)
    for wanted in (8, 32):
        measured = {r.input_tokens for r in rows if abs(r.input_tokens - wanted) <= wanted // 2}
        assert measured and max(measured) <= wanted
