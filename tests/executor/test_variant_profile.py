"""``legato profile --variant``: a variant's latency rows (variant=<precision>), memory, load
time and quality are measured and stored beside the base's rows, and a rerun replaces them."""

from __future__ import annotations

import pytest
import typer

from control.executor.protocol import ExecutorError, ModelRef
from control.executor.variant_profile import profile_variants

BERT = ModelRef("tiny-bert", "embed", "tiny", "bert")


def test_profile_variants_measures_memory_load_quality_and_rows(model_cache):
    found = profile_variants(BERT, ["fp32", "int8"], "cpu", (1, 2), (8,), repeats=1,
                             cache_dir=model_cache)  # fmt: skip
    fp32, int8 = found
    assert fp32.quality["score"] == pytest.approx(1.0, abs=1e-5)
    assert int8.quality["metric"] == "cosine" and 0.5 < int8.quality["score"] <= 1.0
    assert int8.load_time_ms > 0 and int8.memory_mib >= 1
    assert {(r.batch_size, r.phase) for r in int8.rows} == {(1, "forward"), (2, "forward")}
    with pytest.raises(ExecutorError, match="CUDA"):
        profile_variants(BERT, ["int4"], "cpu", cache_dir=model_cache)


def test_the_cli_stores_variant_rows_and_the_measurement(model_cache, tmp_path):
    from control.commands.profile import _profile_variants, _store, _variants_of
    from control.config import Settings
    from control.executor.profile import profile_model
    from control.executor.protocol import DeviceInfo
    from control.services import build_services
    from control.services.seed import seed_demo
    from db.session import make_engine, make_session_factory

    url = f"sqlite:///{tmp_path / 'legato.db'}"
    settings = Settings(var_dir=tmp_path)
    seed_demo(url, settings, local_devices=[DeviceInfo("cpu:0", "cpu", 0, 4096, 0)])
    services = build_services(make_session_factory(make_engine(url)))
    model = next(m for m in services.models.list() if m.task == "embed")
    key = f"{model.name}:{model.version}"
    base_rows = profile_model(BERT, "cpu", (1,), (8,), repeats=1, cache_dir=model_cache)
    assert _store(services, model.id, base_rows) == 1
    services.variants.register("ops", model.id, "int8")
    with pytest.raises(typer.Exit):
        _variants_of(services, model.id, key, ["bf16"])  # not registered: refused by name
    for _ in range(2):  # a rerun replaces the variant's points, never adds more
        records = _variants_of(services, model.id, key, None)
        _profile_variants(services, settings, BERT, model.id, key, records, "cpu", [1, 2], [8],
                          1, model_cache)  # fmt: skip
    rows = services.latency_profiles.list(model_id=model.id)
    assert sorted((r.variant, r.batch_size) for r in rows) == [("", 1), ("int8", 1), ("int8", 2)]
    (variant,) = services.variants.of_model(model.id)
    assert variant.memory_mib >= 1 and variant.load_time_ms > 0
    assert variant.quality["metric"] == "cosine" and variant.quality_measured_at is not None
    assert (tmp_path / "profiles" / f"{key.replace(':', '_')}@int8.csv").exists()
