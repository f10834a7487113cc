"""`legato seed --demo`: the demo fleet is written once, a second run changes nothing, and the
core accepts what was written (the fleet loads into a working ControlCore)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from control.config import Settings
from control.core.assembly import CoreBlueprint, build_core
from control.executor.protocol import DeviceInfo
from control.services.fleet_state import load_fleet_state
from control.services.seed import seed_demo
from db import models as m
from db.session import make_engine, make_session_factory, session_scope

LOCAL = [
    DeviceInfo("cpu:0", "cpu", 0, 4096, cpu_core=0),
    DeviceInfo("cpu:1", "cpu", 1, 4096, cpu_core=1),
]
TABLES = (m.Node, m.Device, m.ServedModel, m.Tenant, m.Quota, m.Cohort, m.HeadroomReservation,
          m.Workflow, m.PlacementPlan, m.Placement, m.Trace, m.AuditRecord)  # fmt: skip


def _counts(url: str) -> dict[str, int]:
    engine = make_engine(url)
    try:
        with session_scope(make_session_factory(engine)) as s:
            return {t.__tablename__: s.scalar(select(func.count()).select_from(t)) for t in TABLES}
    finally:
        engine.dispose()


def test_seed_twice_is_a_no_op(db_url: str, tmp_path) -> None:
    first = seed_demo(db_url, Settings(var_dir=tmp_path), local_devices=LOCAL)
    assert first["created"]["tenants"] == 3
    assert first["created"]["workflows"] == 2
    assert first["created"]["devices"] == 2 + 4 + 4 + 2 + 2  # local slots + declared GPUs
    after_first = _counts(db_url)
    assert after_first[m.AuditRecord.__tablename__] > 0

    second = seed_demo(db_url, Settings(var_dir=tmp_path), local_devices=LOCAL)
    assert second["created"] == {}
    assert _counts(db_url) == after_first  # not even an audit record


@pytest.mark.parametrize("include_declared", [True, False])
def test_seeded_fleet_builds_a_core(db_url: str, tmp_path, include_declared: bool) -> None:
    seed_demo(db_url, Settings(var_dir=tmp_path), local_devices=LOCAL)
    engine = make_engine(db_url)
    try:
        with session_scope(make_session_factory(engine)) as s:
            state = load_fleet_state(s, include_declared=include_declared)
    finally:
        engine.dispose()
    keys = {mm.key for mm in state.models}
    assert {"minilm-embed:1", "minilm-rerank:1", "smollm2-135m:1"} <= keys
    assert ("llama-70b:1" in keys) is include_declared
    assert set(state.model_refs) == {"minilm-embed:1", "minilm-rerank:1", "smollm2-135m:1"}
    assert state.real_devices == {"cpu:0", "cpu:1"}
    assert {w.workflow for w in state.workflows} == {"rag:1", "agent:1"}
    assert state.tenancy.headroom[0].reserved_milli == 150
    assert {t.tenant_id: t.weight for t in state.tenancy.tenants} == {
        "acme": 3, "globex": 2, "initech": 1,
    }  # fmt: skip
    blueprint = CoreBlueprint(
        state.devices, state.models, state.workflows, state.tenancy, state.cost
    )
    core = build_core(blueprint, state.latency_model())
    snap = core.snapshot()
    assert {d.device_id for d in snap.devices} == {d.device_id for d in state.devices}


def test_with_three_local_devices_the_last_is_the_cold_pool(db_url: str, tmp_path) -> None:
    three = [*LOCAL, DeviceInfo("cpu:2", "cpu", 2, 4096, cpu_core=2)]
    seed_demo(db_url, Settings(var_dir=tmp_path), local_devices=three)
    engine = make_engine(db_url)
    try:
        with session_scope(make_session_factory(engine)) as s:
            state = load_fleet_state(s, include_declared=False)
    finally:
        engine.dispose()
    pools = {d.device_id: d.pool for d in state.devices}
    assert pools == {"cpu:0": "hot", "cpu:1": "hot", "cpu:2": "cold"}
    placed = {d for p in state.placement for d in p.device_ids}
    assert "cpu:2" not in placed  # loads land there; no hot replica does
    scaled = {mm.key: (mm.min_replicas, mm.max_replicas) for mm in state.models}
    assert scaled["minilm-embed:1"] == (1, 5) and scaled["minilm-rerank:1"] == (0, 5)
