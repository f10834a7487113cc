"""The cancel routes without a live runtime (the row only): a tenant cancels its own run
(another tenant's is 404, an ended one 409, a cancelled one answers again), the admin's
DELETE /admin/requests/{id} cancels any, and both are audited."""

from __future__ import annotations

import pytest

from tests.api.conftest import EMBED_SPEC, client_for, make_tenant

pytestmark = pytest.mark.asyncio


def _queued(services, tenant_id: int) -> str:  # noqa: ANN001
    return services.requests.create("test", tenant_id=tenant_id, workflow_name="w",
                                    workflow_version="1", body_hash="h").id  # fmt: skip


async def test_tenant_and_admin_cancel(stack, admin):
    services = stack.services
    services.models.create("test", name="e", version="1", task="embed", weights_source="declared",
                           weights_location="x", memory_mib=16)  # fmt: skip
    services.workflows.create("test", name="w", version="1", spec=EMBED_SPEC, status="active")
    acme_id, acme_key = await make_tenant(admin, "acme")
    _, globex_key = await make_tenant(admin, "globex")
    run = _queued(services, acme_id)
    async with client_for(stack.app, acme_key) as acme, client_for(stack.app, globex_key) as gx:
        assert (await gx.post(f"/v1/runs/{run}/cancel")).status_code == 404
        assert (await acme.post("/v1/runs/nope/cancel")).status_code == 404
        r = await acme.post(f"/v1/runs/{run}/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
        again = await acme.post(f"/v1/runs/{run}/cancel")
        assert again.status_code == 200 and again.json()["status"] == "cancelled"
        done = _queued(services, acme_id)
        services.requests.start("test", done)
        services.requests.finish("test", done, "succeeded")
        ended = await acme.post(f"/v1/runs/{done}/cancel")
        assert ended.status_code == 409, ended.text  # nothing changes
        assert services.requests.get(done).status == "succeeded"
        other = _queued(services, acme_id)
        d = await admin.delete(f"/admin/requests/{other}")
        assert d.status_code == 200 and d.json()["status"] == "cancelled", d.text
    audited = {a.entity_id for a in services.audit.page(entity_type="request", limit=20).items}
    assert {run, other} <= audited
