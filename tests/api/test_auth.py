"""Authentication and authorisation through the real app: one generic 401 for every bad
credential, 403 for the wrong kind of credential, revocation and suspension at once."""

from __future__ import annotations

import pytest

from tests.api.conftest import ADMIN_TOKEN, client_for, make_tenant

GENERIC_401 = {
    "error": "unauthorized",
    "detail": "missing or invalid credentials: send Authorization: Bearer <key>",
    "field": None,
    "problems": [],
}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic YWRtaW46YWRtaW4="},
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": "Bearer lg_000000000000_wrongsecret"},
        {"Authorization": f"Bearer {ADMIN_TOKEN}x"},
    ],
    ids=["missing", "empty", "basic", "malformed", "unknown-prefix", "near-admin"],
)
async def test_every_bad_credential_gets_the_same_401(stack, headers):
    async with client_for(stack.app, None) as client:
        for path in ("/v1/usage", "/admin/tenants"):
            r = await client.get(path, headers=headers)
            assert r.status_code == 401
            assert r.json() == GENERIC_401
            assert r.headers["WWW-Authenticate"] == "Bearer"


async def test_wrong_secret_of_a_real_prefix_is_the_generic_401(stack, admin):
    _, key = await make_tenant(admin, "acme")
    scheme, prefix, secret = key.split("_", 2)
    forged = f"{scheme}_{prefix}_{'x' * len(secret)}"
    async with client_for(stack.app, forged) as client:
        r = await client.get("/v1/usage")
    assert r.status_code == 401 and r.json() == GENERIC_401


async def test_revoked_key_stops_working_at_once(stack, admin):
    _, key = await make_tenant(admin, "acme")
    async with client_for(stack.app, key) as tenant:
        assert (await tenant.get("/v1/usage")).status_code == 200  # now cached as valid
        key_id = (await admin.get("/admin/keys")).json()["items"][0]["id"]
        r = await admin.post(f"/admin/keys/{key_id}/revoke")
        assert r.status_code == 200 and r.json()["revoked_at"] is not None
        r = await tenant.get("/v1/usage")
        assert r.status_code == 401 and r.json() == GENERIC_401


async def test_suspended_tenant_is_refused(stack, admin):
    tenant_id, key = await make_tenant(admin, "acme")
    async with client_for(stack.app, key) as tenant:
        assert (await tenant.get("/v1/usage")).status_code == 200
        r = await admin.patch(f"/admin/tenants/{tenant_id}", json={"status": "suspended"})
        assert r.status_code == 200
        assert (await tenant.get("/v1/usage")).status_code == 401


async def test_tenant_key_on_admin_route_is_403(stack, admin):
    _, key = await make_tenant(admin, "acme")
    async with client_for(stack.app, key) as tenant:
        for method, path in (("GET", "/admin/tenants"), ("POST", "/admin/nodes"),
                             ("GET", "/admin/audit"), ("GET", "/admin/usage")):  # fmt: skip
            r = await tenant.request(method, path, json={"name": "n"})
            assert r.status_code == 403, (method, path, r.text)
            assert r.json()["error"] == "forbidden"


async def test_admin_token_cannot_spend_a_tenants_quota(admin):
    r = await admin.post("/v1/embeddings", json={"model": "m", "input": "hi"})
    assert r.status_code == 403
    assert "tenant API key" in r.json()["detail"]


async def test_no_admin_token_configured_means_no_admin(tmp_path, _sqlite_template):
    from control.api.settings import GatewayConfig
    from tests.api.conftest import build_stack

    stack = build_stack(tmp_path / "x.db", _sqlite_template, config=GatewayConfig())
    async with client_for(stack.app, "") as client:
        assert (await client.get("/admin/tenants")).status_code == 401


async def test_tenant_sees_only_its_own_usage(stack, admin):
    acme_id, acme_key = await make_tenant(admin, "acme")
    globex_id, _ = await make_tenant(admin, "globex")
    async with client_for(stack.app, acme_key) as acme:
        r = await acme.get("/v1/usage")
        assert r.status_code == 200 and r.json()["tenant_id"] == acme_id
        r = await acme.get("/v1/usage", params={"tenant_id": globex_id})
        assert r.status_code == 403
