"""Quota and tenant changes made through the admin API reach the running core without a restart
(issue 25, item 2): the real gateway with a real worker and the tiny embedder. A quota created,
then edited to nothing, refuses the tenant's next call; edited back, it serves it again; the
live snapshot holds each edited value, and a tenant's new weight and cohort too."""

from __future__ import annotations

import pytest
import pytest_asyncio
import torch

from tests.support.live_gateway import embed_clients, live_world, seed_embed_fleet

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
CALL = {"model": "tiny-embed", "input": "hello"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("quota-live"), _sqlite_template, ("bert",))
    seed_embed_fleet(world.services)
    async with embed_clients(world) as clients:
        yield clients


async def _acme(admin) -> dict:  # noqa: ANN001
    snap = (await admin.get("/admin/snapshot")).json()
    return next(t for t in snap["tenancy"]["tenants"] if t["tenant_id"] == "acme")


def _applied(response) -> None:  # noqa: ANN001
    assert response.status_code in (200, 201, 204), response.text
    assert response.headers["X-Legato-Live-Config"].startswith("applied"), response.headers


async def test_a_quota_edited_through_the_api_applies_to_the_running_core(live):
    client, admin = live
    tenant = (await admin.get("/admin/tenants", params={"name": "acme"})).json()["items"][0]
    made = await admin.post("/admin/quotas", json={
        "tenant_id": tenant["id"], "resource": "requests_per_min", "nominal": 100,
        "borrowing_limit": 0, "lending_limit": 0})  # fmt: skip
    _applied(made)
    assert (await client.post("/v1/embeddings", json=CALL)).status_code == 200
    quota_id = made.json()["id"]
    _applied(await admin.patch(f"/admin/quotas/{quota_id}", json={"nominal": 0}))
    (use,) = (await _acme(admin))["quota"]
    assert (use["resource"], use["nominal"]) == ("requests_per_min", 0)
    refused = await client.post("/v1/embeddings", json=CALL)
    assert refused.status_code == 429, refused.text
    _applied(await admin.patch(f"/admin/quotas/{quota_id}", json={"nominal": 100}))
    assert (await client.post("/v1/embeddings", json=CALL)).status_code == 200
    assert (await _acme(admin))["quota"][0]["nominal"] == 100
    _applied(await admin.delete(f"/admin/quotas/{quota_id}"))
    assert (await _acme(admin))["quota"] == []


async def test_a_tenants_weight_and_cohort_changed_through_the_api_apply_live(live):
    _, admin = live
    tenant = (await admin.get("/admin/tenants", params={"name": "acme"})).json()["items"][0]
    cohort = await admin.post("/admin/cohorts", json={"name": "research"})
    _applied(cohort)
    change = {"weight": 7, "cohort_id": cohort.json()["id"]}
    _applied(await admin.patch(f"/admin/tenants/{tenant['id']}", json=change))
    now = await _acme(admin)
    assert (now["weight"], now["cohort"]) == (7, "research")
    _applied(await admin.patch(f"/admin/tenants/{tenant['id']}", json={"cohort_id": None}))
    assert (await _acme(admin))["cohort"] is None
