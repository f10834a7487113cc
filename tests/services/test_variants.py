"""Registering, listing, retiring and measuring precision variants: audited, refused with the
field named, nothing written on a refusal."""

from __future__ import annotations

import pytest

from control.services.errors import DuplicateName, NotFound, ValidationError
from control.store import repositories as repo
from db.session import session_scope
from tests.services.builders import row_counts

QUALITY = {"metric": "cosine", "score": 0.98, "mean": 0.98, "min": 0.97, "inputs": 64}


def test_register_list_measure_retire_and_bring_back(services, world, clock):
    v = services.variants.register("ops", world.model, "int8")
    assert (v.precision, v.status, v.memory_mib, v.quality) == ("int8", "active", None, {})
    services.variants.register("ops", world.model, "bf16", cost_weight_milli=700)
    assert [x.precision for x in services.variants.of_model(world.model)] == ["int8", "bf16"]
    measured = services.variants.record_measurement(
        "legato-profile", v.id, memory_mib=56, load_time_ms=300, quality=QUALITY
    )
    assert (measured.memory_mib, measured.load_time_ms, measured.quality) == (56, 300, QUALITY)
    assert measured.quality_measured_at is not None and measured.quality_measured_at < clock()
    retired = services.variants.retire_precision("ops", world.model, "int8")
    assert retired.status == "retired"
    assert [x.precision for x in services.variants.of_model(world.model)] == ["bf16"]
    assert len(services.variants.of_model(world.model, include_retired=True)) == 2
    back = services.variants.register("ops", world.model, "int8")
    assert back.id == v.id and back.status == "active" and back.quality == QUALITY
    actions = [(a.action, a.actor) for a in services.audit.list(entity_type="model_variant")]
    assert actions == [("create", "ops"), ("create", "ops"), ("measure", "legato-profile"),
                       ("retire", "ops"), ("update", "ops")]  # fmt: skip


@pytest.mark.parametrize(
    ("precision", "why"),
    [("fp32", "base model's own"), ("fp8", "no maintained fp8"), ("q4_1", "GGUF"),
     ("int3", "must be one of")],
)  # fmt: skip
def test_refused_precisions_name_the_field_and_write_nothing(services, world, session_factory,
                                                             precision, why):  # fmt: skip
    before = row_counts(session_factory)
    with pytest.raises(ValidationError, match=why) as err:
        services.variants.register("ops", world.model, precision)
    assert err.value.field == "precision"
    assert row_counts(session_factory) == before


def test_a_duplicate_is_a_conflict_naming_precision(services, world, session_factory):
    services.variants.register("ops", world.model, "int8")
    before = row_counts(session_factory)
    with pytest.raises(DuplicateName) as err:
        services.variants.register("ops", world.model, "int8")
    assert list(err.value.key)[-1] == "precision"
    assert row_counts(session_factory) == before


def test_a_declared_model_may_register_any_precision(services, world, session_factory):
    with session_scope(session_factory) as s:
        repo.ModelRepository(s).update(world.model, weights_source="declared")
    assert services.variants.register("ops", world.model, "fp8").precision == "fp8"
    with pytest.raises(ValidationError, match="base model's own"):
        services.variants.register("ops", world.model, "fp32")


def test_unknown_model_and_variant_and_bad_quality(services, world):
    with pytest.raises(NotFound):
        services.variants.register("ops", 999, "int8")
    with pytest.raises(NotFound):
        services.variants.retire_precision("ops", world.model, "bf16")
    v = services.variants.register("ops", world.model, "int8")
    with pytest.raises(ValidationError) as err:
        services.variants.record_measurement("p", v.id, quality={**QUALITY, "score": 1.5})
    assert err.value.field == "quality.score"
    with pytest.raises(ValidationError) as err:
        services.variants.record_measurement("p", v.id, quality={"metric": "bleu", "score": 1})
    assert err.value.field == "quality.metric"
    with pytest.raises(ValidationError) as err:
        services.variants.record_measurement("p", v.id, memory_mib=0)
    assert err.value.field == "memory_mib"


def test_the_exact_floor_comes_from_the_settings_unless_given(services, monkeypatch):
    from control.config import get_settings
    from control.services.variants import VariantService

    assert services.variants.exact_floor() == get_settings().exact_quality_floor == 0.99
    assert VariantService(services.factory, exact_floor=0.5).exact_floor() == 0.5
