"""A precision variant is placed only where its precision runs, and a stored plan keeps it.

The world (``tests.services.builders``) has two real CPU devices that run fp32 only and the
package MiniLM model; an active int8 variant of the model is a model of its own in the fleet
view (``minilm:1@int8``). The planner may put it only on a device whose ``precisions`` name
int8; the stored placement keeps the base model's id with ``variant='int8'``, and the fleet
view of the active plan, the what-if of a stored plan and the admin placement route all read
the variant key back.
"""

from __future__ import annotations

import pytest

from control.services.errors import ValidationError
from control.services.fleet_state import load_fleet_state
from control.services.plan_proposal import PlanProposalService, live_snapshot
from control.services.whatif_variants import _plan
from db import models as m
from db.session import session_scope
from tests.services.builders import ACTOR

INT8 = "minilm:1@int8"
DEMAND = {"models": {INT8: {"arrival_rate": 20.0, "service_s": 0.01},
                     "minilm:1": {"arrival_rate": 5.0, "service_s": 0.01}}}  # fmt: skip


def _int8_world(factory, world, *, int8_on_cpu1: bool) -> None:
    with session_scope(factory) as session:
        session.add(m.ModelVariant(model_id=world.model, precision="int8", quality={}))
        if int8_on_cpu1:
            session.get(m.Device, world.device2).precisions = ["fp32", "int8"]


def test_a_variant_is_placed_only_on_devices_running_its_precision(session_factory, world):
    _int8_world(session_factory, world, int8_on_cpu1=True)
    with session_scope(session_factory) as session:
        fleet = load_fleet_state(session, include_declared=False)
    snap = live_snapshot(fleet)
    entries = {e.key: e.precisions for e in snap.models}
    assert entries == {"minilm:1": (), INT8: ("int8",)}
    assert {d.device_id: d.precisions for d in snap.devices} == {
        "cpu0": frozenset({"fp32"}), "cpu1": frozenset({"fp32", "int8"})}  # fmt: skip
    plan = PlanProposalService(session_factory).propose(ACTOR, demand=DEMAND)
    with session_scope(session_factory) as session:
        rows = session.query(m.Placement).filter_by(plan_id=plan.id).all()
        placed = {(r.model_id, r.variant, tuple(r.device_ids)) for r in rows}
        assert all(r.model_id == world.model for r in rows)  # the base's id, variant apart
        assert {v for _, v, _ in placed} == {"", "int8"}
        assert all(ids == (world.device2,) for _, v, ids in placed if v == "int8")
        session.get(m.PlacementPlan, plan.id).status = "active"
    with session_scope(session_factory) as session:
        keys = {r.model_key for r in load_fleet_state(session).placement}
        what_if = _plan(session, {}, plan.id, "plan_id")["placement"]
    assert INT8 in keys and "minilm:1" in keys
    assert {p["model_key"] for p in what_if} == keys


def test_a_variant_is_left_unplaced_when_no_device_runs_its_precision(session_factory, world):
    _int8_world(session_factory, world, int8_on_cpu1=False)
    plan = PlanProposalService(session_factory).propose(ACTOR, demand=DEMAND)
    with session_scope(session_factory) as session:
        rows = session.query(m.Placement).filter_by(plan_id=plan.id).all()
        assert {r.variant for r in rows} == {""}
    unplaced = {u["model"]: u["reason"] for u in plan.origin["unplaced"]}
    assert "int8" in unplaced[INT8]


def test_the_admin_placement_route_checks_the_variant_and_its_devices(services, world):
    _int8_world(services.factory, world, int8_on_cpu1=True)
    made = services.placements.create(ACTOR, plan_id=world.plan, model_id=world.model,
                                      device_ids=[world.device2], variant="int8")  # fmt: skip
    assert made.variant == "int8"
    with pytest.raises(ValidationError) as bad:
        services.placements.create(ACTOR, plan_id=world.plan, model_id=world.model,
                                   device_ids=[world.device], variant="int8")  # fmt: skip
    assert bad.value.field == "device_ids" and "cpu0" in str(bad.value)
    with pytest.raises(ValidationError) as bad:
        services.placements.create(ACTOR, plan_id=world.plan, model_id=world.model,
                                   device_ids=[world.device2], variant="bf16")  # fmt: skip
    assert bad.value.field == "variant"
