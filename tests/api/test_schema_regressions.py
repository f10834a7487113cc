"""Regressions of the server errors Schemathesis found (``test_schema_seeded.py``), each a
clear 4xx/503 with a JSON body or a plain answer instead of a 5xx in a started response."""

from __future__ import annotations

import pytest

from tests.api.conftest import EMBED_SPEC, client_for, make_tenant

pytestmark = pytest.mark.asyncio


def _queued(services, tenant_id: int) -> str:  # noqa: ANN001
    services.models.create("test", name="e", version="1", task="embed", weights_source="declared",
                           weights_location="x", memory_mib=16)  # fmt: skip
    services.workflows.create("test", name="w", version="1", spec=EMBED_SPEC, status="active")
    return services.requests.create("test", tenant_id=tenant_id, workflow_name="w",
                                    workflow_version="1", body_hash="h").id  # fmt: skip


async def test_events_of_a_going_run_without_a_runtime_is_a_json_503(stack, admin):
    """The stream used to start (200) and then raise inside it: a broken response."""
    acme_id, key = await make_tenant(admin, "acme")
    run = _queued(stack.services, acme_id)
    async with client_for(stack.app, key) as acme:
        r = await acme.get(f"/v1/runs/{run}/events")
    assert r.status_code == 503, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert "runtime" in r.json()["detail"]


async def test_events_of_an_ended_run_answer_its_result_without_a_runtime(stack, admin):
    acme_id, key = await make_tenant(admin, "acme")
    run = _queued(stack.services, acme_id)
    async with client_for(stack.app, key) as acme:
        assert (await acme.post(f"/v1/runs/{run}/cancel")).status_code == 200
        r = await acme.get(f"/v1/runs/{run}/events")
    assert r.status_code == 200, r.text
    assert r.text.startswith("event: cancelled\n") and f'"id": "{run}"' in r.text
