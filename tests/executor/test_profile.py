"""The profiler measures real latency rows with the workers' adapter code."""

from __future__ import annotations

import pytest

from control.executor.profile import profile_model
from control.executor.protocol import ModelRef


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


def test_profile_rows_stored_by_the_cli_feed_the_twins_latency_model(model_cache, tmp_path):
    """``legato profile``'s storage step: measured generate rows become forward points and a
    decode row that ``load_fleet_state`` hands the twin (what the twin predicts from them
    must be the measured figures, not the fallback profile)."""
    from control.commands.profile import _store
    from control.config import Settings
    from control.core.latency import TableLatencyModel
    from control.executor.protocol import DeviceInfo
    from control.services import build_services
    from control.services.fleet_state import load_fleet_state
    from control.services.seed import seed_demo
    from db.session import make_engine, make_session_factory, session_scope

    url = f"sqlite:///{tmp_path / 'legato.db'}"
    seed_demo(
        url, Settings(var_dir=tmp_path), local_devices=[DeviceInfo("cpu:0", "cpu", 0, 4096, 0)]
    )
    factory = make_session_factory(make_engine(url))
    services = build_services(factory)
    model_id = next(m.id for m in services.models.list() if m.name == "smollm2-135m")
    rows = profile_model(ModelRef("tiny-gpt2", "generate", "tiny", "gpt2"), "cpu", (1, 4), (8,),
                         decode_tokens=3, repeats=1, cache_dir=model_cache)  # fmt: skip
    assert _store(services, model_id, rows) == 2  # one point per (batch size, tokens)
    with session_scope(factory) as session:
        fleet = load_fleet_state(session)
    latency = fleet.latency_model()
    prefill = {r.batch_size: r for r in rows if r.phase == "prefill"}
    decode = {r.batch_size: r.latency_us for r in rows if r.phase == "decode_per_token"}
    key = "smollm2-135m:1"
    for size, row in prefill.items():
        assert latency.forward_us(key, "cpu", size, row.input_tokens) == row.latency_us
    # decode per token: batch 1 as measured; batch 4 as measured too unless the noisy figure
    # came out faster than batch 1 (the fit never lets latency shrink as the batch grows)
    assert latency.decode_us(key, "cpu", 1, 1) == pytest.approx(decode[1], abs=4)
    assert latency.decode_us(key, "cpu", 4, 1) == pytest.approx(max(decode[1], decode[4]), abs=4)
    assert latency.decode_us(key, "cpu", 1, 1) != TableLatencyModel().decode_us(key, "cpu", 1, 1)
