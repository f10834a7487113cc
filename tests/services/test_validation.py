"""Every validation rule refuses its bad value with an error naming the field and the value,
and a refused call writes nothing: no row, no audit record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control.services import Services
from control.services.analysis import SHIPPED_TRACES_DIR
from control.services.errors import (
    Conflict,
    DuplicateName,
    UnknownReference,
    ValidationError,
)
from tests.services.builders import ACTOR, World, row_counts

VALID: dict[str, Callable[[World], dict[str, Any]]] = {
    "nodes": lambda w: {"name": "n9"},
    "devices": lambda w: {"name": "gpu9", "node_id": w.node, "kind": "cuda", "memory_mib": 8192},
    "models": lambda w: {
        "name": "bge", "version": "1", "task": "rerank", "weights_source": "path",
        "weights_location": "/models/bge", "memory_mib": 400,
    },
    "latency_profiles": lambda w: {
        "model_id": w.model, "device_type": "cpu", "batch_size": 1, "num_tokens": 16,
        "latency_us": 14000,
    },
    "plans": lambda w: {"author": "alice"},
    "placements": lambda w: {"plan_id": w.plan, "model_id": w.model, "device_ids": [w.device]},
    "workflows": lambda w: {"name": "chat", "version": "1", "spec": {"nodes": []}},
    "cohorts": lambda w: {"name": "other"},
    "tenants": lambda w: {"name": "globex", "weight": 1},
    "quotas": lambda w: {"tenant_id": w.tenant, "resource": "requests_per_min", "nominal": 60},
    "headroom": lambda w: {
        "name": "r1", "selector": {"accelerator": "H100-80GB"}, "reserved_milli": 100,
        "allowed_classes": ["critical"],
    },
    "traces": lambda w: {"name": "t1", "format": "mooncake", "path": str(SHIPPED_TRACES_DIR / "t.jsonl")},
    "whatif": lambda w: {"scenario": {"seed": 1}},
}  # fmt: skip

MISSING = 987654  # an id no table holds

# (service, field, bad value, error type)
BAD: list[tuple[str, str, Any, type[Exception]]] = [
    ("nodes", "name", "", ValidationError),
    ("nodes", "name", "node-a", DuplicateName),
    ("nodes", "status", "gone", ValidationError),
    ("nodes", "labels", ["not", "a", "map"], ValidationError),
    ("devices", "memory_mib", 0, ValidationError),
    ("devices", "memory_mib", -512, ValidationError),
    ("devices", "memory_mib", "16GB", ValidationError),
    ("devices", "kind", "tpu", ValidationError),
    ("devices", "status", "broken", ValidationError),
    ("devices", "precisions", ["fp64"], ValidationError),
    ("devices", "node_id", MISSING, UnknownReference),
    ("devices", "name", "cpu0", DuplicateName),
    ("models", "memory_mib", 0, ValidationError),
    ("models", "task", "translate", ValidationError),
    ("models", "weights_source", "ftp", ValidationError),
    ("models", "max_batch_size", 0, ValidationError),
    ("models", "max_batch_tokens", 0, ValidationError),
    ("models", "tp_degree", 0, ValidationError),
    ("models", "cost_weight_milli", -1, ValidationError),
    ("models", "status", "deleted", ValidationError),
    ("latency_profiles", "model_id", MISSING, UnknownReference),
    ("latency_profiles", "batch_size", 0, ValidationError),
    ("latency_profiles", "latency_us", -1, ValidationError),
    ("plans", "status", "live", ValidationError),
    ("plans", "parent_id", MISSING, UnknownReference),
    ("placements", "device_ids", [MISSING], UnknownReference),
    ("placements", "device_ids", [], ValidationError),
    ("placements", "device_ids", ["cpu0"], ValidationError),
    ("placements", "model_id", MISSING, UnknownReference),
    ("placements", "plan_id", MISSING, UnknownReference),
    ("placements", "replicas", 0, ValidationError),
    ("placements", "pool", "warm", ValidationError),
    ("workflows", "name", "rag", DuplicateName),  # with version "1" from the world
    ("workflows", "status", "paused", ValidationError),
    ("workflows", "spec", "not an object", ValidationError),
    ("cohorts", "name", "research", DuplicateName),
    ("tenants", "weight", 0, ValidationError),
    ("tenants", "weight", -3, ValidationError),
    ("tenants", "weight", 1.5, ValidationError),
    ("tenants", "weight", True, ValidationError),
    ("tenants", "priority_class", "gold", ValidationError),
    ("tenants", "status", "deleted", ValidationError),
    ("tenants", "name", "acme", DuplicateName),
    ("tenants", "cohort_id", MISSING, UnknownReference),
    ("tenants", "colour", "red", ValidationError),
    ("quotas", "nominal", -1, ValidationError),
    ("quotas", "borrowing_limit", -1, ValidationError),
    ("quotas", "lending_limit", -5, ValidationError),
    ("quotas", "resource", "gpus", ValidationError),
    ("quotas", "period_s", 0, ValidationError),
    ("quotas", "tenant_id", MISSING, UnknownReference),
    ("headroom", "reserved_milli", 501, ValidationError),
    ("headroom", "reserved_milli", -1, ValidationError),
    ("headroom", "allowed_classes", ["gold"], ValidationError),
    ("headroom", "selector", {"colour": "red"}, ValidationError),
    ("headroom", "selector", {"device_ids": ["cpu0"]}, ValidationError),
    ("traces", "format", "csv", ValidationError),
    ("traces", "num_rows", -1, ValidationError),
    ("whatif", "progress_milli", 1001, ValidationError),
    ("whatif", "status", "done", ValidationError),
    ("whatif", "scenario", None, ValidationError),
]


@pytest.mark.parametrize(
    ("attr", "field", "bad", "error"), BAD, ids=[f"{a}.{f}={b!r}" for a, f, b, _ in BAD]
)
def test_create_refuses_bad_value_and_writes_nothing(
    services: Services, world: World, session_factory, attr: str, field: str, bad: Any, error
) -> None:
    values = VALID[attr](world)
    before = row_counts(session_factory)
    with pytest.raises(error) as caught:
        getattr(services, attr).create(ACTOR, **{**values, field: bad})
    assert field in str(caught.value)
    assert repr(bad) in str(caught.value)
    assert row_counts(session_factory) == before


@pytest.mark.parametrize(
    ("attr", "field", "bad", "error"),
    [
        ("tenants", "weight", 0, ValidationError),
        ("tenants", "name", "globex", DuplicateName),
        ("devices", "memory_mib", -1, ValidationError),
        ("devices", "node_id", MISSING, UnknownReference),
        ("quotas", "resource", "tokens_per_min", ValidationError),  # not updatable
        ("headroom", "reserved_milli", 600, ValidationError),
    ],
)
def test_update_refuses_bad_value_and_writes_nothing(
    services: Services, world: World, session_factory, attr: str, field: str, bad: Any, error
) -> None:
    service = getattr(services, attr)
    services.tenants.create(ACTOR, name="globex")
    target = service.create(ACTOR, **VALID[attr](world)) if attr != "tenants" else None
    target_id = world.tenant if target is None else target.id
    before = row_counts(session_factory)
    stored = service.get(target_id)
    with pytest.raises(error, match=field):
        service.update(ACTOR, target_id, **{field: bad})
    assert row_counts(session_factory) == before
    assert service.get(target_id) == stored


@pytest.mark.parametrize(
    ("attr", "values"),
    [
        ("quotas", lambda w: {"tenant_id": w.tenant, "resource": "tokens_per_min", "nominal": 1}),
        ("headroom", lambda w: VALID["headroom"](w)),
        ("traces", lambda w: VALID["traces"](w)),
        ("latency_profiles", lambda w: VALID["latency_profiles"](w)),
    ],
)
def test_second_row_with_the_same_unique_key_is_a_duplicate(
    services: Services, world: World, session_factory, attr: str, values
) -> None:
    service = getattr(services, attr)
    service.create(ACTOR, **values(world))
    before = row_counts(session_factory)
    with pytest.raises(DuplicateName, match="already exists"):
        service.create(ACTOR, **values(world))
    assert row_counts(session_factory) == before


def test_placement_group_must_match_the_tensor_parallel_degree(
    services: Services, world: World, session_factory
) -> None:
    model = services.models.create(ACTOR, **{**VALID["models"](world), "tp_degree": 2})
    before = row_counts(session_factory)
    with pytest.raises(ValidationError, match="tensor-parallel"):
        services.placements.create(
            ACTOR, plan_id=world.plan, model_id=model.id, device_ids=[world.device]
        )
    assert row_counts(session_factory) == before
    ok = services.placements.create(
        ACTOR, plan_id=world.plan, model_id=model.id, device_ids=[world.device, world.device2]
    )
    assert ok.device_ids == [world.device, world.device2]


def test_deleting_a_cohort_that_still_has_tenants_is_a_conflict(
    services: Services, world: World, session_factory
) -> None:
    before = row_counts(session_factory)
    with pytest.raises(Conflict):
        services.cohorts.delete(ACTOR, world.cohort)
    assert row_counts(session_factory) == before


def test_workflow_validator_problems_are_all_reported_and_nothing_is_written(
    session_factory, clock
) -> None:
    from control.services import build_services

    def validator(spec: dict) -> list[str]:
        ids = [n.get("id") for n in spec.get("nodes", [])]
        problems = [f"node {i!r} appears twice" for i in set(ids) if ids.count(i) > 1]
        return problems + (["no nodes"] if not ids else [])

    checked = build_services(session_factory, clock=clock, workflow_validator=validator)
    before = row_counts(session_factory)
    with pytest.raises(ValidationError, match="spec") as caught:
        checked.workflows.create(ACTOR, name="w", version="1", spec={"nodes": [{"id": "a"}] * 2})
    assert "node 'a' appears twice" in caught.value.message
    with pytest.raises(ValidationError, match="no nodes"):
        checked.workflows.create(ACTOR, name="w", version="1", spec={"nodes": []})
    assert row_counts(session_factory) == before
    good = checked.workflows.create(ACTOR, name="w", version="1", spec={"nodes": [{"id": "a"}]})
    assert checked.workflows.by_name("w", "1") == good


@pytest.mark.parametrize("attr", sorted(VALID))
def test_an_accepted_create_adds_one_row_and_one_audit_record(
    services: Services, world: World, session_factory, attr: str
) -> None:
    # The counterpart of the refusals: the valid baseline is accepted, and the counts used
    # above do move when something is written.
    service = getattr(services, attr)
    table = service.repository.row_type.__tablename__
    before = row_counts(session_factory)
    service.create(ACTOR, **VALID[attr](world))
    after = row_counts(session_factory)
    changed = {t: after[t] - before[t] for t in after if after[t] != before[t]}
    assert changed == {table: 1, "audit_records": 1}
