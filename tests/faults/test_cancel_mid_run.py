"""Cancel that stops (issue 22, item 4), through the real gateway, live runtime, core and a
real executor with a tiny GPT-2: a cancelled run went on running, and a step was billed after
the cancel was acknowledged; a run whose synchronous caller timed out (504) kept the tenant's
``concurrent_requests`` slot, so two of them blocked the tenant for good.

The workflow chains two generation steps (``first`` feeds ``second``); the cancel comes while
``first`` streams tokens. The tenant's ``concurrent_requests`` quota is 1, so a new run of
that tenant is admitted only once the cancelled (or timed-out) run has released its slot.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from control.executor.protocol import ModelRef
from control.runtime.live import InitialReplica
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.support.live_gateway import live_app, live_world

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

REFS = {"tiny-gen:1": ModelRef("tiny-gen:1", "generate", "tiny", "gpt2")}
CHAIN = {
    "inputs": {"prompt": "text"},
    "outputs": {"text": "second.text"},
    "nodes": [{"id": "first", "task": "generate", "model": "tiny-gen:1"},
              {"id": "second", "task": "generate", "model": "tiny-gen:1"}],
    "edges": [{"from": "input.prompt", "to": "first.prompt"},
              {"from": "first.text", "to": "second.prompt"}],
}  # fmt: skip
LONG = {"inputs": {"prompt": "once upon a time"}, "max_output_tokens": 400}


def _seed(services) -> tuple[str, int]:  # noqa: ANN001
    node = services.nodes.create("test", name="local")
    services.devices.create("test", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    services.models.create("test", name="tiny-gen", version="1", task="generate",
                           weights_source="declared", weights_location="tiny test model",
                           memory_mib=16, max_batch_size=8, max_batch_tokens=8192)  # fmt: skip
    services.workflows.create("test", name="chain", version="1", spec=CHAIN, status="active")
    tenant = services.tenants.create("test", name="acme", weight=1)
    services.quotas.create("test", tenant_id=tenant.id, resource="concurrent_requests", nominal=1)
    other = services.tenants.create("test", name="globex", weight=1)
    return services.api_keys.create_key("test", tenant.id).plaintext, other.id


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("cancel"), _sqlite_template, ("gpt2",))
    key, other_id = _seed(world.services)
    other_key = world.services.api_keys.create_key("test", other_id).plaintext
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=60),
                   memory_mib=2048, placement=[InitialReplica("tiny-gen:1", "cpu:0")])  # fmt: skip
    inference = app.state.gateway.inference
    await inference.start()
    client, other = client_for(app, key), client_for(app, other_key)
    admin = client_for(app, ADMIN_TOKEN)
    yield world.services, inference, client, other, admin
    for c in (client, other, admin):
        await c.aclose()
    await inference.stop()


async def _started_streaming(inference, client) -> str:  # noqa: ANN001
    """An async run of the chain, once its ``first`` step streams tokens (it runs now)."""
    r = await client.post("/v1/workflows/chain/versions/1/runs", json={**LONG, "mode": "async"})
    assert r.status_code == 202, r.text
    run_id = r.json()["id"]
    for _ in range(400):  # bounded: the run is admitted and its step starts within seconds
        deltas = inference.stream(run_id)
        if deltas is not None:
            first = await asyncio.wait_for(deltas.__anext__(), 30)
            assert first.node_id == "first"
            return run_id
        await asyncio.sleep(0.05)
    raise AssertionError("the run never streamed")


async def _admitted_at_once(client) -> None:  # noqa: ANN001
    """A short run of the tenant is admitted (not 429) and succeeds: its slot is free."""
    body = {"inputs": {"prompt": "hi"}, "max_output_tokens": 2, "mode": "sync", "timeout_s": 30}
    r = await client.post("/v1/workflows/chain/versions/1/runs", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "succeeded"


async def test_cancel_mid_step_stops_the_run_bills_nothing_after_and_frees_the_quota(live):
    services, inference, client, other, _ = live
    run_id = await _started_streaming(inference, client)
    assert (await other.post(f"/v1/runs/{run_id}/cancel")).status_code == 404  # not globex's
    r = await client.post(f"/v1/runs/{run_id}/cancel")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled"
    again = await client.post(f"/v1/runs/{run_id}/cancel")  # idempotent
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    await _admitted_at_once(client)
    await asyncio.sleep(0.5)  # let any late result of the cancelled step arrive (and be dropped)
    billed = services.usage.list(request_id=run_id)
    # ``first`` was still generating at the cancel: its late result is discarded; ``second``
    # was never dispatched, so it can never be billed
    assert [u.node_id for u in billed] == []
    assert (await client.get(f"/v1/runs/{run_id}")).json()["status"] == "cancelled"
    events = (await client.get(f"/v1/runs/{run_id}/events")).text
    assert events.rstrip().splitlines()[-2] == "event: cancelled", events  # the stream's end
    audit = services.audit.page(entity_type="request", action="cancel", limit=10)
    assert any(a.entity_id == run_id for a in audit.items)


async def test_an_ended_run_cannot_be_cancelled(live):
    _, _, client, _, _ = live
    body = {"inputs": {"prompt": "hi"}, "max_output_tokens": 2, "mode": "sync", "timeout_s": 30}
    done = (await client.post("/v1/workflows/chain/versions/1/runs", json=body)).json()
    r = await client.post(f"/v1/runs/{done['id']}/cancel")
    assert r.status_code == 409, r.text


async def test_a_sync_caller_that_timed_out_releases_its_concurrency_slot(live):
    _, _, client, _, _ = live
    # 0.1 s: the two 400-token steps take ~0.5 s even with the native core on a quiet machine
    body = {**LONG, "mode": "sync", "timeout_s": 0.1}
    r = await client.post("/v1/workflows/chain/versions/1/runs", json=body)
    assert r.status_code == 504, r.text
    await _admitted_at_once(client)  # the slot (quota 1) is free again at once


async def test_the_admin_delete_cancels_through_the_runtime(live):
    services, inference, client, _, admin = live
    run_id = await _started_streaming(inference, client)
    r = await admin.delete(f"/admin/requests/{run_id}")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled"
    await _admitted_at_once(client)  # the run stopped in the core: its slot is free
    assert services.usage.list(request_id=run_id) == []
