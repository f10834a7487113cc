"""Plan lifecycle around rollouts: completion activates, a completed rollback or a failed load
makes the plan ``rolled_back`` and the previous plan ``active`` again (both audited); progress
for the console. A small fake runtime stands in for the live one (it records what it is told to
ingest and reports a settable rollout view and replica list); the database is real."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from control.core.actions import RolloutTransition
from control.core.events import PlacementChanged, RollbackRequested
from control.services.errors import Conflict, NotFound
from control.services.inference import ServiceUnavailable
from control.services.rollout import RolloutService, planned_steps
from control.services.rollout_record import RolloutRecorder
from control.store import repositories as repo
from db import models as m
from db.session import session_scope
from tests.services.builders import build_world


@dataclass
class FakeRuntime:
    events: list = field(default_factory=list)
    rollout: object = None
    replicas: tuple = ()
    actuator: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(on_rollout=None))

    async def ingest(self, event: object) -> None:
        self.events.append(event)

    def snapshot(self) -> SimpleNamespace:
        return SimpleNamespace(rollout=self.rollout, replicas=self.replicas)


def view(plan_id: str, state: str, rollback: bool = False, **kw) -> SimpleNamespace:
    """A RolloutView-shaped object."""
    base = dict(loads_pending=(), draining=(), blocked=(), loaded=0, evicted=0, moved=0,
                reason="test", started_at=0.0)  # fmt: skip
    return SimpleNamespace(plan_id=plan_id, state=state, rollback=rollback, **{**base, **kw})


def replica(model: str, devices: tuple[str, ...], state: str = "ready") -> SimpleNamespace:
    return SimpleNamespace(model_key=model, device_ids=devices, state=state)


@pytest.fixture
def world(session_factory):
    w = build_world(session_factory)
    with session_scope(session_factory) as s:
        plans = repo.PlacementPlanRepository(s)
        plans.update(w.plan, status="active")
        new = plans.add(author="planner", note="next")
        for plan in (w.plan, new.id):
            repo.PlacementRepository(s).add(plan_id=plan, model_id=w.model, device_ids=[w.device],
                                            replicas=1 if plan == w.plan else 2, pool="hot")  # fmt: skip
    return SimpleNamespace(old=w.plan, new=new.id, factory=session_factory)


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime(replicas=(replica("minilm:1", ("cpu0",)),))


@pytest.fixture
def svc(world, services, runtime) -> RolloutService:
    return RolloutService(world.factory, services.plans, runtime)


@pytest.fixture
def recorder(world, services) -> RolloutRecorder:
    return RolloutRecorder(world.factory, services.plans)


def play(recorder: RolloutRecorder, plan_id: str, *states: str, reason: str = "test") -> None:
    """Feed transitions through the actuator hook and wait for the writer thread."""
    for before, after in zip(("", *states), states, strict=False):
        recorder.record_transition(RolloutTransition(plan_id, before, after, reason))
    for f in recorder.pending:
        f.result(timeout=10)


def statuses(world) -> tuple[str, str]:
    with session_scope(world.factory) as s:
        plans = repo.PlacementPlanRepository(s)
        return plans.get(world.old).status, plans.get(world.new).status


def plan_audit(world, plan_id: int) -> list[str]:
    with session_scope(world.factory) as s:
        q = select(m.AuditRecord).where(m.AuditRecord.entity_type == "placement_plan",
                                        m.AuditRecord.entity_id == str(plan_id))  # fmt: skip
        return [r.action for r in s.scalars(q.order_by(m.AuditRecord.id))]


async def test_start_records_previous_plan_and_planned_steps(svc, world, runtime, recorder):
    event = await svc.start("ops", world.new)
    assert isinstance(runtime.events[-1], PlacementChanged)
    assert event.placements == (("minilm:1", ("cpu0",), 2, "hot"),)
    p = svc.progress(world.new)
    # one replica held, two wanted: one load
    assert (p.previous_plan_id, p.state, p.live) == (world.old, None, False)
    play(recorder, str(world.new), "loading", "completed")
    p = svc.progress(world.new)
    assert (p.steps_done, p.steps_total, p.live) == (1, 1, False)


async def test_completed_rollout_then_completed_rollback_restores_previous(svc, world, recorder):
    await svc.start("ops", world.new)
    play(recorder, str(world.new), "loading", "draining", "completed")
    assert statuses(world) == ("retired", "active")
    play(recorder, f"{world.new}:rollback", "loading", "completed")
    assert statuses(world) == ("active", "rolled_back")
    assert plan_audit(world, world.new)[-1] == "roll_back"
    assert plan_audit(world, world.old)[-2:] == ["retire", "reactivate"]


async def test_failed_load_rolls_plan_back_and_audits_both_once(svc, world, recorder):
    await svc.start("ops", world.new)
    play(recorder, str(world.new), "loading", "aborted", reason="load of m@cpu0#1 failed")
    assert statuses(world) == ("active", "rolled_back")
    # the abort's own rollback completing later changes nothing and audits nothing more
    play(recorder, f"{world.new}:rollback", "loading", "completed")
    assert statuses(world) == ("active", "rolled_back")
    assert plan_audit(world, world.new) == ["roll_back"]
    assert plan_audit(world, world.old) == ["reactivate"]
    p = svc.progress(world.new)
    assert p.errors == ("load of m@cpu0#1 failed",)
    assert [(t["phase"], t["to"]) for t in p.transitions][-2:] == [
        ("rollback", "loading"), ("rollback", "completed")]  # fmt: skip


async def test_superseded_rollout_keeps_its_status(svc, world, recorder):
    await svc.start("ops", world.new)
    play(recorder, str(world.new), "loading", "aborted", reason="superseded by plan 9")
    assert statuses(world) == ("active", "draft")


async def test_previous_plan_that_was_rolled_back_is_not_revived(svc, world, recorder):
    await svc.start("ops", world.new)
    with session_scope(world.factory) as s:
        repo.PlacementPlanRepository(s).update(world.old, status="rolled_back")
    play(recorder, str(world.new), "loading", "draining", "completed")
    play(recorder, f"{world.new}:rollback", "loading", "completed")
    assert statuses(world) == ("rolled_back", "rolled_back")


@pytest.mark.parametrize(
    ("live", "why"),
    [
        (None, "none"),
        (view("99", "completed"), "plan 99"),
        (view("{new}", "draining"), "draining"),
        (view("{new}:rollback", "completed", rollback=True), "rollback"),
    ],
)
async def test_rollback_of_a_plan_only_after_its_completed_rollout(svc, world, runtime, live, why):
    if live is not None:
        live.plan_id = live.plan_id.format(new=world.new)
    runtime.rollout = live
    with pytest.raises(Conflict, match=why):
        await svc.rollback("ops", world.new)
    assert runtime.events == []


async def test_rollback_of_the_last_completed_plan_is_ingested_and_audited(svc, world, runtime):
    runtime.rollout = view(str(world.new), "completed")
    await svc.rollback("ops", world.new)
    assert isinstance(runtime.events[-1], RollbackRequested)
    with pytest.raises(NotFound):
        await svc.rollback("ops", 999)


async def test_without_runtime_only_progress_works(world, services):
    svc = RolloutService(world.factory, services.plans, None)
    with pytest.raises(ServiceUnavailable):
        await svc.start("ops", world.new)
    p = svc.progress(world.new)
    assert (p.phase, p.state, p.current_step, p.in_progress) == (
        None,
        None,
        "never rolled out",
        False,
    )


async def test_live_progress_counts_steps(svc, world, runtime):
    await svc.start("ops", world.new)
    runtime.rollout = view(str(world.new), "loading", loads_pending=("minilm:1@cpu0#2",))
    p = svc.progress(world.new)
    assert (p.live, p.in_progress, p.steps_done, p.steps_total) == (True, True, 0, 1)
    assert "minilm:1@cpu0#2" in p.current_step
    runtime.rollout = view(str(world.new), "completed", loaded=1)
    p = svc.progress(world.new)
    assert (p.state, p.steps_done, p.steps_total, p.in_progress) == ("completed", 1, 1, False)
    runtime.rollout = view("other", "loading")  # another plan's rollout: audit-only view
    assert svc.progress(world.new).live is False


@pytest.mark.parametrize(
    ("held", "wanted", "steps"),
    [
        ([], [("a", ("d0",), 2, "hot")], 2),
        ([("a", ("d0",))], [("a", ("d0",), 1, "hot")], 0),
        ([("a", ("d0",)), ("a", ("d0",))], [("a", ("d1",), 1, "hot")], 3),
        ([("a", ("d0", "d1"))], [("a", ("d0", "d1"), 3, "hot"), ("b", ("d2",), 1, "cold")], 3),
    ],
)
def test_planned_steps_are_loads_plus_evictions(held, wanted, steps):
    reps = [replica(k, d) for k, d in held] + [replica("a", ("d0",), state="failed")]
    assert planned_steps(reps, wanted) == steps


def test_progress_of_unknown_plan_is_not_found(svc):
    with pytest.raises(NotFound):
        svc.progress(4242)


def test_hook_survives_bookkeeping_failures(svc, world, recorder):
    play(recorder, "12345", "loading", "completed")  # unknown plan: activate raises, logged
    play(recorder, "initial", "completed")
    assert statuses(world) == ("active", "draft")
    play(recorder, str(world.new), "loading", "completed")  # later transitions still recorded
    assert statuses(world) == ("retired", "active")
