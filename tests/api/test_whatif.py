"""What-if runs through the admin API with the twin's real engine (worker process)."""

from __future__ import annotations

import asyncio

from control.api.twin import TwinEngine


async def test_submitted_run_is_taken_by_the_twin_and_finishes(stack, admin, tmp_path):
    engine = TwinEngine(stack.factory, str(stack.factory.kw["bind"].url))
    stack.app.state.gateway.whatif_engine = engine
    # No baseline and no workload: the worker must fail the run and say why.
    r = await admin.post("/admin/whatif", json={"scenario": {"variants": {}}, "submit": True})
    assert r.status_code == 201, r.text
    run_id = r.json()["id"]
    await asyncio.to_thread(engine.wait, run_id, 60)
    run = (await admin.get(f"/admin/whatif/{run_id}")).json()
    assert run["status"] == "failed" and "baseline" in run["error"]
    assert run["progress_milli"] == 1000
    again = await admin.post(f"/admin/whatif/{run_id}/submit")
    assert again.status_code == 409 and "failed" in again.json()["detail"]


async def test_baseline_defaults_to_the_live_fleet(stack, admin):
    stack.app.state.gateway.whatif_engine = TwinEngine(stack.factory, "sqlite://")
    workload = {"trace": "synthetic", "rate_rps": 1.0, "duration_s": 10}
    r = await admin.post("/admin/whatif", json={"scenario": {"workload": workload}})
    assert r.status_code == 201, r.text
    scenario = r.json()["scenario"]
    assert "baseline" in scenario and scenario["workload"] == workload
