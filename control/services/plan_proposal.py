"""Proposing placement plans with the core's placement policies.

``PlanProposalService.propose`` plans the fleet the live runtime can run (real devices that are
up, loadable models, headroom restricted to those devices) with a registered placement policy
(``control.core.placement.PLACEMENT``; the cold pool is the devices labelled cold) for the demand observed over the last ``window_s``
(``plan_demand.observed_demand``) or the operator's (``plan_demand.given_demand``), and stores
the result as one plan with status ``proposed``: its placements, and in ``origin`` the policy,
the demand, what could not be placed and the constraints that bound the plan. One transaction,
audited as ``propose``. A bad policy name or demand raises ValidationError naming the field; a
fleet with nothing to place raises Conflict. Nothing is rolled out: a proposed plan must be
simulated (``plan_simulation``) before a rollout is allowed unless forced.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.core.placement import (
    PLACEMENT,
    ClusterSnapshot,
    DeviceEntry,
    PlacementPlan,
    PlanError,
    plan_with,
)
from control.core.placement.cold_pool import ColdPoolConfig
from control.core.placement.planner import PlannerConfig
from control.core.variants import base_of
from control.services.audit import write_audit
from control.services.errors import Conflict, ValidationError
from control.services.fleet_state import FleetState, load_fleet_state, model_key
from control.services.plan_demand import given_demand, observed_demand
from control.services.variant_catalog import placement_entry, stored_variant
from control.store.records import PlacementPlanRecord
from control.store.repositories import PlacementPlanRepository
from db import models as m
from db.session import session_scope

ENTITY = "placement_plan"


def live_snapshot(fleet: FleetState, runnable: Collection[str] | None = None) -> ClusterSnapshot:
    """What the live runtime can run: up real devices, headroom on those, and the models it can
    load (``runnable``: the running runtime's model keys; None: those with loadable weights)."""
    devices = tuple(DeviceEntry(d, fleet.device_precisions.get(d.device_id, frozenset()))
                    for d in fleet.devices
                    if d.device_id in fleet.real_devices and d.status == "up")  # fmt: skip
    ids = frozenset(d.device_id for d in devices)
    headroom = tuple(replace(h, device_ids=h.device_ids & ids) for h in fleet.tenancy.headroom)
    known = fleet.model_refs if runnable is None else runnable
    models = tuple(placement_entry(s) for s in fleet.models if s.key in known)
    return ClusterSnapshot(devices, models, headroom)


def live_config(policy: str, snapshot: ClusterSnapshot) -> Any:
    """The policy's config for the live fleet: the cold pool is the devices labelled
    ``pool: cold`` (none labelled: no cold pool; the core's default keeps one device cold,
    which on a fleet of a few local workers would idle a worker). Other policies: defaults."""
    pool = ColdPoolConfig(count=sum(d.spec.pool == "cold" for d in snapshot.devices))
    return {"planner": PlannerConfig(cold_pool=pool), "cold_pool": pool}.get(policy)


def origin_of(plan: PlacementPlan, policy: str, demand: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON kept in the plan's ``origin``."""
    return {
        "policy": policy,
        "demand": dict(demand),
        "unplaced": [{"model": u.model_key, "missing": u.missing, "reason": u.reason}
                     for u in plan.unplaced],
        "binding_constraints": [{"kind": b.kind, "subject": b.subject, "detail": b.detail}
                                for b in plan.binding_constraints],
    }  # fmt: skip


class PlanProposalService:
    """Plans proposed from demand (see the module docstring)."""

    def __init__(
        self, factory: sessionmaker[Session], clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._factory = factory
        self._clock = clock

    def propose(
        self, actor: str, *, policy: str = "planner", window_s: float = 600.0,
        demand: Mapping[str, Any] | None = None, note: str = "",
        auto_rollback: bool | None = None, runnable: Collection[str] | None = None,
    ) -> PlacementPlanRecord:  # fmt: skip
        """Plan and store (see the module docstring); returns the stored plan. ``runnable``:
        the model keys the running runtime can load (None: models with loadable weights)."""
        if policy not in PLACEMENT.names():
            raise ValidationError("policy", policy, f"one of {sorted(PLACEMENT.names())}")
        if not window_s > 0:
            raise ValidationError("window_s", window_s, "must be > 0")
        now = self._clock()
        with session_scope(self._factory) as session:
            fleet = load_fleet_state(session, include_declared=True)
            snapshot = live_snapshot(fleet, runnable)
            if not snapshot.devices or not snapshot.models:
                raise Conflict("nothing to plan: no up real device or no loadable model")
            if demand is None:
                wanted, summary = observed_demand(
                    session, fleet, now - timedelta(seconds=window_s), window_s
                )
            else:
                wanted, summary = given_demand(demand, (e.key for e in snapshot.models))
            try:
                plan = plan_with(policy, snapshot, wanted, live_config(policy, snapshot))
            except PlanError as exc:  # the policy refused the fleet as it stands
                raise Conflict(f"placement policy {policy} refused: {exc}") from None
            if not plan.placements:
                raise Conflict(f"placement policy {policy} placed nothing: {plan.unplaced}")
            return self._store(session, actor, now, plan, origin_of(plan, policy, summary),
                               note, auto_rollback)  # fmt: skip

    def _store(
        self, session: Session, actor: str, now: datetime, plan: PlacementPlan,
        origin: dict[str, Any], note: str, auto_rollback: bool | None,
    ) -> PlacementPlanRecord:  # fmt: skip
        devices = {d.name: d.id for d in session.query(m.Device)}
        models = {model_key(r): r.id for r in session.query(m.ServedModel)}
        row = m.PlacementPlan(status="proposed", author=actor, note=note, origin=origin,
                              auto_rollback=auto_rollback, created_at=now)  # fmt: skip
        session.add(row)
        session.flush()
        placed = []
        for p in plan.placements:
            session.add(m.Placement(
                plan_id=row.id, model_id=models[base_of(p.model_key)],
                variant=stored_variant(p.model_key),
                device_ids=[devices[d] for d in p.device_ids], replicas=p.replicas,
                pool=p.pool, reason=p.reason,
            ))  # fmt: skip
            placed.append([p.model_key, list(p.device_ids), p.replicas, p.pool])
        session.flush()
        record = PlacementPlanRepository(session).get(row.id)
        write_audit(session, at=now, actor=actor, action="propose", entity_type=ENTITY,
                    entity_id=row.id, before=None,
                    after={"policy": origin["policy"], "placements": placed,
                           "demand_source": origin["demand"]["source"]})  # fmt: skip
        return record
