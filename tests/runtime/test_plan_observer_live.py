"""A proposed plan rolled out on the live stack (real gateway, live runtime, two CPU workers
with the tiny BERT embedder), observed over the next window, judged against its prediction.

The fleet starts with the embedder on ``cpu:0`` only; the plan, proposed for a demand that
needs more than one replica, puts it on both devices. Its stored prediction is set by the
test (the twin's replay itself is tested in tests/api/test_plan_proposals.py): one that no
live run can meet (1 microsecond) must flag the plan and, with ``auto_rollback``, roll it back
(audited as the observer's rollback); a generous one (100 s) must leave the plan active and
unflagged. The twin's error is 0 (no fidelity report stored) and the margin 0.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from control.runtime.live import InitialReplica
from control.services.plan_observer import PlanWatchConfig
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.support.live_gateway import (
    EMBED_WORKFLOW,
    TINY_EMBED_REFS,
    live_app,
    live_world,
)
from tests.support.waiting import until

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

WINDOW_S = 2.0
DEMAND = {"models": {"tiny-embed:1": {"arrival_rate": 30, "service_s": 0.05}}}  # 3 replicas
RUN = "/v1/workflows/vec/versions/1/runs"


def _seed(services) -> str:  # noqa: ANN001
    node = services.nodes.create("test", name="local")
    for name in ("cpu:0", "cpu:1"):
        services.devices.create("test", name=name, node_id=node.id, kind="cpu", memory_mib=2048,
                                precisions=["fp32"], is_real=True)  # fmt: skip
    services.models.create("test", name="tiny-embed", version="1", task="embed",
                           weights_source="declared", weights_location="tiny test model",
                           memory_mib=16, max_batch_size=8)  # fmt: skip
    services.workflows.create("test", name="vec", version="1", spec=EMBED_WORKFLOW,
                              status="active")  # fmt: skip
    tenant = services.tenants.create("test", name="acme", weight=1)
    return services.api_keys.create_key("test", tenant.id).plaintext


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    from control.executor.protocol import DeviceInfo

    world = live_world(tmp_path_factory.mktemp("plans"), _sqlite_template, ("bert",))
    key = _seed(world.services)
    devices = [DeviceInfo(f"cpu:{i}", "cpu", i, 1024, 0) for i in range(2)]
    app = live_app(world, TINY_EMBED_REFS, GatewayConfig(admin_token=ADMIN_TOKEN),
                   placement=[InitialReplica("tiny-embed:1", "cpu:0")], devices=devices)  # fmt: skip
    gw = app.state.gateway
    gw.extras["plan_watch"] = PlanWatchConfig(window_s=WINDOW_S, margin=0.0, poll_s=0.1)
    await gw.inference.start()
    tenant, admin = client_for(app, key), client_for(app, ADMIN_TOKEN)
    yield world.services, gw, tenant, admin
    for c in (tenant, admin):
        await c.aclose()
    await gw.inference.stop()


def _embed_devices(gw) -> list[tuple[str, ...]]:  # noqa: ANN001
    return sorted(r.device_ids for r in gw.inference.runtime.snapshot().replicas
                  if r.model_key == "tiny-embed:1" and r.state.lower().endswith("ready")
                  and not r.speculative)  # fmt: skip


async def _load(tenant, stop: asyncio.Event) -> int:  # noqa: ANN001
    """Sync embedding runs until ``stop``; returns how many succeeded."""
    done = 0
    while not stop.is_set():
        r = await tenant.post(RUN, json={"inputs": {"text": f"hello {done}"}, "mode": "sync"})
        assert r.status_code == 200, r.text
        done += 1
    return done


async def _roll_out_and_observe(services, gw, tenant, admin, predicted_p99_s: float) -> dict:  # noqa: ANN001
    r = await admin.post("/admin/placement-plans/propose",
                         json={"demand": DEMAND, "auto_rollback": True})  # fmt: skip
    assert r.status_code == 201, r.text
    plan = r.json()["id"]
    # the prediction a twin replay would store, set by the test so that the judgement is known
    services.plans.update("test", plan, simulation={
        "state": "done", "plan": {"p50_s": predicted_p99_s, "p99_s": predicted_p99_s}})  # fmt: skip
    r = await admin.post(f"/admin/placement-plans/{plan}/rollout")
    assert r.status_code == 202, r.text
    stop = asyncio.Event()
    load = asyncio.create_task(_load(tenant, stop))
    try:
        seen = await until(lambda: (services.plans.get(plan).observation or {}).get("state")
                           == "observed" or None, "the observation", 60.0)  # fmt: skip
    finally:
        stop.set()
        assert await load > 0
    assert seen
    return {"id": plan, "record": services.plans.get(plan)}


async def test_unreachable_prediction_flags_and_rolls_back(live):
    services, gw, tenant, admin = live
    assert _embed_devices(gw) == [("cpu:0",)]
    out = await _roll_out_and_observe(services, gw, tenant, admin, predicted_p99_s=1e-6)
    plan, rec = out["id"], out["record"]
    obs = rec.observation
    assert rec.flagged is True and obs["rolled_back"] is True, obs
    assert obs["observed"]["requests"] > 0 and obs["observed"]["p99_s"] > 1e-6
    assert obs["twin_p99_error"] == 0.0 and obs["margin"] == 0.0
    await until(lambda: services.plans.get(plan).status == "rolled_back" or None,
                "the automatic rollback to complete", 60.0)  # fmt: skip
    assert _embed_devices(gw) == [("cpu:0",)]
    rollbacks = [a for a in services.audit.page(entity_type="placement_rollout", limit=50).items
                 if a.action == "rollback"]  # fmt: skip
    assert [a.actor for a in rollbacks] == ["system:plan-observer"]


async def test_met_prediction_stays_active_and_unflagged(live):
    services, gw, tenant, admin = live
    out = await _roll_out_and_observe(services, gw, tenant, admin, predicted_p99_s=100.0)
    rec = out["record"]
    assert rec.flagged is False and rec.observation["rolled_back"] is False, rec.observation
    assert rec.status == "active"
    assert _embed_devices(gw) == [("cpu:0",), ("cpu:1",)]
