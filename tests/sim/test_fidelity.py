"""Fidelity check: the pieces (slice, summaries, the twin side) and one short real validation."""

from __future__ import annotations

import math

import pytest

from control.core.latency import LatencyRow
from control.services.fidelity import (
    MODEL_KEY,
    FidelityConfig,
    Side,
    compare_sides,
    fidelity_scenario,
    run_twin,
    slice_arrivals,
    summarize,
    text_of,
    validate_fidelity,
)

# A made-up forward table: 10 ms + 0.2 ms per padded token of the batch.
TABLE = tuple(
    LatencyRow(MODEL_KEY, "cpu", b, t, 10_000 + 200 * b * t) for b in (1, 2, 4, 8) for t in (8, 128)
)


def test_slice_scales_tokens_into_range_and_shortens_idle_gaps():
    cfg = FidelityConfig(max_requests=60, max_gap_s=0.5)
    reqs = slice_arrivals(fidelity_scenario(cfg, TABLE), cfg)
    assert len(reqs) == 60
    gaps = [b.at - a.at for a, b in zip(reqs, reqs[1:], strict=False)]
    assert min(gaps) >= 0 and max(gaps) <= 0.5 + 1e-9
    tokens = [a.request.prompt_tokens for a in reqs]
    assert min(tokens) >= cfg.min_tokens and max(tokens) <= cfg.max_tokens
    assert len(set(tokens)) > 5  # the slice keeps its mix of short and long prompts
    assert all(a.request.deadline is None for a in reqs)


def test_payload_text_has_the_requested_token_count():
    from transformers import AutoTokenizer

    from control.executor.sources import minilm_dir

    tok = AutoTokenizer.from_pretrained(minilm_dir())
    for n in (3, 8, 47, 128):
        assert len(tok(text_of(n)).input_ids) == n


@pytest.mark.parametrize(
    ("live", "twin", "expect"),
    [
        (Side(0.1, 0.4, 0.5, 10), Side(0.11, 0.36, 0.52, 10), (0.1, 0.1, 2.0)),
        (Side(0.2, 1.0, 0.9, 10), Side(0.1, 2.0, 0.8, 10), (0.5, 1.0, -10.0)),
    ],
)
def test_errors_are_relative_for_latency_and_points_for_slo(live, twin, expect):
    assert compare_sides(live, twin) == pytest.approx(expect)


def test_summary_counts_unfinished_requests_as_missing_the_slo():
    side = summarize({"a": 0.05, "b": 0.2, "c": 0.08}, total=4, slo_s=0.1)
    assert side.succeeded == 3 and side.slo_attainment == pytest.approx(0.5)
    assert side.p50_s == pytest.approx(0.08)


def test_twin_side_waits_out_table_plus_measured_overhead():
    cfg = FidelityConfig(max_requests=40, max_queue_delay_s=0.0)
    sc = fidelity_scenario(cfg, TABLE)
    reqs = slice_arrivals(sc, cfg)
    base = run_twin(sc, reqs, overhead_us=0)
    slower = run_twin(sc, reqs, overhead_us=20_000)
    assert set(base) == {a.request.request_id for a in reqs}
    first = reqs[0].request  # alone in the system: e2e is exactly its predicted batch
    assert base[first.request_id] == pytest.approx((10_000 + 200 * first.prompt_tokens) / 1e6)
    assert slower[first.request_id] == pytest.approx(base[first.request_id] + 0.02)
    assert all(slower[r] >= base[r] - 1e-9 for r in base)


@pytest.mark.slow
def test_short_validation_against_the_live_stack():
    """Real MiniLM on one CPU worker slot; the figures on a shared 2-core machine are noisy,
    so this asserts the check runs end to end and its figures are sane, not the 10% goal."""
    cfg = FidelityConfig(
        max_requests=30, calibration_requests=4, profile_repeats=1, slice_repeats=2,
        twin_draws=3, profile_batch_sizes=(1, 2, 4), profile_tokens=(8, 64, 128),
    )  # fmt: skip
    out = validate_fidelity(cfg)
    assert out["requests"] == 60 and out["rounds"] == 2  # the slice twice, ids per round
    assert out["live"]["succeeded"] == 60 and out["twin"]["succeeded"] == 60
    assert out["twin_draws"] in (1, 3)  # one replay when the blocks measured no scatter
    if out["worker_cpu_ms"]:  # where /proc keeps schedstat: the worker's time per phase
        assert set(out["worker_cpu_ms"]) == {"profile0", "slice1", "profile1", "slice2", "profile2"}
    assert out["overhead_us"] > 0 and out["profile_rows"] == 9
    for key in ("p50_error", "p99_error"):
        assert math.isfinite(out[key]) and 0 <= out[key] < 3
    assert -100 <= out["slo_attainment_error_pp"] <= 100
    assert 0 < out["twin"]["p50_s"] <= out["twin"]["p99_s"]
