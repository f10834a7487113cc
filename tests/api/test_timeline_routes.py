"""The request timeline's admin routes without a live runtime (the stored row): the timeline of
a run (admin only: a tenant key is refused; an unknown id is a 404 with JSON) and the slowest
recent runs."""

from __future__ import annotations

import time

import pytest

from tests.api.conftest import EMBED_SPEC, client_for, make_tenant
from tests.support.timelines import TIMELINE, finished_run

pytestmark = pytest.mark.asyncio


async def _world(stack, admin) -> tuple[int, str]:  # noqa: ANN001
    services = stack.services
    services.models.create("test", name="e", version="1", task="embed", weights_source="declared",
                           weights_location="x", memory_mib=16)  # fmt: skip
    services.workflows.create("test", name="w", version="1", spec=EMBED_SPEC, status="active")
    return await make_tenant(admin, "acme")


async def test_the_admin_reads_a_runs_timeline_with_where_the_time_went(stack, admin):
    tenant_id, _ = await _world(stack, admin)
    run_id = finished_run(stack.services, tenant_id, "w", "1")
    r = await admin.get(f"/admin/requests/{run_id}/timeline")
    assert r.status_code == 200, r.text
    t = r.json()
    assert (t["tenant"], t["workflow"], t["recorded"], t["total_ms"]) == ("acme", "w", True, 60.0)
    s = t["spans"][0]
    assert (s["queue_ms"], s["batch_wait_ms"], s["transfer_ms"], s["device_ms"]) == (3, 1, 5, 40)
    assert t["decisions"][1]["candidates"][1]["total_us"] == 5400
    totals = t["where"]["totals"]
    assert totals["outside_ms"] == 11.0  # 60 ms end to end, the step covers 1..50
    assert t["where"]["dominant"] == "device_ms"
    assert t["where"]["summary"].startswith("device time dominated")


async def test_a_run_without_a_timeline_says_so(stack, admin):
    tenant_id, _ = await _world(stack, admin)
    run_id = finished_run(stack.services, tenant_id, "w", "1", timeline=None)
    t = (await admin.get(f"/admin/requests/{run_id}/timeline")).json()
    assert (t["recorded"], t["spans"], t["where"]["dominant"]) == (False, [], "outside_ms")


async def test_a_tenant_key_is_refused_and_an_unknown_run_is_a_json_404(stack, admin, anon):
    tenant_id, key = await _world(stack, admin)
    run_id = finished_run(stack.services, tenant_id, "w", "1")
    async with client_for(stack.app, key) as tenant:
        for path in (f"/admin/requests/{run_id}/timeline", "/admin/runs/slowest"):
            r = await tenant.get(path)
            assert r.status_code == 403 and r.json()["error"], r.text  # even its own run
    assert (await anon.get(f"/admin/requests/{run_id}/timeline")).status_code == 401
    r = await admin.get("/admin/requests/no-such-run/timeline")
    assert r.status_code == 404, r.text
    assert "no-such-run" in str(r.json())


async def test_slowest_lists_finished_runs_slowest_first(stack, admin):
    tenant_id, _ = await _world(stack, admin)
    quick = finished_run(stack.services, tenant_id, "w", "1")
    run_id = stack.services.requests.create("test", tenant_id=tenant_id, workflow_name="w",
                                            workflow_version="1", body_hash="h").id  # fmt: skip
    stack.services.requests.start("test", run_id)
    time.sleep(0.5)  # this one takes longer than the first (with room for a slow database)
    stack.services.requests.finish("test", run_id, "succeeded", result={"timeline": TIMELINE})
    stack.services.requests.create(
        "test", tenant_id=tenant_id, workflow_name="w", workflow_version="1", body_hash="h"
    )  # still queued: not listed
    r = await admin.get("/admin/runs/slowest", params={"limit": 5, "workflow": "w"})
    assert r.status_code == 200, r.text
    assert [x["id"] for x in r.json()] == [run_id, quick]
    assert r.json()[0]["latency_ms"] >= 500 and r.json()[0]["steps"] == 1
    bad = await admin.get("/admin/runs/slowest", params={"limit": 0})
    assert bad.status_code == 422 and "limit" in bad.text
