"""The live snapshot route: what the console's live panels poll."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter

from control.api.deps import AdminDep, InferenceDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas.snapshot import LiveSnapshot, RecentRun, TenantLive
from control.store.records import RequestRecord

#: Finished runs listed in the snapshot.
RECENT_RUNS = 50

router = APIRouter(tags=["snapshot"], responses={k: ERROR_RESPONSES[k] for k in (401, 403, 503)})


def plain(value: Any) -> Any:
    """JSON values of a snapshot (dataclasses, mappings, tuples, sets, enums)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float) and value != value:  # NaN has no JSON form
        return None
    return value


def _tenants(snap: Any) -> list[TenantLive]:
    by: dict[str, dict[str, Any]] = {}
    for run in snap.runs:
        by.setdefault(run.tenant_id, {"running": 0, "queued": 0, "why": []})["running"] += 1
    # since late binding most waiting steps are pending (unbound, per model), not in a queue
    pending = getattr(snap, "pending", {})
    steps = [s for q in snap.queues.values() for s in q] + list(snap.unplaced)
    steps += [s for q in pending.values() for s in q]
    for step in steps:
        entry = by.setdefault(step.tenant_id, {"running": 0, "queued": 0, "why": []})
        entry["queued"] += 1
        if step.why and step.why not in entry["why"]:
            entry["why"].append(step.why)
    return [TenantLive(tenant=t, running=v["running"], queued_steps=v["queued"],
                       explanations=v["why"][:10]) for t, v in sorted(by.items())]  # fmt: skip


@router.get("/admin/snapshot")
async def live_snapshot(who: AdminDep, inference: InferenceDep) -> LiveSnapshot:
    """The core's current state: runs, per-replica queues and per-model pending (unbound)
    steps with the reason each step waits, devices, replicas, batches in flight, counters, tenancy; plus per-tenant figures.

    An ``async`` route on purpose: it runs on the event loop, the thread that owns the core."""
    snap = inference.snapshot()
    return LiveSnapshot(
        now=snap.now,
        tenants=_tenants(snap),
        runs=plain(snap.runs),
        queues=plain(snap.queues),
        unplaced=plain(snap.unplaced),
        devices=plain(snap.devices),
        replicas=plain(snap.replicas),
        batches=plain(snap.batches),
        counters=plain(snap.counters),
        preload=plain(snap.preload),
        tenancy=plain(snap.tenancy),
        rollout=plain(getattr(snap, "rollout", None)),
        splits=plain(getattr(snap, "splits", {})),
        cold_starts=getattr(snap, "cold_starts", 0),
        cold_starts_avoided=getattr(snap, "cold_starts_avoided", 0),
        pending=plain(getattr(snap, "pending", {})),
        recently_finished=plain(getattr(snap, "recently_finished", ())),
        recent_runs=[_recent(r) for r in inference.recent(RECENT_RUNS)],
    )


def _recent(record: RequestRecord) -> RecentRun:
    usage = (record.result or {}).get("usage")
    return RecentRun(
        id=record.id, tenant_id=record.tenant_id,
        workflow=f"{record.workflow_name}:{record.workflow_version}", status=record.status,
        received_at=record.received_at, finished_at=record.finished_at, error=record.error,
        usage=usage if isinstance(usage, dict) else None,
    )  # fmt: skip
