"""API keys with an expiry: issued with ``expires_at`` (audited), accepted before it, refused
with a 401 that says the key expired after it, even while the key's verification is cached."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from control.api.auth import KeyCache
from tests.api.conftest import client_for

GENERIC = "missing or invalid credentials: send Authorization: Bearer <key>"


async def _tenant(admin) -> int:  # noqa: ANN001
    r = await admin.post("/admin/tenants", json={"name": "acme"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def test_key_expiring_later_is_accepted_and_its_expiry_audited(stack, admin):
    tenant_id = await _tenant(admin)
    until = datetime.now(UTC) + timedelta(days=30)
    r = await admin.post(f"/admin/tenants/{tenant_id}/keys",
                         json={"label": "month", "expires_at": until.isoformat()})  # fmt: skip
    assert r.status_code == 201, r.text
    issued = r.json()
    assert datetime.fromisoformat(issued["expires_at"]) == until
    async with client_for(stack.app, issued["key"]) as tenant:
        assert (await tenant.get("/v1/usage")).status_code == 200
    listed = (await admin.get("/admin/keys", params={"tenant_id": tenant_id})).json()["items"]
    assert datetime.fromisoformat(listed[0]["expires_at"]) == until
    audit = (await admin.get("/admin/audit", params={"entity_type": "api_key"})).json()["items"]
    (made,) = [a for a in audit if a["action"] == "create"]
    assert made["actor"] == "admin" and made["after"]["expires_at"] is not None
    assert "key_digest" not in made["after"]


async def test_expired_key_is_refused_saying_it_expired_even_when_cached(stack, admin):
    stack.app.state.gateway.key_cache = KeyCache(600.0)  # a cached check must not outlive expiry
    tenant_id = await _tenant(admin)
    until = datetime.now(UTC) + timedelta(seconds=2)
    r = await admin.post(f"/admin/tenants/{tenant_id}/keys", json={"expires_at": until.isoformat()})
    assert r.status_code == 201, r.text
    key = r.json()["key"]
    async with client_for(stack.app, key) as tenant:
        assert (await tenant.get("/v1/usage")).status_code == 200  # verified, now cached
        await asyncio.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 0.2)
        refused = await tenant.get("/v1/usage")
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert refused.json()["detail"].startswith("this API key expired at ")
    # a forged secret under the same prefix learns nothing about the expiry
    scheme, prefix, secret = key.split("_", 2)
    async with client_for(stack.app, f"{scheme}_{prefix}_{'x' * len(secret)}") as forged:
        assert (await forged.get("/v1/usage")).json()["detail"] == GENERIC


async def test_key_issued_already_expired_is_refused_naming_the_field(stack, admin):
    tenant_id = await _tenant(admin)
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    r = await admin.post(f"/admin/tenants/{tenant_id}/keys", json={"expires_at": past})
    assert r.status_code == 422 and r.json()["field"] == "expires_at", r.text
    assert "future" in r.json()["detail"]
    r = await admin.post(f"/admin/tenants/{tenant_id}/keys", json={"expires_at": "tomorrow"})
    assert r.status_code == 422 and "expires_at" in r.text
    assert (await admin.get("/admin/keys")).json()["items"] == []  # nothing was issued
