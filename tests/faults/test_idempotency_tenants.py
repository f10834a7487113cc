"""One tenant's idempotency key never meets another's (issue 22): through the real gateway, the
live runtime, the core and a real executor with a tiny embedding model.

Tenant B sending the ``Idempotency-Key`` tenant A used (same body or another) got a failed run
(``no worker holds output <run>/embed``): the steps' keys were built from the bare key, so the
executor answered B's step from A's stored result. Each tenant must get its own run, its own
result and its own bill, while a repeat within one tenant is still answered from its first run.
"""

from __future__ import annotations

import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.support.live_gateway import (
    TINY_EMBED_REFS,
    live_app,
    live_world,
    seed_embed_fleet,
)

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

REFS = TINY_EMBED_REFS
TENANTS = ("acme", "globex")


def _seed(services) -> dict[str, int]:  # noqa: ANN001
    seed_embed_fleet(services)
    return {n: services.tenants.create("test", name=n, weight=1).id for n in TENANTS}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, module_db_url):
    world = live_world(tmp_path_factory.mktemp("tenant-keys"), module_db_url, ("bert",))
    services = world.services
    ids = _seed(services)
    keys = {n: services.api_keys.create_key("test", i).plaintext for n, i in ids.items()}
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=30))
    inference = app.state.gateway.inference
    await inference.start()
    clients = {n: client_for(app, keys[n]) for n in TENANTS}
    yield services, clients
    for client in clients.values():
        await client.aclose()
    await inference.stop()


async def _embed(client, text: str, key: str | None) -> tuple[list[float], str]:  # noqa: ANN001
    headers = {} if key is None else {"Idempotency-Key": key}
    r = await client.post("/v1/embeddings", json={"model": "tiny-embed", "input": text},
                          headers=headers)  # fmt: skip
    assert r.status_code == 200, r.text
    return r.json()["data"][0]["embedding"], r.headers["x-legato-run-id"]


def _billed(services, run_id: str) -> int:  # noqa: ANN001
    return len(services.usage.list(request_id=run_id))


async def test_the_same_key_and_body_from_two_tenants_are_two_runs(live):
    services, c = live
    a_vec, a_run = await _embed(c["acme"], "the same text", "shared-1")
    b_vec, b_run = await _embed(c["globex"], "the same text", "shared-1")
    assert a_run != b_run and len(b_vec) == 32 and b_vec == pytest.approx(a_vec, abs=1e-5)
    assert _billed(services, a_run) == _billed(services, b_run) == 1
    # within one tenant the key still answers from its first run, billed once
    again_vec, again_run = await _embed(c["globex"], "the same text", "shared-1")
    assert (again_vec, again_run) == (b_vec, b_run) and _billed(services, b_run) == 1


async def test_the_same_key_with_another_body_is_no_conflict_across_tenants(live):
    services, c = live
    a_vec, a_run = await _embed(c["acme"], "cats purr", "shared-2")
    b_vec, b_run = await _embed(c["globex"], "dogs bark loudly", "shared-2")
    assert a_run != b_run and a_vec != pytest.approx(b_vec, abs=1e-3)
    # each the embedding of its own text
    assert b_vec == pytest.approx(
        (await _embed(c["globex"], "dogs bark loudly", None))[0], abs=1e-5
    )
    assert a_vec == pytest.approx((await _embed(c["acme"], "cats purr", None))[0], abs=1e-5)
    assert _billed(services, a_run) == _billed(services, b_run) == 1


async def test_a_workflow_run_under_another_tenants_key_gets_its_own_result(live):
    """An async workflow run: B's run, under A's key, is its own and succeeds."""
    services, c = live
    runs = {}
    for tenant, text in (("acme", "first tenant"), ("globex", "second tenant")):
        body = {"inputs": {"text": text}, "mode": "async"}
        r = await c[tenant].post("/v1/workflows/vec/versions/1/runs", json=body,
                                 headers={"Idempotency-Key": "shared-3"})  # fmt: skip
        assert r.status_code == 202, r.text
        done = await c[tenant].get(f"/v1/runs/{r.json()['id']}", params={"wait": 20})
        assert done.json()["status"] == "succeeded", done.text
        runs[tenant] = done.json()
    assert runs["acme"]["id"] != runs["globex"]["id"]
    for tenant, text in (("acme", "first tenant"), ("globex", "second tenant")):
        own, _ = await _embed(c[tenant], text, None)
        assert runs[tenant]["outputs"]["vector"] == pytest.approx(own, abs=1e-5)
        assert _billed(services, runs[tenant]["id"]) == 1
