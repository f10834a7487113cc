"""The operator sets a tenant's ``strict_priority`` through the admin API: validated (422
naming the field, nothing changed), audited, and read into the core's tenancy config."""

from __future__ import annotations

from control.store.tenancy_snapshot import load_tenancy_config


async def test_strict_priority_is_set_audited_and_reaches_the_core_config(admin, anon, stack):
    created = (await admin.post("/admin/tenants", json={"name": "acme", "weight": 2})).json()
    assert created["strict_priority"] is False
    item = f"/admin/tenants/{created['id']}"

    r = await admin.patch(item, json={"strict_priority": True})
    assert r.status_code == 200, r.text
    assert r.json()["strict_priority"] is True

    audit = (await admin.get("/admin/audit", params={"entity_id": str(created["id"])})).json()
    updates = [
        a for a in audit["items"] if a["entity_type"] == "tenant" and a["action"] == "update"
    ]
    assert updates and updates[0]["actor"] == "admin"
    assert updates[0]["before"]["strict_priority"] is False
    assert updates[0]["after"]["strict_priority"] is True

    with stack.factory() as session:
        (spec,) = load_tenancy_config(session).tenants
    assert spec.tenant_id == "acme" and spec.strict_priority is True


async def test_bad_strict_priority_is_refused_and_changes_nothing(admin, anon):
    created = (await admin.post("/admin/tenants", json={"name": "acme"})).json()
    item = f"/admin/tenants/{created['id']}"
    for bad in ("yes", 1, None):
        r = await admin.patch(item, json={"strict_priority": bad})
        assert r.status_code == 422, (bad, r.text)
        assert "strict_priority" in r.text
    r = await admin.post("/admin/tenants", json={"name": "x", "strict_priority": "on"})
    assert r.status_code == 422 and "strict_priority" in r.text
    assert (await anon.patch(item, json={"strict_priority": True})).status_code in (401, 403)
    assert (await admin.get(item)).json()["strict_priority"] is False
