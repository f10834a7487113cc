"""Autoscaling settings over the admin API: fields of a model (min_replicas, max_replicas,
scale_out_delay_ms, idle_ms), set on create and by PATCH (null max_replicas turns autoscaling
off), audited, admin only, and refused with a 422 naming the field(s) where they contradict
each other as the row would hold them (nothing written)."""

from __future__ import annotations

import pytest

from tests.api.conftest import client_for, make_tenant
from tests.services.builders import row_counts

EMB = {"name": "emb", "version": "1", "task": "embed", "weights_source": "declared",
       "weights_location": "twin only", "memory_mib": 100}  # fmt: skip
SCALING = {"min_replicas": 1, "max_replicas": 3, "scale_out_delay_ms": 200, "idle_ms": 30000}


async def test_settings_round_trip_and_the_change_is_audited(admin) -> None:
    r = await admin.post("/admin/models", json=EMB)
    assert r.status_code == 201, r.text
    assert (r.json()["min_replicas"], r.json()["max_replicas"]) == (0, None)  # off by default
    item = f"/admin/models/{r.json()['id']}"
    r = await admin.patch(item, json=SCALING)
    assert r.status_code == 200, r.text
    got = (await admin.get(item)).json()
    assert {k: got[k] for k in SCALING} == SCALING
    audit = (await admin.get("/admin/audit", params={"entity_type": "model"})).json()["items"]
    update = next(a for a in audit if a["action"] == "update")
    assert (update["before"]["max_replicas"], update["after"]["max_replicas"]) == (None, 3)
    r = await admin.patch(item, json={"max_replicas": None})  # off again
    assert r.status_code == 200 and r.json()["max_replicas"] is None
    made = await admin.post("/admin/models", json={**EMB, "name": "emb2", **SCALING})
    assert made.status_code == 201 and made.json()["idle_ms"] == 30000


@pytest.mark.parametrize(
    ("start", "change", "named"),
    [
        ({}, {"min_replicas": 3, "max_replicas": 2}, ("min_replicas", "max_replicas")),
        (SCALING, {"min_replicas": 4}, ("min_replicas", "max_replicas")),  # stored max is 3
        (SCALING, {"max_replicas": 0}, ("max_replicas",)),
        ({}, {"min_replicas": -1}, ("min_replicas",)),
        ({}, {"scale_out_delay_ms": 0}, ("scale_out_delay_ms",)),
        ({}, {"idle_ms": -5}, ("idle_ms",)),
        ({}, {"idle_ms": "soon"}, ("idle_ms",)),
    ],
)  # fmt: skip
async def test_bad_settings_are_refused_naming_the_fields_and_write_nothing(
    stack, admin, start: dict, change: dict, named: tuple
) -> None:
    made = (await admin.post("/admin/models", json={**EMB, **start})).json()
    before = row_counts(stack.factory)
    r = await admin.patch(f"/admin/models/{made['id']}", json=change)
    assert r.status_code == 422, r.text
    body = r.json()
    for name in named:
        assert name in body["detail"] or name in (body["field"] or ""), body
    assert row_counts(stack.factory) == before
    assert (await admin.get(f"/admin/models/{made['id']}")).json() == made


async def test_create_with_min_above_max_is_refused_naming_both(stack, admin) -> None:
    before = row_counts(stack.factory)
    r = await admin.post("/admin/models", json={**EMB, "min_replicas": 5, "max_replicas": 2})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "min_replicas" and "max_replicas" in r.json()["detail"]
    assert row_counts(stack.factory) == before


async def test_only_an_admin_changes_the_settings(stack, admin, anon) -> None:
    made = (await admin.post("/admin/models", json=EMB)).json()
    item = f"/admin/models/{made['id']}"
    assert (await anon.patch(item, json={"max_replicas": 2})).status_code == 401
    _, key = await make_tenant(admin, "acme")
    async with client_for(stack.app, key) as tenant:
        assert (await tenant.patch(item, json={"max_replicas": 2})).status_code == 403
    assert (await admin.get(item)).json()["max_replicas"] is None
