"""A tenant's default ``quality`` class and ``allow_degrade`` (precision variants, issue 27) are
set through the admin API: validated (422 naming the field, nothing changed), audited, read into
the core's tenancy config; the published document carries them, a run's ``quality`` and the
ledger's ``variant``/``adapter``."""

from __future__ import annotations

from control.store.tenancy_snapshot import load_tenancy_config


async def test_quality_and_allow_degrade_are_set_audited_and_reach_the_core(admin, stack):
    created = (await admin.post("/admin/tenants", json={"name": "acme", "quality": "fast"})).json()
    assert (created["quality"], created["allow_degrade"]) == ("fast", False)
    item = f"/admin/tenants/{created['id']}"
    r = await admin.patch(item, json={"quality": "exact", "allow_degrade": True})
    assert r.status_code == 200, r.text
    assert (r.json()["quality"], r.json()["allow_degrade"]) == ("exact", True)
    audit = (await admin.get("/admin/audit", params={"entity_id": str(created["id"])})).json()
    (update,) = [a for a in audit["items"] if a["entity_type"] == "tenant"
                 and a["action"] == "update"]  # fmt: skip
    assert update["before"]["quality"] == "fast" and update["after"]["allow_degrade"] is True
    with stack.factory() as session:
        (spec,) = load_tenancy_config(session).tenants
    assert (spec.quality, spec.allow_degrade) == ("exact", True)


async def test_bad_quality_or_allow_degrade_is_refused_and_changes_nothing(admin, anon):
    created = (await admin.post("/admin/tenants", json={"name": "acme"})).json()
    item = f"/admin/tenants/{created['id']}"
    for field, bad in (("quality", "perfect"), ("quality", 3), ("allow_degrade", "yes"),
                       ("allow_degrade", 1)):  # fmt: skip
        r = await admin.patch(item, json={field: bad})
        assert r.status_code == 422, (field, bad, r.text)
        assert field in r.text
    r = await admin.post("/admin/tenants", json={"name": "x", "quality": "cheap"})
    assert r.status_code == 422 and "quality" in r.text
    assert (await anon.patch(item, json={"quality": "fast"})).status_code in (401, 403)
    now = (await admin.get(item)).json()
    assert (now["quality"], now["allow_degrade"]) == (None, False)


async def test_the_published_document_carries_the_variant_fields(admin):
    doc = (await admin.get("/openapi.json")).json()["components"]["schemas"]
    assert {"variant", "adapter"} <= set(doc["UsageOut"]["properties"])
    assert {"quality", "degradations"} <= set(doc["RunOut"]["properties"])
    assert "VariantNote" in doc
    run_quality = doc["RunCreate"]["properties"]["quality"]["anyOf"][0]["enum"]
    assert run_quality == ["exact", "balanced", "fast"]
    for name in ("TenantCreate", "TenantUpdate", "TenantOut"):
        assert {"quality", "allow_degrade"} <= set(doc[name]["properties"]), name
    assert "variant" in doc["PlacementCreate"]["properties"]
